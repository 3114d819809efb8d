"""The reminder settings page's "Suggest wording": the model drafts a step's words with the
placeholders the studio fills in, under a lease like any model work; nothing it writes is
kept, nor ever sent, until the person keeps it, and it is kept only as the step it was asked
for."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest

from studio.accounts.auth import add_actor
from studio.billing import reminding
from studio.errors import Refusal
from studio.leasing import purposes
from tests.conftest import DEMO_PASSWORD, lease_body, rows, scalar, wait_for_status
from tests.test_invoices import make_draft

pytestmark = pytest.mark.anyio


def wording(invoice_id: str, days: Any, request_id: str = "word-1", **extra: Any
            ) -> dict[str, Any]:
    return lease_body([invoice_id], request_id, purpose="draft_reminder", days=days, **extra)


def kept_steps(studio: Any) -> list[dict[str, Any]] | None:
    found = rows(studio.settings.db_path, "SELECT steps FROM reminder_settings")
    return json.loads(found[0][0]) if found else None


async def proposed(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    made = await client.post("/leases", json=body)
    assert made.status_code == 201, made.text
    return await wait_for_status(client, made.json()["lease_id"], "proposed", seconds=30)


async def test_suggested_wording_is_kept_as_its_step_only_when_the_person_keeps_it(studio):
    client = await studio.signed_in()
    page = (await client.get("/settings/reminders", headers={"Accept": "text/html"})).text
    example = reminding.FIRST_STEPS[0]["days"]
    assert 'id="suggest-wording-0"' in page
    link = html.unescape(page.split('id="suggest-wording-0" href="')[1].split('"')[0])
    assert link.startswith("/review?") and f"days={example}" in link
    review = await client.get(link, headers={"Accept": "text/html"})
    assert review.status_code == 200, review.text
    assert 'id="reminder-step"' in review.text
    frozen = (await client.get(link)).json()["request"]
    assert frozen["purpose"] == "reminder_wording" and frozen["days"] == example

    invoice_id = studio.invoice_ids()[0]
    lease = await proposed(client, wording(invoice_id, example))
    assert lease["purpose"] == "reminder_wording" and lease["days"] == example
    words = lease["invoices"][0]["candidates"][0]["proposal"]
    assert "{number}" in words["subject"] and "{amount_due}" in words["message"]
    # Written, not kept: the settings are as they were, and nothing is queued to send.
    assert kept_steps(studio) is None

    applied = await client.post(f"/leases/{lease['lease_id']}/apply")
    assert applied.status_code == 200, applied.text
    steps = kept_steps(studio)
    assert steps is not None
    assert [step["days"] for step in steps] == [step["days"] for step in reminding.FIRST_STEPS]
    assert {"days": example, **words} in steps
    assert reminding.FIRST_STEPS[1] in steps  # the step not worded stays as it was shown
    assert scalar(studio.settings.db_path, "SELECT enabled FROM reminder_settings") == 0
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM sends") == 0
    again = (await client.get("/settings/reminders")).json()
    assert again["steps"] == steps and again["enabled"] is False


async def test_a_step_changed_since_the_asking_keeps_nothing(studio):
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    lease = await proposed(client, wording(invoice_id, 7))
    mine = [{"days": 7, "subject": "My own {number}", "message": "My own words."}]
    saved = await client.put("/settings/reminders", json={"enabled": False, "steps": mine})
    assert saved.status_code == 200, saved.text
    refused = await client.post(f"/leases/{lease['lease_id']}/apply")
    assert refused.status_code == 409 and refused.json()["detail"] == "reminder_changed"
    assert kept_steps(studio) == mine
    status = scalar(studio.settings.db_path, "SELECT status FROM leases WHERE id = ?",
                    lease["lease_id"])
    assert status == "proposed"


async def test_a_new_step_is_added_beside_the_kept_ones(studio):
    client = await studio.signed_in()
    mine = [{"days": 7, "subject": "My own {number}", "message": "My own words."}]
    await client.put("/settings/reminders", json={"enabled": False, "steps": mine})
    lease = await proposed(client, wording(studio.invoice_ids()[0], -3))
    applied = await client.post(f"/leases/{lease['lease_id']}/apply")
    assert applied.status_code == 200, applied.text
    steps = kept_steps(studio)
    assert steps is not None and [step["days"] for step in steps] == [-3, 7]
    assert steps[1] == mine[0]


async def test_the_same_wording_request_twice_is_one_lease_and_another_step_is_a_conflict(studio):
    client = await studio.signed_in()
    invoice_id = studio.invoice_ids()[0]
    first = await client.post("/leases", json=wording(invoice_id, 7))
    again = await client.post("/leases", json=wording(invoice_id, 7))
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["lease_id"] == again.json()["lease_id"]
    other = await client.post("/leases", json=wording(invoice_id, 14))
    assert other.status_code == 409 and other.json()["detail"] == "request_id_conflict"
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases") == 1


@pytest.mark.parametrize("body, why", [
    ({"days": "soon"}, "days from the due date"),
    ({"days": 400}, "days from the due date"),
    ({"days": "--5"}, "days from the due date"),
    ({"days": "\u00b2"}, "days from the due date"),
    ({"purpose": "summarize_invoice", "days": 7}, "Only reminder wording"),
])
async def test_a_wording_asked_wrongly_is_refused_and_makes_no_lease(studio, body, why):
    client = await studio.signed_in()
    refused = await client.post("/leases", json={**wording(studio.invoice_ids()[0], 7), **body})
    assert refused.status_code == 422 and why in refused.json()["message"], refused.text
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases") == 0


async def test_a_draft_is_no_example_for_wording(studio):
    client = await studio.signed_in()
    draft = await make_draft(client)
    refused = await client.post("/leases", json=wording(draft["id"], 7))
    assert refused.status_code == 422 and "issued" in refused.json()["message"]
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM leases") == 0


@pytest.mark.parametrize("proposal", [
    {"subject": "Invoice {invoice_number}", "message": "Pay {amount_due}."},
    {"subject": "Invoice {number} {link}", "message": "Pay {amount_due}."},
    {"subject": "Invoice {number}\nBcc: x@y.z", "message": "Pay."},
])
def test_words_the_studio_cannot_fill_in_are_never_a_suggestion(proposal) -> None:
    with pytest.raises(Refusal) as refused:
        purposes.checked(purposes.PURPOSES["reminder_wording"], proposal)
    assert refused.value.code == "invalid_proposal"


async def test_the_page_says_why_there_is_no_suggestion_before_an_invoice_is_issued(studio):
    await studio.studio.db.write(add_actor, "new@example.com", DEMO_PASSWORD)
    client = await studio.signed_in("new@example.com")
    page = (await client.get("/settings/reminders", headers={"Accept": "text/html"})).text
    assert 'id="suggest-wording-later"' in page and "suggest-wording-0" not in page
    # Once an invoice is issued, each step offers it.
    mine = await studio.signed_in()
    page = (await mine.get("/settings/reminders", headers={"Accept": "text/html"})).text
    assert 'id="suggest-wording-later"' not in page and 'id="suggest-wording-1"' in page


async def test_the_words_are_written_in_the_language_of_who_asks(studio):
    """A step's words go to every customer: they are written in the asker's language, not in
    the language of the example invoice's customer."""
    client = await studio.signed_in()
    made = await client.post("/leases", json=wording(studio.invoice_ids()[0], 7),
                             headers={"Accept-Language": "de"})
    assert made.status_code == 201, made.text
    lease = await wait_for_status(client, made.json()["lease_id"], "proposed", seconds=30)
    words = lease["invoices"][0]["candidates"][0]["proposal"]
    assert words["subject"] == "Zahlungserinnerung: Rechnung {number}"
