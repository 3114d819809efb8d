"""The bench runs: every part of `python -m bench` at its smallest size (`--smoke`) exits 0
and writes each figure of that part as a number. At that size the figures mean nothing, so
none is held to its target here; they are measured with the machine to itself (`python -m
bench`, bench/RESULTS.md).

The PostgreSQL part runs in the suite's PostgreSQL pass, in that pass's cluster, every other
part in the SQLite pass: the two passes run side by side, so each carries about half. These
tests time nothing, so they run in the shared phase."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import FIGURES, TARGETS, verdict
from bench.receipts import REAL as REAL_RECEIPTS
from tests import backends

ROOT = Path(__file__).resolve().parent.parent
SQLITE_PARTS = [part for part in FIGURES if part != "pg"]
# Every SQLite part at its smallest takes about 2 minutes on a crowded machine, the PostgreSQL
# part 1; in one process each, since a start of the bench costs seconds of imports.
RUN_TIMEOUT_S = 480


def run_bench(args: list[str], timeout: float = RUN_TIMEOUT_S
              ) -> subprocess.CompletedProcess[str]:
    """`python -m ARGS` from the checkout; one still running after `timeout` is killed with
    every server it started (its own process group), and the test fails with what it said."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    with subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as bench:
        try:
            out, err = bench.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(bench.pid, signal.SIGKILL)
            out, err = bench.communicate()
            pytest.fail(f"python -m {' '.join(args)} still ran after {timeout} s:\n"
                        f"{err[-6000:]}")
    return subprocess.CompletedProcess(bench.args, bench.returncode, out, err)


def smoke(parts: list[str], out: Path) -> dict[str, Any]:
    """`python -m bench --smoke --only PARTS --out OUT`: the figures it wrote."""
    only = ",".join(parts)
    finished = run_bench(["bench", "--smoke", "--only", only, "--out", str(out)])
    assert finished.returncode == 0, (
        f"python -m bench --smoke --only {only} exited {finished.returncode}:\n"
        f"{finished.stdout[-3000:]}\n{finished.stderr[-6000:]}")
    found = json.loads(out.read_text())
    assert found["size"] == "smoke" and found["only"] == parts
    return found


def missing_figures(part: str, found: dict[str, Any]) -> list[str]:
    """What is wrong with the figures of `part` in `found`: none missing, each a number."""
    wrong = []
    for key in FIGURES[part]:
        if key.startswith("receipt_real_") and not REAL_RECEIPTS.is_dir():
            continue  # the real receipts lie beside a checkout, not in it: none here to read
        value = found.get(key)
        if not isinstance(value, int | float) or not math.isfinite(value):
            wrong.append(f"{part}: {key} = {value!r}")
        elif key in TARGETS and found["verdicts"].get(key) not in ("met", "MISSED"):
            wrong.append(f"{part}: {key} has no verdict")
    return wrong


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.skipif(backends.ON_POSTGRES, reason="the SQLite parts run in the SQLite pass")
def test_every_sqlite_part_of_the_bench_runs(tmp_path: Path) -> None:
    found = smoke(SQLITE_PARTS, tmp_path / "results.json")
    assert [wrong for part in SQLITE_PARTS for wrong in missing_figures(part, found)] == []


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.skipif(not backends.ON_POSTGRES,
                    reason="the PostgreSQL part runs in the PostgreSQL pass")
def test_the_postgresql_part_of_the_bench_runs(tmp_path: Path) -> None:
    """In the pass's own cluster: `python -m bench --only pg` would make one with pg_virtualenv,
    which refuses inside another; this runs what it runs inside the one it makes."""
    out = tmp_path / "pg.json"
    finished = run_bench(["bench", "--smoke", "--in-cluster", str(out)])
    assert finished.returncode == 0, (
        f"the PostgreSQL part exited {finished.returncode}:\n{finished.stdout[-3000:]}\n"
        f"{finished.stderr[-6000:]}")
    found = json.loads(out.read_text())
    assert missing_figures("pg", {**found, "verdicts": {key: verdict(key, found[key])
                                                        for key in TARGETS if key in found}}) == []


def test_every_figure_with_a_target_has_a_part() -> None:
    """A figure added to the targets without naming its part would never be smoked."""
    from bench.__main__ import REPORTED, steps

    named = [key for keys in FIGURES.values() for key in keys]
    assert set(TARGETS) | set(REPORTED) <= set(named)
    assert list(FIGURES) == list(steps("smoke"))


@pytest.mark.skipif(backends.ON_POSTGRES, reason="in-process measures, run in the SQLite pass")
def test_the_in_process_measures_run() -> None:
    """`bench.asgi_calls` (CPU per request, no server) and `bench.idle_writes` (an idle
    studio's writes) at their smallest."""
    calls = run_bench(["bench.asgi_calls", "10"], timeout=120)
    assert calls.returncode == 0, calls.stderr[-4000:]
    assert {line.split()[0] for line in calls.stdout.splitlines() if "us/request" in line} == {
        "bare_get", "poll_json", "poll_fragment", "bare_post", "replay"}
    idle = run_bench(["bench.idle_writes", "1"], timeout=120)
    assert idle.returncode == 0, idle.stderr[-4000:]
    assert "writer transactions in" in idle.stdout
