"""Where templates/ and static/ are: beside app.py in a checkout, inside the studio package
once installed from a wheel (pyproject maps them there)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def folder(name: str) -> Path:
    checkout = PACKAGE.parent / name
    if checkout.is_dir() and (PACKAGE.parent / "pyproject.toml").is_file():
        return checkout
    return PACKAGE / name
