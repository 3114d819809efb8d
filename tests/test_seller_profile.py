"""The seller profile: every field of an EU invoice's seller, checked and stored compact; a
logo kept once per image and never deleted; the old three-field profile still saves."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from studio.billing import profiles
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, rows, scalar, table_counts

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
FULL = {"name": "Ada Works GmbH", "address": "Hauptstr. 1\n10115 Berlin", "country": "de",
        "vat_id": "de136695976", "tax_number": "27/123/45678", "email": "ada@works.example",
        "iban": "de89 3704 0044 0532 0130 00", "bic": "deutdeff",
        "payment_terms": "Please pay within 14 days.", "footer": "Thank you!"}


def image(kind: str = "PNG", size: tuple[int, int] = (40, 20),
          colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, kind)
    return out.getvalue()


def profile_row(db_path: Path, email: str = ADA) -> dict[str, Any]:
    [row] = rows(db_path, "SELECT profiles.* FROM profiles JOIN actors"
                          " ON actors.id = profiles.actor_id WHERE actors.email = ?", email)
    return dict(row)


def owner(db_path: Path) -> str:
    return scalar(db_path, "SELECT id FROM actors WHERE email = ?", ADA)


async def upload(client: Any, content: bytes, filename: str = "logo.png",
                 **fields: str) -> Any:
    return await client.post("/settings", data={"name": "Ada Works", **fields},
                             files={"logo": (filename, content, "application/octet-stream")})


async def test_every_field_of_the_seller_is_stored_compact(studio) -> None:
    client = await studio.signed_in()
    saved = await client.post("/settings", json=FULL)
    assert saved.status_code == 200, saved.text
    expected = {**FULL, "country": "DE", "vat_id": "DE136695976",
                "iban": "DE89370400440532013000", "bic": "DEUTDEFF"}
    assert {name: saved.json()[name] for name in profiles.FIELDS} == expected
    row = profile_row(studio.settings.db_path)
    assert {name: row[name] for name in profiles.FIELDS} == expected
    assert (await client.get("/settings")).json() == {**expected, "logo_sha256": None,
                                                        "language": None}
    # What issuing freezes reads every one of them.
    db = backends.connect(studio.settings.db_path)
    try:
        snapshot = in_transaction(db, profiles.seller_snapshot, owner(studio.settings.db_path))
    finally:
        db.close()
    assert {name: snapshot[name] for name in profiles.FIELDS} == expected


async def test_the_settings_form_saves_and_shows_every_field(studio) -> None:
    client = await studio.signed_in()
    saved = await client.post("/settings", headers=PAGE, data=FULL)
    assert saved.status_code == 200 and "Saved." in saved.text
    for shown in ('value="DE89370400440532013000"', 'value="DEUTDEFF"',
                  '<option value="DE" selected>', "Thank you!", 'value="27/123/45678"'):
        assert shown in saved.text, shown


@pytest.mark.parametrize(("field", "value", "code"), [
    ("vat_id", "DE123456789", "invalid_vat_id"),
    ("iban", "DE89 3704 0044 0532 0130 01", "invalid_iban"),
    ("iban", "not an iban", "invalid_iban"),
    ("bic", "DEUT", "invalid_bic"),
    ("country", "ZZ", "invalid_country"),
    ("email", "ada@", "invalid_email"),
    ("payment_terms", "x" * 501, "invalid_body"),
    ("footer", "x" * 501, "invalid_body"),
    ("name", "x" * 201, "invalid_body"),
])
async def test_an_invalid_field_is_refused_by_name_and_changes_nothing(
        studio, field: str, value: str, code: str) -> None:
    client = await studio.signed_in()
    assert (await client.post("/settings", json=FULL)).status_code == 200
    before = table_counts(studio.settings.db_path), profile_row(studio.settings.db_path)
    refused = await client.post("/settings", json={**FULL, field: value})
    assert refused.status_code == 422 and refused.json()["detail"] == code
    words = {"vat_id": "VAT ID", "payment_terms": "payment terms", "name": "business name"}
    assert words.get(field, field).lower() in refused.json()["message"].lower()
    page = await client.post("/settings", headers=PAGE, data={**FULL, field: value})
    assert page.status_code == 422
    assert (table_counts(studio.settings.db_path), profile_row(studio.settings.db_path)) == \
        before


async def test_the_old_three_field_profile_still_saves_the_rest_empty(studio) -> None:
    client = await studio.signed_in()
    await client.post("/settings", json=FULL)
    path = studio.settings.db_path
    db = backends.connect(path)
    try:
        saved = in_transaction(db, profiles.save, owner(path),
                               {"name": "Old Co", "address": "1 Road", "vat_id": ""})
    finally:
        db.close()
    assert saved["name"] == "Old Co" and saved["iban"] == "" and saved["footer"] == ""
    row = profile_row(path)
    assert (row["name"], row["address"], row["iban"], row["country"]) == \
        ("Old Co", "1 Road", "", "")
    # JSON with only some fields: the others are saved empty, as a form leaving them blank.
    assert (await client.post("/settings", json={"name": "Ada"})).json()["email"] == ""


async def test_a_logo_is_uploaded_replaced_and_removed_and_every_one_is_kept(studio) -> None:
    client = await studio.signed_in()
    path = studio.settings.db_path
    first = image("PNG")
    saved = await upload(client, first, iban="DE89370400440532013000")
    assert saved.status_code == 200, saved.text
    row = profile_row(path)
    assert row["iban"] == "DE89370400440532013000" and row["logo_sha256"]
    page = (await client.get("/settings", headers=PAGE)).text
    assert 'src="/settings/logo' in page and "Remove logo" in page
    shown = await client.get("/settings/logo")
    assert shown.content == first and shown.headers["content-type"] == "image/png"
    assert shown.headers["x-content-type-options"] == "nosniff"
    db = backends.connect(path)
    try:
        assert in_transaction(db, profiles.logo, owner(path), row["logo_sha256"]) == \
            ("image/png", first)
        assert in_transaction(db, profiles.logo, owner(path), "0" * 64) is None
    finally:
        db.close()

    # The same image again is the same logo; another replaces it, the first kept.
    assert (await upload(client, first)).status_code == 200
    assert scalar(path, "SELECT COUNT(*) FROM logos") == 1
    second = image("JPEG", colour=(10, 10, 240))
    assert (await upload(client, second, filename="logo.jpg")).status_code == 200
    assert (await client.get("/settings/logo")).headers["content-type"] == "image/jpeg"
    assert scalar(path, "SELECT COUNT(*) FROM logos") == 2
    assert profile_row(path)["logo_sha256"] != row["logo_sha256"]

    # Saving the form without a new file keeps the logo; Remove takes it off.
    kept = await client.post("/settings", data={"name": "Ada Works"},
                             files={"logo": ("", b"", "application/octet-stream")})
    assert kept.status_code == 200 and profile_row(path)["logo_sha256"]
    removed = await client.post("/settings", data={"name": "Ada Works", "remove_logo": "1"},
                                files={"logo": ("", b"", "application/octet-stream")})
    assert removed.status_code == 200 and profile_row(path)["logo_sha256"] is None
    assert (await client.get("/settings/logo")).status_code == 404
    assert scalar(path, "SELECT COUNT(*) FROM logos") == 2  # an issued invoice may name one


@pytest.mark.parametrize(("content", "status"), [
    (b"%PDF-1.4 not an image", 415),
    (b"GIF89a" + b"\x00" * 100, 415),
    (image("PNG")[:60], 415),  # a PNG cut short
    (image("PNG", size=(2001, 10)), 413),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * (profiles.MAX_LOGO_BYTES + 1), 413),
])
async def test_a_logo_that_is_not_a_small_png_or_jpeg_is_refused_changing_nothing(
        studio, content: bytes, status: int) -> None:
    client = await studio.signed_in()
    assert (await client.post("/settings", json=FULL)).status_code == 200
    before = table_counts(studio.settings.db_path), profile_row(studio.settings.db_path)
    refused = await upload(client, content)
    assert refused.status_code == status, refused.text
    assert "logo" in refused.json()["message"].lower()
    assert (table_counts(studio.settings.db_path), profile_row(studio.settings.db_path)) == \
        before


async def test_a_form_far_past_the_logo_limit_is_refused_before_it_is_read(studio) -> None:
    client = await studio.signed_in()
    refused = await client.post("/settings", content=b"x" * 10,
                                headers={"Content-Type": "multipart/form-data; boundary=x",
                                         "Content-Length": str(10 * 2**20)})
    assert refused.status_code == 413
    before = profile_row(studio.settings.db_path)
    for content_type in ("multipart/form-data; boundary=x", "multipart/form-data"):
        garbled = await client.post("/settings", content=b"--x\r\nnot a part",
                                    headers={"Content-Type": content_type})
        assert garbled.status_code == 422 and garbled.json()["detail"] == "invalid_body"
    assert profile_row(studio.settings.db_path) == before
