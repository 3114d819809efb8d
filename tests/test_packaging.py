"""The wheel serves the studio from any folder: templates and static files travel inside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from tests import backends
from tests.conftest import ROOT, free_port

SOURCES = ["pyproject.toml", "README.md", "app.py", "studio", "templates", "static"]


@pytest.mark.packaging
# The installed studio is started without the suite's settings, on SQLite in an empty folder,
# whichever pass runs.
@backends.first_pass_only
def test_a_wheel_installed_in_a_fresh_virtualenv_serves_the_demo_from_an_empty_folder(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:  # a copy, so building leaves no build/ or egg-info in the checkout
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name,
             **({"ignore": shutil.ignore_patterns("__pycache__")}
                if (ROOT / name).is_dir() else {}))
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"),
         str(source)])
    wheel = next((tmp_path / "dist").glob("studio-*.whl"))

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)])
    studio = venv / "bin" / "studio"
    assert run([str(studio), "--version"]).stdout.startswith("studio ")

    empty = tmp_path / "empty"
    empty.mkdir()
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("STUDIO_", "PYTHON"))}
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen([str(studio), "serve", "--demo", "--port", str(port)], cwd=empty,
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                page = httpx.get(url + "/login", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.2)
        assert page.status_code == 200
        assert "ada@example.com" in page.text  # the demo accounts, from the installed template
        assert httpx.get(url + "/static/studio.css").status_code == 200
        assert httpx.get(url + "/healthz").json()["status"] == "ok"
    finally:
        process.terminate()
        process.wait(20)
        log.close()
    assert (empty / "studio.db").is_file()  # the database lands in the folder it runs from


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done
