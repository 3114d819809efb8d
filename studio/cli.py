"""`studio serve` and `studio worker`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from studio.config import from_environment, signing_key


def serve(host: str, port: int, demo: bool) -> None:
    import uvicorn

    from app import create_app

    settings = from_environment().with_changes(demo=demo)
    signing_key(settings)  # a readable key file stops the start here, with how to fix it
    # Bounds on what one client may hold: a header block, a connection idling between requests,
    # and connections in all (past it, 503). A front proxy should add more: see README.
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info",
                access_log=False, h11_max_incomplete_event_size=16 * 1024,
                limit_concurrency=settings.max_connections, timeout_keep_alive=5)


async def _work() -> None:
    from studio.db import Database
    from studio.providers import Providers
    from studio.worker import Worker

    settings = from_environment()
    db = await Database(settings.db_path).open()
    worker = Worker(db, Providers(settings), settings)
    runner = asyncio.create_task(worker.run())
    loop = asyncio.get_running_loop()
    for stop in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(stop, runner.cancel)
    logging.getLogger("studio.worker").info("worker %s started on %s", worker.name,
                                            settings.db_path)
    try:
        await runner
    except asyncio.CancelledError:
        pass
    finally:
        await db.close()


def audit() -> int:
    from studio.audit import audit_file

    path = from_environment().db_path
    if not path.exists():
        print(f"no database at {path}")
        return 2
    found = audit_file(path)
    for problem in found:
        print(problem)
    print(f"{path}: {len(found)} problem(s)" if found else f"{path}: every series is gapless, "
          "every issued invoice matches its frozen hash, every credit is within its invoice")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="studio", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve_command = commands.add_parser("serve", help="the web studio, its worker and sweeper")
    serve_command.add_argument("--host", default="127.0.0.1")
    serve_command.add_argument("--port", type=int, default=8000)
    serve_command.add_argument("--demo", action="store_true",
                               help="seed Ada and Ben (password studio-demo) if absent")
    commands.add_parser("worker", help="an extra worker process on the same database")
    commands.add_parser("audit", help="check every series is gapless, every issued invoice "
                                      "matches its frozen hash, every credit within its invoice")
    args = parser.parse_args(argv)
    if args.command == "audit":
        raise SystemExit(audit())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.command == "serve":
        serve(args.host, args.port, args.demo)
    else:
        asyncio.run(_work())


if __name__ == "__main__":
    main()
