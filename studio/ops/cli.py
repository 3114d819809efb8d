"""studio: serve the web studio, run extra workers, manage accounts, back up, check, audit."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import getpass
import logging
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypeVar

from studio import logs
from studio.config import Settings, from_environment
from studio.ops import accounts
from studio.store.keys import alive, signing_keys

log = logging.getLogger("studio.cli")
T = TypeVar("T")


class CommandError(Exception):
    """A command that cannot be done: its message is printed and the exit status is 1."""


def _version() -> str:
    try:
        return version("studio")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _settings(args: argparse.Namespace) -> Settings:
    # --db and the other flags go through the environment, so uvicorn's worker processes,
    # which build the app themselves, see the same settings.
    if getattr(args, "db", None):
        if args.db.startswith(("postgresql://", "postgres://")):
            os.environ["STUDIO_DATABASE_URL"] = args.db
        else:
            os.environ["STUDIO_DB"] = args.db
    return from_environment()


# --- serve and worker ------------------------------------------------------------------------


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from studio.counters import MULTIPROCESS_ENV
    from studio.store.db import database_name, prepare_database
    from studio.store.transactions import DatabaseUnavailable, SchemaTooNew

    if args.demo:
        os.environ["STUDIO_DEMO"] = "1"
    if args.proxy_headers:
        os.environ["STUDIO_PROXY_HEADERS"] = "1"
    settings = _settings(args)
    logs.configure(settings.log_format)
    if args.workers < 1:
        raise CommandError("--workers must be at least 1.")
    # Each serving process sizes its receipt readers by how many share the machine's cores.
    os.environ["WEB_CONCURRENCY"] = str(args.workers)
    try:
        signing_keys(settings)  # a readable key file stops the start here, with how to fix it
        prepare_database(settings)  # migrate once, before any worker process starts
    except SchemaTooNew as error:
        raise CommandError(str(error)) from None
    except DatabaseUnavailable as error:
        raise CommandError(unreachable(settings, error)) from None
    if args.workers > 1 and not os.environ.get(MULTIPROCESS_ENV):
        # Counters from every worker process are summed from files here (see metrics.py).
        _remove_counters_of_the_dead()
        counters = tempfile.mkdtemp(prefix=f"{COUNTERS_PREFIX}{os.getpid()}-")
        os.environ[MULTIPROCESS_ENV] = counters
        atexit.register(shutil.rmtree, counters, True)
    started = {"version": _version(), "db": database_name(settings),
               "address": f"http://{args.host}:{args.port}", "workers": args.workers,
               "proxy_headers": settings.proxy_headers}
    log.info("studio %s serving %s on %s with %d worker process(es)%s", started["version"],
             started["db"], started["address"], args.workers,
             ", trusting proxy headers" if settings.proxy_headers else "",
             extra={logs.FIELDS: started})
    uvicorn.run("app:create_app", factory=True, host=args.host, port=args.port,
                workers=args.workers, forwarded_allow_ips=args.forwarded_allow_ips,
                **server_settings(settings))


SHUTDOWN_GRACE_S = 10


def server_settings(settings: Settings) -> dict[str, Any]:
    """How uvicorn serves the studio (bench/bare.py serves its baseline the same way)."""
    return {
        "log_config": logs.dict_config(settings.log_format), "access_log": False,
        "proxy_headers": settings.proxy_headers,
        # Bounds on what one client may hold: a header block, a connection idling between
        # requests, and connections in all (past it, 503). A front proxy adds more: README.
        "h11_max_incomplete_event_size": 16 * 1024,
        "limit_concurrency": settings.max_connections, "timeout_keep_alive": 5,
        # Answers do not name the server's software and version.
        "server_header": False,
        # A stop waits this long for requests in flight, then cancels them: shutdown takes
        # seconds whatever a client or a model server is doing.
        "timeout_graceful_shutdown": SHUTDOWN_GRACE_S,
    }


COUNTERS_PREFIX = "studio-metrics-"


def _remove_counters_of_the_dead() -> None:
    """A clean stop removes its own counters folder; one killed (kill -9, a power cut)
    cannot. The folder names the pid of `studio serve`, and each of its files the pid of the
    worker process writing it (`counter_<pid>.db`): removed once none of them lives, as a
    worker can outlive a killed parent."""
    for folder in Path(tempfile.gettempdir()).glob(f"{COUNTERS_PREFIX}*-*"):
        pids = [folder.name.removeprefix(COUNTERS_PREFIX).split("-", 1)[0]]
        pids += [file.stem.rsplit("_", 1)[-1] for file in folder.glob("*.db")]
        if all(pid.isdigit() and not alive(int(pid)) for pid in pids):
            shutil.rmtree(folder, ignore_errors=True)


async def _work() -> None:
    from studio.leasing.providers import Providers
    from studio.runtime.worker import Worker
    from studio.store.db import open_database

    settings = from_environment()
    db = await open_database(settings).open()
    try:
        worker = Worker(db, Providers(settings), settings)
        runner = asyncio.create_task(worker.run())
        loop = asyncio.get_running_loop()
        for stop in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(stop, runner.cancel)
        logging.getLogger("studio.worker").info("worker %s started on %s", worker.name,
                                                db.path)
        await runner
    except asyncio.CancelledError:
        pass
    finally:
        await db.close()


def work(args: argparse.Namespace) -> None:
    from studio.store.transactions import DatabaseUnavailable, SchemaTooNew

    settings = _settings(args)
    logs.configure(settings.log_format)
    try:
        asyncio.run(_work())
    except SchemaTooNew as error:
        raise CommandError(str(error)) from None
    except DatabaseUnavailable as error:
        raise CommandError(unreachable(settings, error)) from None


def unreachable(settings: Settings, error: Exception) -> str:
    """Why the database cannot be reached, naming it without its password."""
    from studio.store.db import database_name

    reason = str(error).replace(settings.database_url, "<the database URL>") \
        if settings.database_url else str(error)
    return f"The database {database_name(settings)} cannot be reached: {reason}"


# --- accounts --------------------------------------------------------------------------------


def _store(settings: Settings) -> sqlite3.Connection:
    from studio.store.db import connect_to
    from studio.store.transactions import DatabaseUnavailable, SchemaTooNew

    try:
        return connect_to(settings)
    except SchemaTooNew as error:
        raise CommandError(str(error)) from None
    except DatabaseUnavailable as error:
        raise CommandError(unreachable(settings, error)) from None


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise CommandError("No terminal to ask for the password: pipe it in with "
                           "--password-stdin.")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Password again: ") != first:
        raise CommandError("The two passwords differ; nothing was changed.")
    return first


def users(args: argparse.Namespace) -> None:
    from studio.store.transactions import in_transaction

    settings = _settings(args)
    logs.configure(settings.log_format)
    try:
        if args.action == "list":
            db = _store(settings)
            try:
                found = in_transaction(db, accounts.accounts)
            finally:
                db.close()
            if not found:
                print(f"No accounts yet. Add one: {accounts.first_account_command(settings)}")
            for account in found:
                state = "disabled" if account.disabled_at else "active"
                print(f"{account.email:40} {state:8} {account.sessions:3} session(s)"
                      f"  since {_day(account.created_at)}")
            return
        email = accounts.normal_email(args.email)
        if args.action in ("add", "passwd"):
            password_hash = accounts.hash_password(_password(args.password_stdin))
        db = _store(settings)
        try:
            if args.action == "add":
                in_transaction(db, accounts.add, email, password_hash)
                print(f"Added {email}. They can sign in now.")
            elif args.action == "passwd":
                ended = in_transaction(db, accounts.change_password, email, password_hash)
                print(f"Changed the password of {email}; ended {ended} session(s).")
            else:
                sessions, expired = in_transaction(db, accounts.disable, email)
                print(f"Disabled {email}: ended {sessions} session(s), expired {expired}"
                      " open lease(s).")
        finally:
            db.close()
    except accounts.AccountError as error:
        raise CommandError(str(error)) from None


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


# --- backup and check ------------------------------------------------------------------------


def take_backup(args: argparse.Namespace) -> None:
    from studio.ops.backup import BackupError, backup

    settings = _settings(args)
    copied = _looking_at(settings, lambda: backup(settings, Path(args.dest)), BackupError)
    print(f"database: {copied.db_path}")
    if copied.key_file:
        print(f"key file: {copied.key_file}")
    elif settings.secret_key:
        print("key file: none; the key is STUDIO_SECRET_KEY: keep it with this backup")
    elif settings.database_url:
        print("key file: none; the key is kept in the database, and so in this backup")
    print(f"attachments: {copied.files_dir or _bytes_kept(settings)}")
    for finding in copied.findings:
        print(finding.line())
    if not all(finding.ok for finding in copied.findings):
        raise CommandError("The copy did not pass its checks; keep the original.")


def _bytes_kept(settings: Settings) -> str:
    if settings.database_url and settings.files_dir is None:
        return "in the database, and so in this backup"
    return "none yet"


def _looking_at(settings: Settings, run: Callable[[], T], *refused: type[Exception]) -> T:
    """Run a command that reads the database; a newer schema, an unreachable database or
    `refused` are its message and exit status 1."""
    from studio.store.transactions import DatabaseUnavailable, SchemaTooNew

    if not settings.database_url and not settings.db_path.is_file():
        raise CommandError(f"There is no database at {settings.db_path}.")
    try:
        return run()
    except (SchemaTooNew, *refused) as error:
        raise CommandError(str(error)) from None
    except DatabaseUnavailable as error:
        raise CommandError(unreachable(settings, error)) from None


def check(args: argparse.Namespace) -> None:
    from studio.ops.checks import Target, run_checks

    settings = _settings(args)
    findings = _looking_at(settings, lambda: run_checks(Target(settings)))
    for finding in findings:
        print(finding.line())
    if not all(finding.ok for finding in findings):
        raise CommandError("Some checks failed.")


def audit(args: argparse.Namespace) -> None:
    from studio.ops.audit import audit_database
    from studio.store.db import database_name

    settings = _settings(args)
    found = _looking_at(settings, lambda: audit_database(settings))
    name = database_name(settings) if settings.database_url else settings.db_path
    for problem in found:
        print(problem)
    if found:
        raise CommandError(f"{name}: {len(found)} problem(s)")
    print(f"{name}: every series is gapless, every issued invoice matches its frozen hash,"
          " every credit is within its invoice")


def import_file(args: argparse.Namespace) -> None:
    """The whole file is read and checked first; then one short transaction inserts it."""
    from studio.ops.imports import ImportError_, import_drafts, read_file
    from studio.store.transactions import in_snapshot

    settings = _settings(args)
    logs.configure(settings.log_format)
    try:
        prepared = read_file(Path(args.file))
        email = accounts.normal_email(args.owner)
        db = _store(settings)
        try:
            owner = in_snapshot(db, accounts.actor_of, email)
            outcome = import_drafts(db, owner, prepared, dry_run=args.dry_run)
        finally:
            db.close()
    except ImportError_ as error:
        for problem in error.problems[:SHOWN_PROBLEMS]:
            print(problem, file=sys.stderr)
        if len(error.problems) > SHOWN_PROBLEMS:
            print(f"... and {len(error.problems) - SHOWN_PROBLEMS} more.", file=sys.stderr)
        raise CommandError(f"Nothing was imported: {len(error.problems)} problem(s) in "
                           f"{args.file}.") from None
    except accounts.AccountError as error:
        raise CommandError(str(error)) from None
    if args.dry_run:  # a dry run makes no customers, so it has none to count
        made = f"Would import {outcome.made} new draft(s)"
    else:
        made = f"Imported {outcome.made} new draft(s) and {outcome.customers} new customer(s)"
    print(f"{made} for {email}; {outcome.already} were imported before and stay as they are.")


SHOWN_PROBLEMS = 200


# --- the command line -------------------------------------------------------------------------


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH_OR_URL",
                        help="the SQLite file (the same as STUDIO_DB; default studio.db here), or"
                        " a postgresql://user:pass@host:5432/name URL (as STUDIO_DATABASE_URL)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="studio", description=__doc__)
    top.add_argument("--version", action="version", version=f"studio {_version()}",
                     help="print the studio's version and exit")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve_command = commands.add_parser("serve", help="the web studio, its worker and sweeper")
    serve_command.add_argument("--host", default="127.0.0.1",
                               help="the address to listen on (default 127.0.0.1)")
    serve_command.add_argument("--port", type=int, default=8000,
                               help="the port to listen on (default 8000)")
    serve_command.add_argument("--demo", action="store_true",
                               help="seed Ada and Ben (password studio-demo) if absent")
    _db_option(serve_command)
    serve_command.add_argument("--workers", type=int, default=1, metavar="N",
                               help="web processes sharing the port and the database, each "
                                    "with its embedded worker and sweeper (default 1)")
    serve_command.add_argument("--proxy-headers", action="store_true",
                               help="behind a TLS proxy: trust its X-Forwarded-For/-Proto and "
                                    "mark the session cookie Secure")
    serve_command.add_argument("--forwarded-allow-ips", default="127.0.0.1", metavar="IPS",
                               help="with --proxy-headers, the proxy addresses to trust, comma "
                                    "separated (default 127.0.0.1)")
    serve_command.set_defaults(run=serve)

    worker_command = commands.add_parser("worker",
                                         help="an extra worker process on the same database")
    _db_option(worker_command)
    worker_command.set_defaults(run=work)

    users_command = commands.add_parser("users", help="add, list, disable accounts; passwords")
    actions = users_command.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="make an account (asks for its password)")
    passwd = actions.add_parser("passwd", help="set a new password; every session ends")
    disable = actions.add_parser(
        "disable", help="disable an account: its sessions end and its open leases expire now")
    listing = actions.add_parser("list", help="every account, active or disabled")
    for action in (add, passwd, disable):
        action.add_argument("email", metavar="EMAIL", help="the account's email address")
    for action in (add, passwd):
        action.add_argument("--password-stdin", action="store_true",
                            help="read the password from the first line of standard input")
    for action in (add, passwd, disable, listing):
        _db_option(action)
    users_command.set_defaults(run=users)

    backup_command = commands.add_parser(
        "backup", help="copy the database, key file and attachments while the studio serves"
                       " (PostgreSQL: pg_dump --format=custom)")
    backup_command.add_argument("dest", metavar="DEST", help="a new or empty folder")
    _db_option(backup_command)
    backup_command.set_defaults(run=take_backup)

    check_command = commands.add_parser(
        "check", help="the database's integrity, the audit, and attachment bytes against their"
                      " rows")
    _db_option(check_command)
    check_command.set_defaults(run=check)

    audit_command = commands.add_parser(
        "audit", help="check every series is gapless, every issued invoice matches its frozen "
                      "hash, every credit within its invoice")
    _db_option(audit_command)
    audit_command.set_defaults(run=audit)

    import_command = commands.add_parser(
        "import", help="drafts from a CSV or JSON file, all or nothing; twice is once")
    import_command.add_argument("file", metavar="FILE", help="a .csv with the header "
                                "external_id,customer,currency,due_date,description,quantity,"
                                "unit_price,tax_rate, or a .json list of drafts")
    import_command.add_argument("--owner", required=True, metavar="EMAIL",
                                help="the account the drafts belong to")
    import_command.add_argument("--dry-run", action="store_true",
                                help="check everything and say what would be made; write nothing")
    _db_option(import_command)
    import_command.set_defaults(run=import_file)
    return top


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except CommandError as error:
        print(f"studio: {error}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
