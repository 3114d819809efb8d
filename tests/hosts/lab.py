"""Several hosts on one machine: each a network namespace of its own on a bridge, a few
milliseconds from the others, running PostgreSQL or a studio process.

Everything is named after the pid of the test run (`sth<pid>-a`, `sth<pid>br`,
`/tmp/studio-hosts-<pid>-...`), so two runs never meet, and a run that was itself killed is
cleaned up by the next one once its pid is gone (`remove_leftovers`). Needs root.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from studio.store.keys import alive

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "sth"
FOLDER_PREFIX = "studio-hosts-"
DATABASE_PORT = 5432
STUDIO_PORT = 8000


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def can_run() -> str | None:
    """Why this machine cannot run the hosts, or None when it can."""
    if os.geteuid() != 0:
        return "needs root: network namespaces, veth pairs and a PostgreSQL run as postgres"
    if not {CAP_NET_ADMIN, CAP_SYS_ADMIN} <= capabilities():
        return "needs CAP_NET_ADMIN and CAP_SYS_ADMIN (a privileged container) for `ip netns`"
    for tool in ("ip", "runuser"):
        if shutil.which(tool) is None:
            return f"needs the `{tool}` command"
    if postgres_bin() is None:
        return "needs the PostgreSQL server (Debian: apt-get install postgresql)"
    try:
        run("id", "postgres")
    except RuntimeError:
        return "needs the `postgres` system user to run PostgreSQL as"
    return None


CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21


def capabilities() -> set[int]:
    """The effective capabilities of this process, by number."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            mask = int(line.split()[1], 16)
            return {bit for bit in range(64) if mask >> bit & 1}
    return set()


def postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                   key=lambda path: int(path.parent.parent.name)
                   if path.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else None


# --- the network -----------------------------------------------------------------------------


def kill_namespace(name: str) -> None:
    """Every process still in the namespace, then the namespace."""
    deadline = time.monotonic() + 10
    while pids := run("ip", "netns", "pids", name, check=False).stdout.split():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    run("ip", "netns", "del", name, check=False)


def remove_leftovers() -> None:
    """What a run killed before its own clean-up left behind, once its pid is gone: its
    namespaces with every process in them, its bridge, its folder."""
    def dead(name: str, pattern: str) -> bool:
        found = re.fullmatch(pattern, name)
        return found is not None and not alive(int(found[1]))

    for line in run("ip", "netns", "list").stdout.splitlines():
        if line.strip() and dead(line.split()[0], rf"{PREFIX}(\d+)-\w+"):
            kill_namespace(line.split()[0])
    # A veth's namespace end can outlive its namespace's name a while (its sockets still
    # closing): removing this end removes both.
    for line in run("ip", "-o", "link").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if dead(name, rf"{PREFIX}(\d+)(?:br|v\d+)"):
            run("ip", "link", "del", name, check=False)
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        if dead(folder.name, rf"{FOLDER_PREFIX}(\d+)-.*"):
            shutil.rmtree(folder, ignore_errors=True)


def free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.77.0.0/16 that no address or route of this machine's own namespace uses."""
    shown = run("ip", "-4", "-o", "addr").stdout + run("ip", "-4", "route").stdout
    used = [ipaddress.IPv4Network(found, strict=False)
            for found in re.findall(r"\b\d+\.\d+\.\d+\.\d+(?:/\d+)?\b", shown)]
    start = os.getpid() % 250
    for step in range(250):
        subnet = ipaddress.IPv4Network(f"10.77.{(start + step) % 250 + 1}.0/24")
        if not any(subnet.overlaps(network) for network in used):
            return subnet
    raise RuntimeError("every 10.77.x.0/24 is in use")


@dataclass
class Network:
    """A bridge in this namespace and one namespace per host, each on a veth pair to it."""

    delay_ms: float
    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    subnet: ipaddress.IPv4Network = field(default_factory=free_subnet)
    addresses: dict[str, str] = field(default_factory=dict)
    # How the delay is made: "netem" on every link, or "relay" (the kernel has no netem, so
    # a relay in the database's namespace holds back every database packet instead).
    delay_by: str = "netem"
    made: list[tuple[str, str]] = field(default_factory=list)  # (namespace, veth) to remove

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    @property
    def gateway(self) -> str:
        """This namespace's own address on the bridge: where the test speaks from."""
        return str(self.subnet.network_address + 1)

    def namespace(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def inside(self, host: str, *command: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(host), *command]

    def build(self, hosts: list[str]) -> Network:
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for number, host in enumerate(hosts, start=2):
            namespace, veth = self.namespace(host), f"{self.tag}v{number}"
            address = str(self.subnet.network_address + number)
            run("ip", "netns", "add", namespace)
            self.made.append((namespace, veth))
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                "netns", namespace)
            run("ip", "link", "set", veth, "master", self.bridge)
            run("ip", "link", "set", veth, "up")
            run(*self.inside(host, "ip", "addr", "add", f"{address}/{self.subnet.prefixlen}",
                             "dev", "eth0"))
            run(*self.inside(host, "ip", "link", "set", "eth0", "up"))
            run(*self.inside(host, "ip", "link", "set", "lo", "up"))
            self.addresses[host] = address
            if shutil.which("tc") is None:
                self.delay_by = "relay"
                continue
            delayed = run(*self.inside(host, "tc", "qdisc", "add", "dev", "eth0", "root",
                                       "netem", "delay", f"{self.delay_ms}ms"), check=False)
            if delayed.returncode != 0:
                if "unknown" not in delayed.stderr.lower():
                    raise RuntimeError(f"tc netem: {delayed.stderr.strip()}")
                self.delay_by = "relay"
        return self

    def remove(self) -> None:
        for namespace, veth in self.made:
            kill_namespace(namespace)
            run("ip", "link", "del", veth, check=False)
        run("ip", "link", "del", self.bridge, check=False)


# --- PostgreSQL ------------------------------------------------------------------------------


@dataclass
class Postgres:
    """A cluster of its own, run as `postgres` inside the database host's namespace."""

    network: Network
    host: str
    folder: Path
    user: str = "studio"
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    name: str = "studio"
    relay: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def address(self) -> str:
        return self.network.addresses[self.host]

    @property
    def url(self) -> str:
        return (f"postgresql://{self.user}:{self.password}@{self.address}:{DATABASE_PORT}"
                f"/{self.name}")

    def _as_postgres(self, *command: str) -> list[str]:
        bindir = postgres_bin()
        assert bindir is not None
        return self.network.inside(self.host, "runuser", "-u", "postgres", "--",
                                   str(bindir / command[0]), *command[1:])

    def create(self) -> Postgres:
        self.folder.mkdir(mode=0o700)
        shutil.chown(self.folder, "postgres", "postgres")
        secret = self.folder / "password"
        secret.write_text(self.password)
        shutil.chown(secret, "postgres", "postgres")
        run(*self._as_postgres("initdb", "-D", str(self.data), "-U", self.user,
                               f"--pwfile={secret}", "--auth=scram-sha-256", "-E", "UTF8",
                               "--no-sync"))
        secret.unlink()
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.network.subnet} scram-sha-256\n")
        self.start()
        import psycopg

        with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True,
                             connect_timeout=10) as admin:
            admin.execute(f"CREATE DATABASE {self.name}")
        return self

    def start(self) -> None:
        # Behind the relay PostgreSQL listens on its namespace's loopback only.
        listen = self.address if self.network.delay_by == "netem" else "127.0.0.1"
        options = (f"-c listen_addresses={listen} -c port={DATABASE_PORT}"
                   f" -c unix_socket_directories={self.folder} -c max_connections=120"
                   " -c shared_buffers=32MB")
        run(*self._as_postgres("pg_ctl", "-D", str(self.data), "-l",
                               str(self.folder / "postgres.log"), "-w", "-t", "60",
                               "-o", options, "start"))
        if self.network.delay_by == "relay" and (self.relay is None
                                                 or self.relay.poll() is not None):
            log = (self.folder / "relay.log").open("ab")
            self.relay = subprocess.Popen(
                self.network.inside(self.host, sys.executable, str(Path(__file__).with_name(
                    "delay.py")), self.address, str(DATABASE_PORT), "127.0.0.1",
                    str(DATABASE_PORT), str(self.network.delay_ms)),
                stdout=log, stderr=subprocess.STDOUT)
            log.close()
        self.wait_until_reachable()

    def wait_until_reachable(self, seconds: float = 30) -> None:
        import psycopg

        deadline = time.monotonic() + seconds
        while True:
            try:
                psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres",
                                connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self, mode: str = "fast") -> None:
        run(*self._as_postgres("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop"),
            check=False)

    def close(self) -> None:
        """The relay, gone with its namespace, reaped."""
        if self.relay is not None:
            with contextlib.suppress(ProcessLookupError):
                self.relay.kill()
            self.relay.wait(10)

    def running(self) -> bool:
        return run(*self._as_postgres("pg_ctl", "-D", str(self.data), "status"),
                   check=False).returncode == 0

    def log(self) -> str:
        path = self.folder / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""


# --- studio hosts ----------------------------------------------------------------------------


@dataclass
class Host:
    """`studio serve` or `studio worker` in its own namespace, its own folder as its working
    directory (nothing on disk shared with another host), and only the database URL shared."""

    network: Network
    name: str
    command: list[str]
    settings: dict[str, str]
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def address(self) -> str:
        return self.network.addresses[self.name]

    @property
    def url(self) -> str:
        return f"http://{self.address}:{STUDIO_PORT}"

    @property
    def serves(self) -> bool:
        return self.command[0] == "serve"

    @property
    def log_path(self) -> Path:
        return self.folder / "studio.log"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("STUDIO_", "PG"))}
        env.update({"PYTHONUNBUFFERED": "1", **self.settings})
        return env

    def start(self) -> Host:
        self.folder.mkdir(exist_ok=True)
        args = self.command
        if self.serves:
            args = [*args, "--host", self.address, "--port", str(STUDIO_PORT)]
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts + 1}\n".encode())
            self.process = subprocess.Popen(
                self.network.inside(self.name, sys.executable, "-m", "studio.ops.cli", *args),
                cwd=self.folder, env=self.environment(), stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        return self

    def wait_until_ready(self, seconds: float = 60) -> Host:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"host {self.name} exited early:\n{self.log()[-4000:]}")
            if self.serves:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                        return self
            elif "worker" in self.log().rsplit("--- start", 1)[-1] and \
                    " started on " in self.log().rsplit("--- start", 1)[-1]:
                return self
            time.sleep(0.1)
        raise AssertionError(f"host {self.name} not ready in {seconds} s:\n{self.log()[-4000:]}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a power cut: nothing of it gets to finish anything."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.alive():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def new_folder() -> Path:
    """The run's own folder, open to `postgres` for the cluster's part of it."""
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
    folder.chmod(0o711)
    return folder
