#!/usr/bin/env bash
# Install everything the suite needs on a fresh machine, then run all of it, browser tests
# included: once on SQLite, then again on PostgreSQL in a throwaway cluster.
# STUDIO_TEST_BACKENDS="sqlite" (or "postgresql") runs one pass only.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root=""
[ "$(id -u)" = 0 ] || as_root="sudo"
backends="${STUDIO_TEST_BACKENDS:-sqlite postgresql}"
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
if [ -n "$missing" ]; then
  $as_root apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq $missing >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# The floors' import contracts (pyproject.toml, [tool.importlinter]): a change that breaks a
# floor fails here, before the suite.
.venv/bin/lint-imports

started=$SECONDS
for backend in $backends; do
  echo "=== the suite on $backend ==="
  pass_started=$SECONDS
  status=0
  if [ "$backend" = postgresql ]; then
    # A cluster of its own, gone when the pass ends; it exports PGHOST, PGUSER, PGPASSWORD.
    $as_root pg_virtualenv -t env STUDIO_TEST_DATABASE=postgresql \
      .venv/bin/python -m pytest "$@" || status=$?
  else
    .venv/bin/python -m pytest "$@" || status=$?
  fi
  echo "=== $backend: $((SECONDS - pass_started)) s wall (exit $status) ==="
  [ "$status" = 0 ] || exit "$status"
done
echo "=== all passes: $((SECONDS - started)) s wall ==="
