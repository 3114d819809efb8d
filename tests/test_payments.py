"""Payments on issued invoices: recorded once per request id, checked against what is due
with the balance row locked, voided and never deleted; the invoice's paid, due and overdue;
the invoice page's payments. Asserted on the database as well as the answers."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import sqlite3
import uuid
from typing import Any

import pytest

from studio.billing import balances, payments
from studio.store.transactions import in_transaction
from tests import backends
from tests.conftest import ADA, BEN, database_digest, days_ahead, rows, scalar
from tests.test_words_pages import assert_plain

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}
TODAY = dt.datetime.now(dt.UTC).date().isoformat()


def payment(request_id: str | None = None, amount: Any = "100.00", **changes: Any
            ) -> dict[str, Any]:
    request_id = str(uuid.uuid4()) if request_id is None else request_id
    return {"request_id": request_id, "amount": amount, "date": TODAY,
            "method": "bank_transfer", **changes}


def balance_of(db_path: Any, invoice_id: str) -> dict[str, Any]:
    found = rows(db_path, "SELECT amount_paid, amount_credited, amount_due, payment_status"
                          " FROM balances WHERE invoice_id = ?", invoice_id)
    return dict(found[0]) if found else {}


def payments_of(db_path: Any, invoice_id: str) -> list[Any]:
    return rows(db_path, "SELECT id, amount, paid_on, method, reference, voided_at FROM payments"
                         " WHERE invoice_id = ? ORDER BY created_at, id", invoice_id)


async def northwind(studio: Any) -> str:
    """Ada's first issued invoice: EUR 2700.00, due 30 days after it was issued, nothing
    paid."""
    invoice_id = studio.invoice_ids()[0]
    assert balance_of(studio.settings.db_path, invoice_id)["amount_due"] == "2700.00"
    return invoice_id


async def test_a_payment_is_recorded_once_and_a_replay_answers_the_same_payment(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    body = payment("pay-1", "700.5", reference="Transfer 42")
    first = await client.post(f"/invoices/{invoice_id}/payments", json=body)
    assert first.status_code == 201, first.text
    made = first.json()
    assert (made["amount"], made["currency"], made["date"], made["method"], made["reference"],
            made["status"], made["voided_at"]) == ("700.50", "EUR", TODAY, "bank_transfer",
                                                   "Transfer 42", "recorded", None)
    # The same request again, the amount spelt another way: the same payment, nothing more.
    again = await client.post(f"/invoices/{invoice_id}/payments",
                              json={**body, "amount": "700.50"})
    assert again.status_code == 200 and again.json() == made

    [row] = payments_of(db, invoice_id)
    assert tuple(row) == (made["id"], "700.50", TODAY, "bank_transfer", "Transfer 42", None)
    assert scalar(db, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'payment'"
                      " AND request_id = 'pay-1'") == 1
    assert balance_of(db, invoice_id) == {"amount_paid": "700.50", "amount_credited": "0.00",
                                          "amount_due": "1999.50",
                                          "payment_status": "partially_paid"}
    invoice = (await client.get(f"/invoices/{invoice_id}")).json()
    assert (invoice["amount_paid"], invoice["amount_due"], invoice["payment_status"],
            invoice["overdue"]) == ("700.50", "1999.50", "partially_paid", False)
    listed = (await client.get(f"/invoices/{invoice_id}/payments")).json()
    assert listed == [made]


async def test_the_same_request_id_with_other_input_is_refused_and_changes_nothing(
        studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    assert (await client.post(f"/invoices/{invoice_id}/payments",
                              json=payment("pay-1", "10"))).status_code == 201
    before = database_digest(db)
    for other in (payment("pay-1", "11"), payment("pay-1", "10", method="cash"),
                  payment("pay-1", "10", reference="other"),
                  payment("pay-1", "10", date="2026-01-02")):
        reply = await client.post(f"/invoices/{invoice_id}/payments", json=other)
        assert (reply.status_code, reply.json()["detail"]) == (409, "request_id_conflict")
    other_invoice = studio.invoice_ids()[1]
    reply = await client.post(f"/invoices/{other_invoice}/payments", json=payment("pay-1", "10"))
    assert (reply.status_code, reply.json()["detail"]) == (409, "request_id_conflict")
    assert database_digest(db) == before


async def test_racing_duplicates_with_one_request_id_make_one_payment(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    body = payment("raced", "250")
    replies = await asyncio.gather(*[client.post(f"/invoices/{invoice_id}/payments", json=body)
                                     for _ in range(10)])
    assert sorted(reply.status_code for reply in replies) == [200] * 9 + [201]
    assert len({reply.json()["id"] for reply in replies}) == 1
    assert len(payments_of(db, invoice_id)) == 1
    assert balance_of(db, invoice_id)["amount_due"] == "2450.00"


async def test_ten_concurrent_payments_past_the_balance_leave_exactly_those_that_fit(
        studio) -> None:
    """2700.00 due; ten payments of 400.00: six fit (2400.00), four are refused."""
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    replies = await asyncio.gather(*[
        client.post(f"/invoices/{invoice_id}/payments", json=payment(f"p{n}", "400"))
        for n in range(10)])
    statuses = sorted(reply.status_code for reply in replies)
    assert statuses == [201] * 6 + [422] * 4, [reply.text for reply in replies]
    assert {reply.json()["detail"] for reply in replies if reply.status_code == 422} == {
        "payment_exceeds_balance"}
    made = {reply.json()["id"] for reply in replies if reply.status_code == 201}
    assert {row["id"] for row in payments_of(db, invoice_id)} == made
    assert balance_of(db, invoice_id) == {"amount_paid": "2400.00", "amount_credited": "0.00",
                                          "amount_due": "300.00",
                                          "payment_status": "partially_paid"}
    # Only bindings of payments made remain: a refused one left nothing behind.
    assert scalar(db, "SELECT COUNT(*) FROM request_bindings WHERE kind = 'payment'") == 6
    last = await client.post(f"/invoices/{invoice_id}/payments", json=payment("last", "300"))
    assert last.status_code == 201
    assert balance_of(db, invoice_id)["payment_status"] == "paid"
    refused = await client.post(f"/invoices/{invoice_id}/payments", json=payment("more", "0.01"))
    assert (refused.status_code, refused.json()["detail"]) == (409, "nothing_due")
    assert refused.json()["message"] == ("This invoice is paid in full; there is nothing left"
                                         " to pay.")


def _pay(url: str, actor_id: str, invoice_id: str, n: int, start: Any) -> str:
    """One payment of 400.00 on a connection of its own; its answer's status in words."""
    from studio.store import postgres

    db = postgres.connect(url)
    try:
        start.wait(30)
        in_transaction(db, payments.record_payment, actor_id, invoice_id, f"thread-{n}",
                       payments.parse_payment({"amount": "400", "date": TODAY,
                                               "method": "card"}))
        return "made"
    except Exception as error:  # noqa: BLE001 - the refusal is the answer being counted
        return getattr(error, "code", repr(error))
    finally:
        db.close()


@backends.postgres_only
def test_on_postgresql_ten_payments_on_ten_connections_leave_exactly_those_that_fit(
        settings) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    db_path, url = settings.db_path, settings.database_url
    actor_id = scalar(db_path, "SELECT id FROM actors WHERE email = ?", ADA)
    invoice_id = rows(db_path, "SELECT id FROM invoices WHERE owner_id = ? AND status = 'issued'"
                               " ORDER BY number LIMIT 1", actor_id)[0][0]
    start = threading.Barrier(10)
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda n: _pay(url, actor_id, invoice_id, n, start), range(10)))
    assert sorted(answers) == ["made"] * 6 + ["payment_exceeds_balance"] * 4, answers
    assert scalar(db_path, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?",
                  invoice_id) == 6
    assert balance_of(db_path, invoice_id)["amount_due"] == "300.00"


async def test_a_draft_a_credit_note_and_someone_elses_invoice_cannot_be_paid(studio) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    draft = (await client.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": "Work", "quantity": "1", "unit_price": "10"}]})).json()
    invoice_id = await northwind(studio)
    note = (await client.post(f"/invoices/{invoice_id}/credit-note", json={})).json()
    issued = await client.post(f"/invoices/{note['id']}/issue",
                               json={"request_id": "cn", "revision": note["revision"]})
    assert issued.status_code == 201, issued.text
    bens = studio.invoice_ids(BEN)[0]
    before = database_digest(db)
    for target, status, code in ((draft["id"], 409, "invoice_not_issued"),
                                 (note["id"], 409, "credit_note_not_payable"),
                                 (bens, 404, "invoice_not_found"),
                                 (str(uuid.uuid4()), 404, "invoice_not_found"),
                                 ("not-an-id", 404, "invoice_not_found")):
        reply = await client.post(f"/invoices/{target}/payments", json=payment(amount="1"))
        assert (reply.status_code, reply.json()["detail"]) == (status, code), target
        assert reply.json()["message"]
    assert (await client.get(f"/invoices/{bens}/payments")).status_code == 404
    assert database_digest(db) == before
    for target in (draft["id"], note["id"]):
        shown = (await client.get(f"/invoices/{target}")).json()
        assert [shown[name] for name in ("amount_paid", "amount_due", "payment_status",
                                         "overdue")] == [None] * 4


@pytest.mark.parametrize("changes, said", [
    ({"amount": "0"}, "above 0"),
    ({"amount": "-5"}, "above 0"),
    ({"amount": "abc"}, "above 0"),
    ({"amount": "١٠"}, "above 0"),  # Arabic-Indic digits are not ASCII digits
    ({"amount": "1e3"}, "above 0"),
    ({"amount": "10.001"}, "at most 2 decimal places"),
    ({"amount": True}, "above 0"),
    ({"amount": None}, "above 0"),
    ({"amount": "1234567890123"}, "12 digits"),
    ({"date": "2026-13-01"}, "date like"),
    ({"date": "yesterday"}, "date like"),
    ({"date": "1999-12-31"}, "between 2000-01-01 and today"),
    ({"date": "2099-01-01"}, "between 2000-01-01 and today"),
    ({"method": "wire"}, "bank_transfer, card, cash or other"),
    ({"method": ["cash"]}, "bank_transfer, card, cash or other"),
    ({"amount": {"value": "1"}}, "above 0"),
    ({"date": ["2026-12-01"]}, "date like"),
    ({"reference": {"x": 1}}, "The reference must be text."),
    ({"reference": "x" * 201}, "at most 200"),
    ({"request_id": ""}, "one-time key"),
    ({"request_id": "x" * 101}, "one-time key"),
])
async def test_bad_input_is_refused_with_a_message_and_changes_nothing(
        studio, changes: dict[str, Any], said: str) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    before = database_digest(db)
    reply = await client.post(f"/invoices/{invoice_id}/payments", json=payment(**changes))
    assert reply.status_code == 422, reply.text
    assert said in reply.json()["message"]
    assert database_digest(db) == before


async def test_a_json_number_amount_is_read_exactly_and_yen_have_no_decimals(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    reply = await client.post(f"/invoices/{invoice_id}/payments",
                              content=b'{"request_id": "n", "amount": 0.1, "date": "'
                              + TODAY.encode() + b'", "method": "cash"}',
                              headers={"Content-Type": "application/json"})
    assert reply.status_code == 201 and reply.json()["amount"] == "0.10"
    assert balance_of(db, invoice_id)["amount_due"] == "2699.90"
    assert payments.parse_payment({"amount": 12, "date": TODAY, "method": "cash"})["amount"] \
        == "12"
    draft = (await client.post("/invoices", json={
        "customer": "Tokyo Ltd", "currency": "JPY", "due_date": days_ahead(61),
        "line_items": [{"description": "Work", "quantity": "1", "unit_price": "1000"}]})).json()
    issued = await client.post(f"/invoices/{draft['id']}/issue",
                               json={"request_id": "yen", "revision": draft["revision"]})
    assert issued.status_code == 201, issued.text
    before = database_digest(db)
    yen = await client.post(f"/invoices/{draft['id']}/payments", json=payment(amount="100.5"))
    assert yen.status_code == 422 and "JPY amounts are whole numbers" in yen.json()["message"]
    assert database_digest(db) == before
    whole = await client.post(f"/invoices/{draft['id']}/payments", json=payment(amount="100.0"))
    assert whole.status_code == 201 and whole.json()["amount"] == "100"
    assert balance_of(db, draft["id"])["amount_due"] == "900"


async def test_past_the_balance_is_refused_and_names_what_is_left(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    before = database_digest(db)
    reply = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2700.01"))
    assert (reply.status_code, reply.json()["detail"]) == (422, "payment_exceeds_balance")
    assert "EUR 2700.00" in reply.json()["message"]
    assert database_digest(db) == before
    whole = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2700"))
    assert whole.status_code == 201
    assert balance_of(db, invoice_id)["payment_status"] == "paid"


async def test_void_restores_the_balance_keeps_the_row_and_voiding_again_is_the_same(
        studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    body = payment(amount="2700")
    made = (await client.post(f"/invoices/{invoice_id}/payments", json=body)).json()
    assert balance_of(db, invoice_id)["payment_status"] == "paid"
    voided = await client.post(f"/payments/{made['id']}/void", json={})
    assert voided.status_code == 200, voided.text
    assert voided.json()["status"] == "voided" and voided.json()["voided_at"]
    [row] = payments_of(db, invoice_id)
    assert row["voided_at"] is not None and row["amount"] == "2700.00"
    assert balance_of(db, invoice_id) == {"amount_paid": "0.00", "amount_credited": "0.00",
                                          "amount_due": "2700.00", "payment_status": "unpaid"}
    again = await client.post(f"/payments/{made['id']}/void", json={})
    assert again.status_code == 200 and again.json() == voided.json()
    # A replay of the voided payment's request answers it, voided; nothing new is made.
    replay = await client.post(f"/invoices/{invoice_id}/payments", json=body)
    assert replay.status_code == 200 and replay.json() == voided.json()
    assert len(payments_of(db, invoice_id)) == 1
    # A new request is a new payment, and it fits again.
    renewed = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2700"))
    assert renewed.status_code == 201
    assert len(payments_of(db, invoice_id)) == 2
    # Someone else's payment, or none at all, is not found; nothing changes.
    ben = await studio.signed_in(BEN)
    before = database_digest(db)
    for payment_id in (renewed.json()["id"], str(uuid.uuid4()), "nope"):
        reply = await ben.post(f"/payments/{payment_id}/void", json={})
        assert (reply.status_code, reply.json()["detail"]) == (404, "payment_not_found")
    assert database_digest(db) == before


def test_the_database_refuses_to_delete_or_change_a_payment(settings) -> None:
    db = backends.connect(settings.db_path)
    try:
        actor_id = db.execute("SELECT id FROM actors WHERE email = ?", (ADA,)).fetchone()[0]
        invoice_id = db.execute("SELECT id FROM invoices WHERE owner_id = ? AND status ="
                                " 'issued' ORDER BY number", (actor_id,)).fetchone()[0]
        made, _ = in_transaction(db, payments.record_payment, actor_id, invoice_id, "kept",
                                 payments.parse_payment({"amount": "5", "date": TODAY,
                                                         "method": "cash"}))
        for sql in ("DELETE FROM payments WHERE id = ?",
                    "UPDATE payments SET amount = '1.00' WHERE id = ?"):
            with pytest.raises(sqlite3.IntegrityError, match="payment_kept"):
                in_transaction(db, lambda db, sql=sql: db.execute(sql, (made["id"],)))
    finally:
        db.close()
    assert scalar(settings.db_path, "SELECT amount FROM payments WHERE id = ?",
                  made["id"]) == "5.00"


async def test_a_credit_note_lowers_the_balance_and_what_may_be_paid(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    note = (await client.post(f"/invoices/{invoice_id}/credit-note", json={})).json()
    edited = await client.patch(f"/invoices/{note['id']}", json={
        "revision": note["revision"], "line_items": [
            {"description": "Refund", "quantity": "1", "unit_price": "200.00",
             "tax_rate": "0"}]})
    assert edited.status_code == 200, edited.text
    issued = await client.post(f"/invoices/{note['id']}/issue", json={
        "request_id": "credit", "revision": edited.json()["revision"]})
    assert issued.status_code == 201, issued.text
    assert balance_of(db, invoice_id) == {"amount_paid": "0.00", "amount_credited": "200.00",
                                          "amount_due": "2500.00", "payment_status": "unpaid"}
    over = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2500.01"))
    assert over.status_code == 422
    paid = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2500"))
    assert paid.status_code == 201
    invoice = (await client.get(f"/invoices/{invoice_id}")).json()
    assert (invoice["amount_paid"], invoice["amount_due"], invoice["payment_status"]) == (
        "2500.00", "0.00", "paid")


async def test_a_credit_note_after_full_payment_leaves_nothing_due_never_less(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    paid = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2700"))
    assert paid.status_code == 201, paid.text
    note = (await client.post(f"/invoices/{invoice_id}/credit-note", json={})).json()
    edited = await client.patch(f"/invoices/{note['id']}", json={
        "revision": note["revision"], "line_items": [
            {"description": "Refund", "quantity": "1", "unit_price": "200.00",
             "tax_rate": "0"}]})
    issued = await client.post(f"/invoices/{note['id']}/issue", json={
        "request_id": "credit", "revision": edited.json()["revision"]})
    assert issued.status_code == 201, issued.text
    assert balance_of(db, invoice_id) == {"amount_paid": "2700.00", "amount_credited": "200.00",
                                          "amount_due": "0.00", "payment_status": "paid"}


def _at(day: str) -> float:
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(12), dt.UTC).timestamp()


async def test_overdue_flips_at_the_due_date_by_the_clock(studio, monkeypatch) -> None:
    """Northwind is not overdue on its due date, overdue the next day, and never once
    paid."""
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    due = dt.date.fromisoformat(scalar(studio.settings.db_path,
                                       "SELECT due_date FROM invoices WHERE id = ?", invoice_id))
    due_day, day_after = due.isoformat(), (due + dt.timedelta(days=1)).isoformat()
    moments = {due_day: False, day_after: True}
    for day, overdue in moments.items():
        monkeypatch.setattr(balances, "clock", lambda now, day=day: now or _at(day))
        shown = (await client.get(f"/invoices/{invoice_id}")).json()
        assert shown["overdue"] is overdue, day
    # In the unit itself, with the moment given.
    db = backends.connect(studio.settings.db_path)
    try:
        row = db.execute("SELECT * FROM invoices WHERE id = ?", (invoice_id,)).fetchone()
        assert balances.standing_of(db, row, _at(due_day))["overdue"] is False
        assert balances.standing_of(db, row, _at(day_after))["overdue"] is True
    finally:
        db.close()
    paid = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="2700"))
    assert paid.status_code == 201
    shown = (await client.get(f"/invoices/{invoice_id}")).json()
    assert (shown["payment_status"], shown["overdue"]) == ("paid", False)


async def test_the_invoice_page_lists_payments_and_credit_notes_with_the_balance_after_each(
        studio) -> None:
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    first = (await client.post(f"/invoices/{invoice_id}/payments", json=payment(
        amount="700", date="2026-11-01", reference="First part"))).json()
    note = (await client.post(f"/invoices/{invoice_id}/credit-note", json={})).json()
    edited = (await client.patch(f"/invoices/{note['id']}", json={
        "revision": note["revision"], "line_items": [
            {"description": "Refund", "quantity": "1", "unit_price": "100", "tax_rate": "0"}]}
    )).json()
    issued = (await client.post(f"/invoices/{note['id']}/issue", json={
        "request_id": "cn-page", "revision": edited["revision"]})).json()
    voided = (await client.post(f"/invoices/{invoice_id}/payments", json=payment(
        amount="50", date="2026-11-15"))).json()
    await client.post(f"/payments/{voided['id']}/void", json={})

    html = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    section = html[html.index('id="payments"'):html.index("</section>", html.index(
        'id="payments"'))]
    assert_plain("invoice with payments", html)
    # In date order: the payment of 1 November, the voided one of 15 November, the credit
    # note issued today; the balance after each, the voided one not counted.
    order = [section.index(f'id="payment-{first["id"]}"'),
             section.index(f'id="payment-{voided["id"]}"'), section.index(issued["number"])]
    assert order == sorted(order)
    assert re.search(r"First part.*?€700\.00.*?€2,000\.00", section, re.S)
    assert re.search(rf'payment-{voided["id"]}".*?<s>.*?Cancelled.*?€2,000\.00', section, re.S)
    assert re.search(rf'{issued["number"]}.*?€100\.00.*?€1,900\.00', section, re.S)
    assert f'action="/payments/{voided["id"]}/void"' not in section
    assert f'action="/payments/{first["id"]}/void"' in section and "hx-confirm" in section
    # The form: the balance due, today, the methods, a minted id.
    assert 'value="1,900.00"' in section and f'value="{TODAY}"' in section
    assert re.search(r'name="request_id" value="[0-9a-f-]{36}" data-mint', section)
    for method in ("Bank transfer", "Card", "Cash", "Other"):
        assert f">{method}</option>" in section


async def test_the_invoice_page_reads_its_invoice_balance_and_payments_in_one_snapshot(
        studio, monkeypatch) -> None:
    """One read transaction for the page, the session's apart: its balance and its payments
    cannot come from two moments, and the invoice is read once."""
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    paid = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="700"))
    assert paid.status_code == 201, paid.text
    db, units = studio.studio.db, []
    read = db.read

    async def counted(unit: Any, *args: Any) -> Any:
        units.append(unit)
        return await read(unit, *args)

    monkeypatch.setattr(db, "read", counted)
    page = await client.get(f"/invoices/{invoice_id}", headers=PAGE)
    assert page.status_code == 200 and 'value="2,000.00"' in page.text
    assert [unit.__name__ for unit in units
            if unit.__module__ != "studio.accounts.auth"] == ["_page_of"]


async def test_a_form_records_a_payment_and_goes_to_the_invoice(studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    form = {"request_id": "form-1", "amount": "20", "date": TODAY, "method": "cash",
            "reference": ""}
    page = await client.post(f"/invoices/{invoice_id}/payments", data=form, headers=PAGE)
    assert page.status_code == 303
    made = payments_of(db, invoice_id)[0]
    assert page.headers["location"] == f"/invoices/{invoice_id}?recorded={made['id']}"
    shown = (await client.get(page.headers["location"], headers=PAGE)).text
    assert "Payment of €20.00 recorded." in shown
    again = await client.post(f"/invoices/{invoice_id}/payments", data=form, headers=HTMX)
    assert again.headers["hx-redirect"] == page.headers["location"]
    assert len(payments_of(db, invoice_id)) == 1
    refused = await client.post(f"/invoices/{invoice_id}/payments", headers=HTMX,
                                data={**form, "request_id": "form-2", "amount": "9999"})
    assert refused.status_code == 422 and "left to pay" in refused.text
    voided = await client.post(f"/payments/{made['id']}/void", headers=HTMX, data={})
    assert voided.headers["hx-redirect"] == f"/invoices/{invoice_id}?voided={made['id']}"
    shown = (await client.get(voided.headers["hx-redirect"], headers=PAGE)).text
    assert "cancelled: it no longer counts" in shown
    assert_plain("invoice after a void", shown)


async def test_a_form_sent_again_with_other_input_says_to_start_over_and_changes_nothing(
        studio) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    form = {"request_id": "form-used", "amount": "20", "date": TODAY, "method": "cash",
            "reference": ""}
    first = await client.post(f"/invoices/{invoice_id}/payments", data=form, headers=HTMX)
    assert first.status_code == 200 and "hx-redirect" in first.headers
    before = database_digest(db)
    reply = await client.post(f"/invoices/{invoice_id}/payments", headers=HTMX,
                              data={**form, "amount": "21"})
    assert (reply.status_code, reply.headers["hx-retarget"]) == (409, "#messages")
    assert 'data-code="request_id_conflict"' in reply.text
    assert "already recorded a different payment" in reply.text and "Start over" in reply.text
    assert_plain("a form used twice", reply.text)
    # The API keeps the plain conflict; without script the form's id is new on reload.
    api = await client.post(f"/invoices/{invoice_id}/payments", json={**form, "amount": "21"})
    assert (api.status_code, api.json()["detail"]) == (409, "request_id_conflict")
    assert "Start over" not in api.json()["message"]
    assert database_digest(db) == before
    assert [row["amount"] for row in payments_of(db, invoice_id)] == ["20.00"]


async def test_the_payment_form_freezes_after_a_lost_reply_and_can_start_over(studio) -> None:
    client = await studio.signed_in()
    invoice_id = await northwind(studio)
    html = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    form = re.search(r'<form[^>]*id="payment-form".*?</form>', html, re.S)[0]
    assert "data-resend-same" in form and 'data-again="Record again"' in form
    assert 'data-decimals="2"' in form
    assert "Your payment of EUR {amount} may or may not have been recorded" in form
    assert re.search(rf'<a href="/invoices/{invoice_id}#payments" id="payment-start-over"'
                     r' data-start-over hidden>Start over</a>', form)
    assert_plain("invoice with a payment form", html)


async def test_a_payment_on_an_invoice_with_nothing_left_to_pay_says_so_and_changes_nothing(
        studio) -> None:
    """Paid in full, credited in full, or an invoice for 0.00: 409 nothing_due saying why,
    not "at most 0.00", and the page offers no form to record one."""
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    assert (await client.post(f"/invoices/{invoice_id}/payments",
                              json=payment(amount="2700"))).status_code == 201
    before = database_digest(db)
    for amount in ("0.01", "2700", "abc"):
        refused = await client.post(f"/invoices/{invoice_id}/payments",
                                    json=payment(amount=amount))
        if amount == "abc":  # what cannot be read is said first, as on any invoice
            assert refused.json()["detail"] == "invalid_body"
            continue
        assert (refused.status_code, refused.json()["detail"]) == (409, "nothing_due")
        assert "paid in full" in refused.json()["message"]
    fragment = await client.post(f"/invoices/{invoice_id}/payments", headers=HTMX,
                                 data=payment(amount="1"))
    assert fragment.status_code == 409 and "paid in full" in fragment.text
    assert database_digest(db) == before
    assert scalar(db, "SELECT COUNT(*) FROM payments WHERE invoice_id = ?", invoice_id) == 1
    html = (await client.get(f"/invoices/{invoice_id}", headers=PAGE)).text
    assert 'id="payment-form"' not in html and "Nothing is left to pay" in html

    # A void gives the amount back to pay: the form and a payment again.
    [paid] = payments_of(db, invoice_id)
    assert (await client.post(f"/payments/{paid['id']}/void", json={})).status_code == 200
    assert 'id="payment-form"' in (await client.get(f"/invoices/{invoice_id}",
                                                    headers=PAGE)).text
    again = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="1"))
    assert again.status_code == 201, again.text


async def test_a_payment_on_an_invoice_for_nothing_or_credited_in_full_says_why(
        studio) -> None:
    client = await studio.signed_in()
    db = studio.settings.db_path
    made = await client.post("/invoices", json={
        "customer": "Free Co", "currency": "EUR", "due_date": days_ahead(61), "line_items": [
            {"description": "Goodwill", "quantity": "1", "unit_price": "0", "tax_rate": "0"}]})
    assert made.status_code == 201, made.text
    issued = await client.post(f"/invoices/{made.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})
    assert issued.status_code == 201, issued.text
    before = database_digest(db)
    nothing = await client.post(f"/invoices/{made.json()['id']}/payments",
                                json=payment(amount="1"))
    assert (nothing.status_code, nothing.json()["detail"]) == (409, "nothing_due")
    assert nothing.json()["message"] == ("This invoice is for no amount; there is nothing to"
                                         " pay.")
    assert database_digest(db) == before

    invoice_id = await northwind(studio)
    note = (await client.post(f"/invoices/{invoice_id}/credit-note", json={})).json()
    credited = await client.post(f"/invoices/{note['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": note["revision"]})
    assert credited.status_code == 201, credited.text
    before = database_digest(db)
    refused = await client.post(f"/invoices/{invoice_id}/payments", json=payment(amount="1"))
    assert (refused.status_code, refused.json()["detail"]) == (409, "nothing_due")
    assert "credited in full" in refused.json()["message"]
    assert database_digest(db) == before


@pytest.mark.parametrize("reference", ["Transfer \x1b[31m42", "Del\x7f", "one\rtwo",
                                       "bell\x07", "\x85next line"])
async def test_a_payment_reference_with_a_control_character_is_invalid_text(
        studio, reference: str) -> None:
    client = await studio.signed_in()
    invoice_id, db = await northwind(studio), studio.settings.db_path
    before = database_digest(db)
    reply = await client.post(f"/invoices/{invoice_id}/payments",
                              json=payment(reference=reference))
    assert (reply.status_code, reply.json()["detail"]) == (422, "invalid_text")
    assert "The reference holds an invisible control character" in reply.json()["message"]
    assert database_digest(db) == before
    # A form's line break is one line break, and a tab is text: both are kept.
    kept = await client.post(f"/invoices/{invoice_id}/payments",
                             json=payment(reference="  Batch\r\n7\tA  "))
    assert kept.status_code == 201, kept.text
    assert payments_of(db, invoice_id)[0]["reference"] == "Batch\n7\tA"
