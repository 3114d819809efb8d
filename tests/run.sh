#!/usr/bin/env bash
# Install everything the suite needs on a fresh machine, then run all of it, browser tests
# included: once on SQLite and once on PostgreSQL in a throwaway cluster, the two passes at
# the same time, each running independent test files side by side (pytest-xdist).
# STUDIO_TEST_BACKENDS="sqlite" (or "postgresql") runs one pass only; STUDIO_TEST_WORKERS sets
# how many test processes each pass runs (2 by default; 0 runs each pass in one process).
#
# --no-loadscope-reorder: the files go out in the order tests/conftest.py gives them (the
# slowest first), not sorted by how many tests they hold, which left the one-test state
# machine files for last.
# Each pass has two phases (STUDIO_TEST_PHASE, read by tests/conftest.py). First every test
# not marked `alone`, its files spread over the workers. Then the few tests marked `alone`
# (they assert how long something takes, so they need the machine to themselves), one after
# another, and only once no pass is in its first phase any more: a lock file taken shared by
# the first phases and exclusively by the second sees to that. Each pass's output goes to its
# own log, printed whole when that pass ends; meanwhile a line says when each pass and phase
# starts and ends, with its time, and every STUDIO_TEST_PROGRESS_SECONDS (60) where each
# pass's pytest stands. The script exits non-zero if either pass failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# One line at a time, stamped, and never inside a pass's log being printed.
note() {
  if [ -n "${logs:-}" ]; then
    { flock 9; echo "[$(date +%H:%M:%S)] $*"; } 9>>"$logs/print.lock"
  else
    echo "[$(date +%H:%M:%S)] $*"
  fi
}

as_root=""
[ "$(id -u)" = 0 ] || as_root="sudo"
backends="${STUDIO_TEST_BACKENDS:-sqlite postgresql}"
workers="${STUDIO_TEST_WORKERS:-2}"
missing=""
command -v chromium >/dev/null 2>&1 || missing="chromium"
# The built-in writer reads receipts with Debian's Tesseract and its German and French data.
if ! command -v tesseract >/dev/null 2>&1 || ! tesseract --list-langs 2>/dev/null | grep -qx fra \
    || ! tesseract --list-langs 2>/dev/null | grep -qx deu; then
  missing="$missing tesseract-ocr tesseract-ocr-deu tesseract-ocr-fra"
fi
if [[ "$backends" == *postgresql* ]] && ! command -v pg_virtualenv >/dev/null 2>&1; then
  missing="$missing postgresql postgresql-common"
fi
command -v flock >/dev/null 2>&1 || missing="$missing util-linux"
# The bench's load generator: tests/test_bench_smoke.py runs every part of the bench.
command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
if [ -n "$missing" ]; then
  note "installing from Debian: $missing"
  $as_root apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq $missing >/dev/null
fi

note "installing the studio and the test packages into .venv"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# The floors' import contracts (pyproject.toml, [tool.importlinter]): a change that breaks a
# floor fails here, before the suite.
note "checking the floors' import contracts (lint-imports)"
.venv/bin/lint-imports

logs="$(mktemp -d "${TMPDIR:-/tmp}/studio-tests.XXXXXX")"
lock="$logs/alone.lock"
: >"$lock"

if [ "$workers" = 0 ]; then
  spread=(-p no:xdist)
else
  spread=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi

# One pass: both phases, run as `pass.sh LOCK SPREAD PHASE_FILE ARGS...` (inside pg_virtualenv
# for PostgreSQL, so that both phases share one cluster). It adds a line to PHASE_FILE as
# each phase starts and ends, which the watcher below reports. Exit 5 (no test selected) is fine for one
# phase when the other ran tests.
cat >"$logs/pass.sh" <<'PASS'
#!/usr/bin/env bash
set -uo pipefail
lock="$1" spread="$2" phase="$3"; shift 3
echo "first phase started: the tests not marked alone (pytest $spread)" >>"$phase"
# shellcheck disable=SC2086
STUDIO_TEST_PHASE=shared flock -s "$lock" .venv/bin/python -m pytest $spread "$@"
first=$?
echo "first phase ended in $SECONDS s (exit $first); the tests marked alone wait for every" \
  "pass's first phase to end" >>"$phase"
began=$SECONDS
STUDIO_TEST_PHASE=alone flock -x "$lock" bash -c \
  'echo "the tests marked alone started, one at a time" >>"$0"; exec "$@"' "$phase" \
  .venv/bin/python -m pytest -p no:xdist "$@"
second=$?
echo "the tests marked alone ended in $((SECONDS - began)) s (exit $second)" >>"$phase"
if [ "$first" = 5 ] && [ "$second" = 5 ]; then exit 5; fi
[ "$first" = 5 ] && first=0
[ "$second" = 5 ] && second=0
[ "$first" = 0 ] || exit "$first"
exit "$second"
PASS

run_pass() {
  local backend="$1"; shift
  local started=$SECONDS status=0
  if [ "$backend" = postgresql ]; then
    # A cluster of its own, gone when the pass ends; it exports PGHOST, PGUSER, PGPASSWORD.
    # Nothing here survives a crash of the machine, so the cluster need not fsync.
    $as_root pg_virtualenv -t -o fsync=off env STUDIO_TEST_DATABASE=postgresql \
      bash "$logs/pass.sh" "$lock" "${spread[*]}" "$logs/$backend.phase" "$@" || status=$?
  else
    bash "$logs/pass.sh" "$lock" "${spread[*]}" "$logs/$backend.phase" "$@" || status=$?
  fi
  : >"$logs/$backend.ended"
  echo "$backend $status $((SECONDS - started))" >&3  # one short line: written at once
}

# pytest's own progress, from the log since its phase began: "37% of this phase done, 1 failed".
where_it_stands() {
  local phase percent failed
  phase="$(tac "$1" 2>/dev/null | sed '/test session starts/q')" || true
  percent="$(grep -aoE '\[ *[0-9]+%\]' <<<"$phase" | head -n 1 | tr -d '[] ')" || true
  failed="$(grep -aoE '[.sxXFE]+ *\[ *[0-9]+%\]$' <<<"$phase" | tr -cd 'FE' | wc -c)" || true
  if [ -z "$percent" ]; then
    echo "no test finished yet in this phase"
  else
    echo "$percent of this phase done, ${failed:-0} failed or in error so far"
  fi
}

# Says each phase's start and end as they happen, and every so often where each pass stands.
watch_passes() {
  local every="${STUDIO_TEST_PROGRESS_SECONDS:-60}" waited=0 backend lines
  declare -A said=()
  while sleep 2; do
    waited=$((waited + 2))
    for backend in $backends; do
      [ -f "$logs/$backend.phase" ] || continue
      lines="$(wc -l <"$logs/$backend.phase")"
      while [ "${said[$backend]:-0}" -lt "$lines" ]; do
        said[$backend]=$((${said[$backend]:-0} + 1))
        note "$backend: $(sed -n "${said[$backend]}p" "$logs/$backend.phase")"
      done
      if [[ "$(tail -n 1 "$logs/$backend.phase")" == *started* ]] \
          && [ $((waited % every)) -lt 2 ] && [ ! -f "$logs/$backend.ended" ]; then
        note "$backend: $(where_it_stands "$logs/$backend.log"), $((SECONDS - started)) s in"
      fi
    done
  done
}

# Each pass says on this pipe that it ended (its backend, exit status and seconds).
mkfifo "$logs/ended"
exec 3<>"$logs/ended"
started=$SECONDS
passes=0
for backend in $backends; do
  note "$backend: pass started (its whole output follows when it ends)"
  run_pass "$backend" "$@" >"$logs/$backend.log" 2>&1 &
  passes=$((passes + 1))
done
watch_passes &
watcher=$!

overall=0
for _ in $(seq "$passes"); do
  read -r backend status seconds <&3
  {
    flock 9
    echo "=== the suite on $backend ==="
    cat "$logs/$backend.log"
    echo "=== $backend: $seconds s wall (exit $status) ==="
  } 9>>"$logs/print.lock"
  [ "$status" = 0 ] || [ "$overall" != 0 ] || overall="$status"
done
kill "$watcher" 2>/dev/null || true
wait
echo "=== all passes: $((SECONDS - started)) s wall (exit $overall) ==="
rm -rf "$logs"
exit "$overall"
