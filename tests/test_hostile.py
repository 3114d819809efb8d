"""Hostile input: another actor's ids on every route, and markup on every page."""

from __future__ import annotations

import json
import uuid

import pytest

from studio.ops.demo import DEMO_PASSWORD
from tests.conftest import BEN, database_digest, execute, lease_body, running, wait_for_status

pytestmark = pytest.mark.anyio

HTMX = {"HX-Request": "true", "Accept": "text/html"}
PAGE = {"Accept": "text/html"}
JSON = {"Accept": "application/json"}
SCRIPT = '<script>alert("owned")</script>'
IMAGE = "<img src=x onerror=alert(1)>"


def routes(invoice_id: str, lease_id: str) -> list[tuple[str, str, dict, dict | None]]:
    """Every route that takes an invoice or lease id, in each way a client may ask."""
    calls: list[tuple[str, str, dict, dict | None]] = []
    for headers in (JSON, PAGE, HTMX):
        calls += [
            ("GET", f"/invoices/{invoice_id}", headers, None),
            ("GET", f"/review?purpose=summarize_invoice&invoice_id={invoice_id}", headers, None),
            ("GET", f"/leases/{lease_id}", headers, None),
            ("POST", f"/leases/{lease_id}/apply", headers, {}),
            ("POST", f"/leases/{lease_id}/cancel", headers, {}),
        ]
    calls += [
        ("POST", "/leases", JSON, {"json": lease_body([invoice_id], "other-actor")}),
        ("POST", "/leases", PAGE, {"data": {"request_id": "other-actor-form",
                                            "purpose": "summarize_invoice",
                                            "invoice_id": invoice_id, "provider": "local"}}),
        ("POST", "/leases", HTMX, {"data": {"request_id": "other-actor-htmx",
                                            "purpose": "summarize_invoice",
                                            "invoice_id": invoice_id, "provider": "local"}}),
        ("POST", f"/leases/{lease_id}/apply", JSON,
         {"json": {"choices": {invoice_id: str(uuid.uuid4())}}}),
    ]
    return calls


async def test_another_actors_ids_are_404_on_every_route_and_never_a_hint(studio):
    ben = await studio.signed_in(BEN)
    ben_invoice = studio.invoice_ids(BEN)[0]
    made = await ben.post("/leases", json=lease_body([ben_invoice], "bens"))
    ben_lease = made.json()["lease_id"]
    await wait_for_status(ben, ben_lease, "proposed")
    ada = await studio.signed_in()
    before = database_digest(studio.settings.db_path)
    made_up_invoice, made_up_lease = str(uuid.uuid4()), str(uuid.uuid4())

    real = routes(ben_invoice, ben_lease)
    guessed = routes(made_up_invoice, made_up_lease)
    for (method, path, headers, extra), (_, guess_path, _, guess_extra) in zip(real, guessed,
                                                                           strict=True):
        theirs = await ada.request(method, path, headers=headers, **(extra or {}))
        nobody = await ada.request(method, guess_path, headers=headers, **(guess_extra or {}))
        where = f"{method} {path} {headers}"
        assert theirs.status_code == 404, where
        # Same status, same headers that matter, same body as an id nobody owns: no hint.
        assert nobody.status_code == 404, where
        text = theirs.text.replace(ben_invoice, made_up_invoice).replace(ben_lease, made_up_lease)
        assert text == nobody.text, where
        assert theirs.headers.get("content-type") == nobody.headers.get("content-type"), where
        assert ben_invoice not in theirs.text and ben_lease not in theirs.text, where
    assert database_digest(studio.settings.db_path) == before
    # And Ben's own view is untouched: still proposed, nothing applied.
    lease = (await ben.get(f"/leases/{ben_lease}")).json()
    assert lease["status"] == "proposed"
    assert all(not c["applied"] for i in lease["invoices"] for c in i["candidates"])
    listed = (await ada.get("/invoices")).json()
    assert ben_invoice not in {invoice["id"] for invoice in listed}


class MarkupProvider:
    name = "local"

    async def complete(self, purpose, invoice, actor_id, *, candidate, timeout) -> str:
        return f"{SCRIPT} summary {candidate} {IMAGE}"


def assert_escaped(page: str, where: str) -> None:
    assert "<script>alert" not in page, where
    assert "<img src=x" not in page, where
    assert "onerror=alert" not in page or "&lt;img" in page, where


async def test_markup_in_invoice_fields_and_model_output_is_escaped_on_every_page(settings):
    db = settings.db_path
    async with running(settings, {"local": MarkupProvider()}) as studio:
        # An issued invoice never changes, so the hostile one is written as a new row.
        invoice_id = str(uuid.uuid4())
        execute(db, "INSERT INTO invoices (id, owner_id, status, number, customer, currency,"
                " due_date, line_items, net, tax, total) SELECT ?, owner_id, 'issued', ?, ?,"
                " 'EUR', '2027-01-01', ?, '1.00', '0.00', '1.00' FROM invoices WHERE id = ?",
                invoice_id, f"N{SCRIPT}", f"Customer {IMAGE}",
                json.dumps([{"description": f"Item {SCRIPT}", "quantity": "1",
                             "unit_price": "1.00", "tax_rate": "0"}]), studio.invoice_ids()[0])
        client = await studio.signed_in()
        made = await client.post("/leases", json=lease_body([invoice_id], candidates=2))
        lease_id = made.json()["lease_id"]
        await wait_for_status(client, lease_id, "proposed")

        pages = [
            ("GET", "/invoices", PAGE), ("GET", f"/invoices/{invoice_id}", PAGE),
            ("GET", f"/invoices/{invoice_id}", HTMX),
            ("GET", f"/review?purpose=summarize_invoice&invoice_id={invoice_id}", PAGE),
            ("GET", f"/leases/{lease_id}", PAGE), ("GET", f"/leases/{lease_id}", HTMX),
            ("GET", f"/invoices/{SCRIPT}", PAGE), ("GET", f"/leases/{IMAGE}", HTMX),
            ("GET", f"/login?next={SCRIPT}", PAGE), ("GET", f"/nowhere{SCRIPT}", PAGE),
        ]
        rendered = 0
        for method, path, headers in pages:
            reply = await client.request(method, path, headers=headers)
            assert reply.status_code < 500, path
            assert_escaped(reply.text, f"{path} {headers}")
            rendered += "&lt;script&gt;" in reply.text or "&lt;img" in reply.text
        # The hostile text is shown (escaped) on the invoice, review and lease pages at least.
        assert rendered >= 5

        lease_page = (await client.get(f"/leases/{lease_id}", headers=PAGE)).text
        assert "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt; summary 1" in lease_page
        applied = await client.post(f"/leases/{lease_id}/apply", headers=HTMX)
        assert applied.status_code in (200, 286)
        assert_escaped(applied.text, "apply fragment")
        for path in ("/invoices", f"/invoices/{invoice_id}"):
            page = (await client.get(path, headers=PAGE)).text
            assert_escaped(page, f"{path} after apply")
        summary = (await client.get(f"/invoices/{invoice_id}")).json()["summary"]
        assert summary.startswith(SCRIPT)  # stored as given, escaped only when shown
        assert "&lt;script&gt;" in (await client.get(f"/invoices/{invoice_id}",
                                                     headers=PAGE)).text

        # A failed sign-in shows the typed email back, escaped.
        anonymous = studio.client(**PAGE)
        refused = await anonymous.post("/login", data={"email": f"x{SCRIPT}@example.com",
                                                       "password": "wrong",
                                                       "next": f"/invoices{IMAGE}"})
        assert refused.status_code == 401
        assert_escaped(refused.text, "failed sign-in")
        ok = await anonymous.post("/login", data={"email": "ada@example.com",
                                                  "password": DEMO_PASSWORD,
                                                  "next": f"/x{SCRIPT}"})
        assert ok.status_code == 303
        assert "<script" not in ok.headers["location"]
