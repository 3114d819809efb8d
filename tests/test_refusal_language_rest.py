"""The refusals of the suggestions, recurring invoices, reminders, uploads and the web edge
speak the person's language (German and French here) with their values filled in, and read
as they always did in English; so do the words a request's page and a schedule's page show,
the purposes' names on the review step, and the words the page gives its script. A refusal
made inside a database unit speaks the request's language too."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from typing import Any

import pytest

from studio import i18n
from studio.leasing import leases
from tests.conftest import lease_body
from tests.test_recurring import customer, schedule_body

pytestmark = pytest.mark.anyio
GERMAN = {"Accept-Language": "de-DE,de;q=0.9"}
FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}
ENGLISH = {"Accept-Language": "en"}
PAGE = {"Accept": "text/html"}


async def refused(client: Any, path: str, body: Any, headers: dict[str, str],
                  status: int = 422) -> str:
    reply = await client.post(path, json=body, headers=headers)
    assert reply.status_code == status, reply.text
    return reply.json()["message"]


async def test_a_request_for_suggestions_is_refused_in_the_persons_language(studio) -> None:
    client = await studio.signed_in()
    body = lease_body(["x"])
    assert await refused(client, "/leases", body, GERMAN) == \
        "Jede Rechnungs-ID muss eine UUID sein."
    assert await refused(client, "/leases", body, FRENCH) == \
        "Chaque identifiant de facture doit être un UUID."
    assert await refused(client, "/leases", body, ENGLISH) == "Each invoice id must be a UUID."
    # With its value filled in.
    many = lease_body(studio.invoice_ids()[:1], candidates=9)
    assert await refused(client, "/leases", many, GERMAN) == \
        "Bitten Sie jeden um 1 bis 5 Vorschläge (eine ganze Zahl)."
    assert await refused(client, "/leases", many, FRENCH) == \
        "Demandez de 1 à 5 suggestions à chacun (un nombre entier)."
    assert await refused(client, "/leases", many, ENGLISH) == \
        "Ask for 1 to 5 suggestions from each (a whole number)."


async def test_a_refusal_made_inside_a_database_unit_speaks_the_requests_language(
        studio) -> None:
    """Reading the receipt of an issued invoice is refused as its targets are checked, on the
    database's thread: the request's language goes with it there."""
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    number = (await client.get(f"/invoices/{invoice_id}")).json()["number"]
    body = lease_body([invoice_id], purpose="read_receipt")
    german = await refused(client, "/leases", body, GERMAN, 409)
    assert german == ("Nur einem Entwurf können Positionen hinzugefügt werden; diese Rechnung"
                      f" ist als {number} ausgestellt.")
    french = await refused(client, "/leases", body, FRENCH, 409)
    assert french == ("On ne peut ajouter des lignes qu’à un brouillon ; cette facture est émise"
                      f" sous le numéro {number}.")
    english = await refused(client, "/leases", body, ENGLISH, 409)
    assert english == f"Only a draft's lines can be added to; this invoice is issued as {number}."


async def test_recurring_reminder_and_body_refusals_in_german_and_french(studio) -> None:
    client = await studio.signed_in()
    customer_id = await customer(client)
    today = dt.date.today()
    ends = (today - dt.timedelta(days=1)).isoformat()
    body = schedule_body(customer_id, every="month", ends=ends)
    assert await refused(client, "/recurring", body, GERMAN) == \
        f"Das Enddatum {ends} liegt vor dem Startdatum {today.isoformat()}."
    assert await refused(client, "/recurring", body, FRENCH) == \
        f"La date de fin, {ends}, précède la date de début, {today.isoformat()}."
    assert await refused(client, "/recurring", body, ENGLISH) == \
        f"The ends date, {ends}, is before the starts date, {today.isoformat()}."
    steps = {"enabled": True, "steps": [
        {"days": 3, "subject": "Reminder", "message": "Please pay."},
        {"days": 3, "subject": "Reminder", "message": "Please pay."}]}
    assert await refused(client, "/settings/reminders", steps, GERMAN) == \
        "Zwei Stufen haben dieselben Tage; jede Stufe braucht eigene Tage."
    assert await refused(client, "/settings/reminders", steps, ENGLISH) == \
        "Two steps have the same days; each step needs days of its own."
    headers = {"Content-Type": "application/json"}
    broken = await client.post("/customers", content=b"{nope", headers={**headers, **FRENCH})
    assert broken.status_code == 422
    assert broken.json()["message"] == "Le corps n’est pas un JSON valide."
    broken = await client.post("/customers", content=b"{nope", headers={**headers, **ENGLISH})
    assert broken.json()["message"] == "The body is not valid JSON."


async def test_a_schedules_page_says_how_often_and_what_it_does_in_the_persons_language(
        studio) -> None:
    client = await studio.signed_in()
    reply = await client.post("/recurring", json=schedule_body(
        await customer(client), every="month", interval=2, day="last", action="draft",
        request_id=str(uuid.uuid4())))
    assert reply.status_code == 201, reply.text
    german = (await client.get("/recurring", headers={**PAGE, **GERMAN})).text
    assert "Alle 2 Monate, am letzten Tag des Monats" in german
    assert "Einen Entwurf zur Prüfung anlegen" in german
    french = (await client.get("/recurring", headers={**PAGE, **FRENCH})).text
    assert "Tous les 2 mois, le dernier jour du mois" in french
    english = (await client.get("/recurring", headers={**PAGE, **ENGLISH})).text
    assert "Every 2 months, on the last day of the month" in english
    assert "Make a draft for you to check" in english


async def test_the_review_step_names_the_purpose_and_the_script_gets_its_words(studio) -> None:
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    address = f"/review?purpose=summarize_invoice&invoice_id={invoice_id}"
    german = (await client.get(address, headers={**PAGE, **GERMAN})).text
    assert "Rechnung zusammenfassen" in german and "Summarize invoice" not in german
    words = json.loads(re.search(r'<script type="application/json" id="words">(.*?)</script>',
                                 german, re.S).group(1))
    assert words["submitting"] == "Wird gesendet…"
    assert words["issued_as"] == "Ausgestellt als {number}."
    french = (await client.get(address, headers={**PAGE, **FRENCH})).text
    assert "Résumer la facture" in french
    english = (await client.get(address, headers={**PAGE, **ENGLISH})).text
    assert "Summarize invoice" in english
    words = json.loads(re.search(r'<script type="application/json" id="words">(.*?)</script>',
                                 english, re.S).group(1))
    assert words["issued_as"] == "Issued as {number}." and words["submitting"] == "Submitting…"


def test_a_failed_requests_reasons_are_said_in_the_pages_language() -> None:
    stored = "The receipt could not be read: the PDF is locked with a password."
    with i18n.use("de"):
        assert leases.failure_words(stored) == \
            "Der Beleg konnte nicht gelesen werden: das PDF ist mit einem Passwort geschützt."
        assert leases.failure_words("TimeoutError: ") == \
            "Der Verfasser hat nicht rechtzeitig geantwortet."
    with i18n.use("fr"):
        assert leases.failure_words("boom") == ("Le rédacteur n’a répondu par aucune suggestion ;"
                                                " redemander peut fonctionner.")
    with i18n.use("en"):
        assert leases.failure_words(stored) == stored
