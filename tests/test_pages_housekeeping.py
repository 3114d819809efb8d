"""The small things a new user trips over: the icon every page asks for, files the studio
writes beside its database kept out of git, every static folder in the wheel, unit prices
shown like the amounts beside them, and demo data that reads like real invoices."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest

from studio.ops.demo import INVOICES
from tests.conftest import ROOT, days_ahead, rows

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}


async def test_every_page_has_an_icon_and_favicon_ico_answers(studio) -> None:
    client = studio.client()
    icon = await client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
    signed_in = await studio.signed_in()
    for path in ("/login", "/invoices", "/settings"):
        page = (await signed_in.get(path, headers=PAGE)).text
        assert '<link rel="icon" href="/favicon.ico"' in page, path


def test_the_files_beside_the_database_are_not_tracked() -> None:
    names = ["studio.db", "studio.db-wal", "studio.db-shm", "studio.db.secret",
             "studio.db.files/ab/abcdef", "data/shop.db.files/12/3456", "studio.db.lock"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert sorted(ignored) == sorted(names)


def test_every_folder_of_static_files_is_a_package_of_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for root in ("static", "templates"):
        for folder in [ROOT / root, *(p for p in (ROOT / root).rglob("*") if p.is_dir())]:
            if folder.name == "__pycache__":
                continue
            package = ".".join(["studio", *folder.relative_to(ROOT).parts])
            assert package in config["packages"], package
            assert config["package-data"].get(package), package


async def test_unit_prices_show_in_the_currencys_minor_units(studio) -> None:
    client = await studio.signed_in()
    made = (await client.post("/invoices", json={
        "customer": "Price Co", "currency": "EUR", "due_date": days_ahead(90),
        "line_items": [{"description": "Day rate", "quantity": "2", "unit_price": "450",
                        "tax_rate": "19"},
                       {"description": "Fine", "quantity": "1", "unit_price": "10.005",
                        "tax_rate": "0"}]})).json()
    draft = (await client.get(f"/invoices/{made['id']}", headers=PAGE)).text
    prices = re.findall(r'name="unit_price" value="([^"]*)"', draft)
    assert prices == ["450.00", "10.005"]  # never rounded away, only completed
    review = (await client.get(f"/invoices/{made['id']}/issue", headers=PAGE)).text
    assert re.search(r'<td class="num">450\.00</td>', review)
    # What is stored stays what was sent.
    assert "450" in rows(studio.settings.db_path, "SELECT line_items FROM invoices WHERE id = ?",
                         made["id"])[0][0]


def test_the_demo_is_plain_and_numbered_in_one_series(settings) -> None:
    numbers = [row[0] for row in rows(settings.db_path, "SELECT number FROM invoices"
                                      " WHERE number IS NOT NULL ORDER BY number")]
    assert numbers and all(re.fullmatch(r"INV-\d{4}-\d{4}", number) for number in numbers)
    customers = [customer for made in INVOICES.values() for customer, *_ in made]
    assert all(re.fullmatch(r"[\w ',.-]+", customer) for customer in customers), customers
