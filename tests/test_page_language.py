"""The studio's own pages speak their person's language: the one chosen in Settings (kept on the
account), else the browser's `Accept-Language`, else English; amounts and dates as that language
writes them, and refusals too. Also the review step naming the writer that will run, and the
draft's "Read the receipt" appearing with the receipt it reads."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

from studio.accounts import languages
from tests.conftest import ADA, days_ahead, rows, scalar
from tests.test_attachments import png, send

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
GERMAN = {**PAGE, "Accept-Language": "de-DE,de;q=0.9,en;q=0.8"}
MISSING = "/invoices/00000000-0000-4000-8000-000000000000"


def chosen(db_path: Any, email: str = ADA) -> Any:
    return scalar(db_path, "SELECT language FROM actors WHERE email = ?", email)


async def profile_with(client: Any, **changes: Any) -> Any:
    """Settings saved as JSON: the seller profile as it is, with `changes`."""
    profile = (await client.get("/settings")).json()
    profile.pop("logo_sha256", None)
    return await client.post("/settings", json={**profile, **changes})


async def test_a_german_browser_gets_german_pages_with_german_amounts_and_english_is_the_default(
        studio) -> None:
    client = await studio.signed_in()
    german = (await client.get("/invoices", headers=GERMAN)).text
    assert '<html lang="de">' in german
    assert "Ihre Rechnungen" in german and "Your invoices" not in german
    assert ">Rechnungen</a>" in german and ">Einstellungen</a>" in german
    # Amounts as German writes them: thousands with a point, cents with a comma, € after.
    assert re.search(r"Offen \d\.\d{3},\d\d\xa0€", german), german
    english = (await client.get("/invoices", headers=PAGE)).text
    assert '<html lang="en">' in english
    assert "Your invoices" in english and re.search(r"Outstanding €\d,\d{3}\.\d\d", english)
    # A language the studio does not speak is English, and so is nothing at all.
    swedish = (await client.get("/invoices", headers={**PAGE, "Accept-Language": "sv"})).text
    assert '<html lang="en">' in swedish and "Your invoices" in swedish
    # Pages speak English, German and French whole; a Spanish browser reads English pages
    # (its customers' documents may still be Spanish).
    spanish = (await client.get("/invoices", headers={
        **PAGE, "Accept-Language": "es-ES,fr;q=0.5"})).text
    assert '<html lang="fr">' in spanish and "Vos factures" in spanish
    french = (await client.get("/invoices", headers={**PAGE, "Accept-Language": "fr-BE"})).text
    assert "Vos factures" in french and re.search(r"En attente \d\u202f\d{3},\d\d\xa0€", french)


async def test_the_language_chosen_in_settings_wins_over_the_browser_and_is_kept_on_the_account(
        studio) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    assert chosen(db) is None
    saved = await profile_with(client, language="fr")
    assert saved.status_code == 200, saved.text
    assert saved.json()["language"] == "fr" and chosen(db) == "fr"
    assert (await client.get("/settings")).json()["language"] == "fr"
    page = (await client.get("/invoices", headers=GERMAN)).text
    assert '<html lang="fr">' in page and "Vos factures" in page and "Ihre Rechnungen" not in page
    # Null follows the browser again.
    assert (await profile_with(client, language=None)).json()["language"] is None
    assert chosen(db) is None
    assert "Ihre Rechnungen" in (await client.get("/invoices", headers=GERMAN)).text
    # Left out, the choice stays as it is.
    await profile_with(client, language="de")
    assert (await profile_with(client)).json()["language"] == "de" and chosen(db) == "de"
    # Another person's pages are not touched by it.
    ben = await studio.signed_in("ben@example.com")
    assert "Your invoices" in (await ben.get("/invoices", headers=PAGE)).text


async def test_the_settings_form_offers_the_languages_and_answers_in_the_one_chosen(
        studio) -> None:
    client = await studio.signed_in()
    form = (await client.get("/settings", headers=PAGE)).text
    for said in ("Follow my browser", ">English<", ">Deutsch<", ">Français<"):
        assert said in form, said
    # The pages speak these three whole; the others are for customers' documents.
    assert ">Español<" not in form and ">Nederlands<" not in form
    profile = (await client.get("/settings")).json()
    fields = {key: value or "" for key, value in profile.items() if key != "logo_sha256"}
    saved = await client.post("/settings", headers=PAGE, data={**fields, "language": "de"})
    assert saved.status_code == 200
    assert '<html lang="de">' in saved.text and "Gespeichert." in saved.text
    assert '<option value="de" lang="de" selected>' in saved.text
    assert chosen(studio.settings.db_path) == "de"
    followed = await client.post("/settings", headers=GERMAN | {"Accept-Language": "fr"},
                                 data={**fields, "language": ""})
    assert chosen(studio.settings.db_path) is None
    assert '<html lang="fr">' in followed.text and "Enregistré." in followed.text


@pytest.mark.parametrize("language", ["xx", "german", 7, "de-DE", "es"])
async def test_a_language_the_studio_does_not_speak_is_refused_and_nothing_is_saved(
        studio, language: Any) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    before = [dict(row) for row in rows(db, "SELECT * FROM profiles")], chosen(db)
    refused = await profile_with(client, language=language, name="Changed Name")
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"] == "invalid_language"
    assert "de, en or fr" in refused.json()["message"]
    assert ([dict(row) for row in rows(db, "SELECT * FROM profiles")], chosen(db)) == before


async def test_the_profile_and_the_language_are_saved_in_one_transaction(
        studio, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save whose language cannot be written keeps nothing of the profile either."""
    client = await studio.signed_in()
    db = studio.settings.db_path
    before = [dict(row) for row in rows(db, "SELECT * FROM profiles")], chosen(db)

    def refused(*_: Any) -> None:
        raise sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(languages, "store", refused)
    failed = await profile_with(client, language="de", name="Changed Name")
    assert failed.status_code == 503, failed.text
    assert ([dict(row) for row in rows(db, "SELECT * FROM profiles")], chosen(db)) == before


async def test_refusals_speak_the_requests_language(studio) -> None:
    client = await studio.signed_in()
    german = await client.get(MISSING, headers={"Accept-Language": "de"})
    assert german.status_code == 404
    assert german.json()["message"] == \
        "Diese Rechnung gibt es nicht, oder sie gehört nicht Ihnen."
    page = await client.get(MISSING, headers=GERMAN)
    assert page.status_code == 404 and "Nicht gefunden" in page.text
    assert "Diese Rechnung gibt es nicht" in page.text and '<html lang="de">' in page.text
    fragment = await client.get(MISSING, headers={"HX-Request": "true", "Accept-Language": "fr"})
    assert "Cette facture n’existe pas ou n’est pas la vôtre." in fragment.text
    # The person's own choice reaches refusals too, and a message given at the call site
    # stays as it was written.
    await profile_with(client, language="fr")
    assert "Cette facture" in (await client.get(MISSING, headers=GERMAN)).text
    english = await studio.client().get(MISSING, headers={"Accept-Language": "en"})
    assert english.json()["message"] == "Sign in to continue."


async def test_dates_on_the_invoice_page_are_written_as_the_language_writes_them(studio) -> None:
    client = await studio.signed_in()
    [invoice] = [i for i in (await client.get("/invoices")).json() if i["number"]][:1]
    due = invoice["due_date"]
    year, month, day = due.split("-")
    german = (await client.get(f"/invoices/{invoice['id']}", headers=GERMAN)).text
    assert f"<dt>Fällig</dt><dd>{day}.{month}.{year}</dd>" in german, german
    french = (await client.get(f"/invoices/{invoice['id']}",
                               headers={**PAGE, "Accept-Language": "fr"})).text
    assert f"<dt>Échéance</dt><dd>{day}/{month}/{year}</dd>" in french


async def test_the_review_step_names_the_writer_that_will_run(studio) -> None:
    client = await studio.signed_in()
    invoice = studio.invoice_ids()[0]
    review = (await client.get(f"/review?purpose=summarize_invoice&invoice_id={invoice}"
                               "&provider=auto", headers=PAGE)).text
    # No model is set up here: "if it answers" resolves to the studio, and the page says why.
    assert '<dd id="writers">The studio <span class="hint" id="writer-why">' in review
    assert "no AI model is set up in this studio, so the studio writes them" in review
    chosen_local = (await client.get(f"/review?purpose=summarize_invoice&invoice_id={invoice}"
                                     "&provider=local", headers=PAGE)).text
    assert "writer-why" not in chosen_local


async def test_read_the_receipt_appears_in_the_same_answer_that_lists_a_new_receipt(
        studio) -> None:
    client = await studio.signed_in()
    draft = (await client.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(30), "line_items": [
            {"description": "Widgets", "quantity": "1", "unit_price": "1", "tax_rate": "0"}]}
    )).json()["id"]
    page = (await client.get(f"/invoices/{draft}", headers=PAGE)).text
    assert '<div id="receipt-reading">' in page and 'id="read-receipt"' not in page
    assert (await send(client, draft, "k-receipt", png(7))).status_code == 201
    # What studio.js asks for once the upload is stored: the list, and with it the action.
    listed = await client.get(f"/invoices/{draft}/attachments", headers={"HX-Request": "true"})
    assert '<div id="receipt-reading" hx-swap-oob="true">' in listed.text
    assert 'id="read-receipt"' in listed.text and "Read the receipt" in listed.text


async def test_a_refusal_with_its_own_message_speaks_the_language_too(studio) -> None:
    client = await studio.signed_in()
    huge = b"\x89PNG" + b"0" * (600 * 1024)
    refused = await client.post("/settings", headers={"Accept-Language": "de"},
                                data={"name": "Ada Works"},
                                files={"logo": ("logo.png", huge, "image/png")})
    assert refused.status_code == 413
    assert refused.json()["message"].startswith("Ein Logo darf höchstens 512 KB groß sein")


def test_what_is_no_amount_or_date_is_shown_as_written_never_failing_a_page() -> None:
    """A writer's impossible date or a value that is no number reaches a page's filters as it
    is: shown as written, never a server error."""
    from studio import i18n

    assert i18n.date("2024-02-30", "de") == "2024-02-30"
    assert i18n.money("abc", "EUR", "de") == "EUR abc"
    assert i18n.number("NaN", "fr") == "NaN"
    assert i18n.date("2026-12-05", "de") == "05.12.2026"


async def test_a_remembered_poll_is_never_given_in_another_language(studio) -> None:
    """A tab's polls are remembered between commits; asked in another language, the answer
    is made again in it."""
    from tests.conftest import lease_body, wait_for_status

    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    made = await client.post("/leases", json=lease_body([invoice_id], "poll-languages"))
    assert made.status_code == 201, made.text
    lease_id = made.json()["lease_id"]
    await wait_for_status(client, lease_id, "proposed")
    fragment = {"HX-Request": "true"}
    for language, words in (("fr", "<h1>Résumés</h1>"), ("de", "<h1>Zusammenfassungen</h1>"),
                            ("fr", "<h1>Résumés</h1>"), ("de", "<h1>Zusammenfassungen</h1>")):
        for _ in range(3):  # the second and third are answered from memory, if at all
            polled = await client.get(f"/leases/{lease_id}",
                                      headers={**fragment, "Accept-Language": language})
            assert polled.status_code == 200
            assert words in polled.text, (language, polled.text[:300])
