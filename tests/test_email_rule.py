"""One rule for an email address: a customer's, the seller's and a send's recipient are judged
by the same function (`addresses.address_fault`), so an address the studio keeps can be sent to,
and one it refuses to send to cannot be kept."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from studio import addresses
from studio.billing import identifiers
from studio.errors import Refusal
from studio.mail import outbox
from tests.conftest import Running, database_digest, days_ahead, execute, rows
from tests.test_sending import mailing, send_body  # noqa: F401  (the studio with a mail server)

pytestmark = pytest.mark.anyio

# (as typed, as kept and sent; None when refused)
ADDRESSES = [
    ("ada@example.com", "ada@example.com"),
    ("  books@heron.test \n", "books@heron.test"),
    ("O'Brien+bills@Heron.TEST", "O'Brien+bills@Heron.TEST"),
    ("jürgen@exämple.de", "jürgen@exämple.de"),
    ("用户@例子.广告", "用户@例子.广告"),
    ("σοφία@παράδειγμα.ελ", "σοφία@παράδειγμα.ελ"),
    ("not-an-address", None),
    ("ada@", None),
    ("@example.com", None),
    ("ada@example", None),
    ("ada@example.com.", None),
    ("ada@example..com", None),
    ("ada@-example.com", None),
    ("ada@exa_mple.com", None),
    ("ada@192.168.0.1", None),
    ("ada@[192.168.0.1]", None),
    ("Ada Lovelace <ada@example.com>", None),
    ('"ada"@example.com', None),
    ("ada lovelace@example.com", None),
    ("two@a.test, three@b.test", None),
    ("two@a.test;three@b.test", None),
    ("a:b@example.com", None),
    ("john..doe@example.com", None),
    (".ada@example.com", None),
    ("ada.@example.com", None),
    ("jürgen@☃.example", None),
    ("ju\u200brgen@example.de", None),
    ("a@exa\u200dmple.de", None),
    ("a\x01b@example.com", None),
    ("a@b.test\r\nBcc: everyone@evil.test", None),
    ("x" * 65 + "@example.com", None),
    ("x" * 64 + "@example.com", "x" * 64 + "@example.com"),
    ("a@" + ("b" * 50 + ".") * 5 + "com", None),
    # Judged as mail reads the domain, after IDNA (UTS 46) mapping: 。．｡ are dots.
    ("a@169.254.169｡254", None),
    ("a@127.0.0。1", None),
    ("a@10.0.0．1", None),
    ("a@１２７.０.０.１", None),
    ("a@10.0.0.0x1", None),
    ("a@evil.com。example.com", "a@evil.com.example.com"),
    ("ada@例子。广告", "ada@例子.广告"),
]
IDS = [f"{n}-{typed[:30]!r}" for n, (typed, _) in enumerate(ADDRESSES)]


def _judged(check: Any) -> str | None:
    try:
        return check()
    except Refusal:
        return None


@pytest.mark.parametrize(("typed", "kept"), ADDRESSES, ids=IDS)
def test_every_check_of_an_address_is_the_one_rule(typed: str, kept: str | None) -> None:
    assert _judged(lambda: identifiers.email(typed)) == kept
    assert _judged(lambda: outbox.parse_send({"to": typed})["to"]) == kept
    assert _judged(lambda: outbox.parse_send({"cc": [typed]})["cc"][0]) == kept
    # The rule holds for the address as kept, which is the address mailed.
    if kept is None:
        assert addresses.address_fault(typed.strip()) is not None
    else:
        assert addresses.address_fault(kept) is None


async def _issued_for(studio: Running, client: httpx.AsyncClient, customer_id: str,
                      request_id: str) -> str:
    draft = await client.post("/invoices", json={
        "customer": "Heron Press", "customer_id": customer_id, "currency": "EUR",
        "due_date": days_ahead(90),
        "line_items": [{"description": "Typesetting", "quantity": "1", "unit_price": "90"}]})
    assert draft.status_code == 201, draft.text
    issued = await client.post(f"/invoices/{draft.json()['id']}/issue",
                               json={"request_id": request_id, "revision": 1})
    assert issued.status_code == 201, issued.text
    return draft.json()["id"]


@pytest.mark.parametrize(("typed", "kept"), ADDRESSES, ids=IDS)
async def test_the_customer_form_the_profile_and_a_send_judge_an_address_alike(
        mailing: Running, typed: str, kept: str | None) -> None:  # noqa: F811
    """Kept by one, kept by all, and a customer's kept address is one a send goes to; refused
    by one, refused by all, each refusal changing nothing."""
    client = await mailing.signed_in()
    db_path = mailing.settings.db_path
    invoice_id = mailing.invoice_ids()[0]
    before = database_digest(db_path)
    customer = await client.post("/customers", json={"name": "Heron Press", "email": typed,
                                                     "request_id": "customer-1"})
    profile = await client.post("/settings", json={"name": "Ada", "email": typed})
    send = await client.post(f"/invoices/{invoice_id}/send", json=send_body(to=typed))
    if kept is None:
        for reply, code in ((customer, "invalid_email"), (profile, "invalid_email"),
                            (send, "invalid_recipient")):
            assert reply.status_code == 422, reply.text
            assert reply.json()["detail"] == code
        assert customer.json()["message"].startswith("The email ")
        assert profile.json()["message"].startswith("The email ")
        assert typed.strip()[:20] in send.json()["message"]
        assert database_digest(db_path) == before
        return
    assert (customer.status_code, profile.status_code, send.status_code) == (201, 200, 202)
    assert (customer.json()["email"], profile.json()["email"], send.json()["to"]) == \
        (kept, kept, kept)
    assert rows(db_path, "SELECT email FROM customers WHERE id = ?",
                customer.json()["id"])[0]["email"] == kept
    assert rows(db_path, "SELECT recipient FROM sends WHERE id = ?",
                send.json()["send_id"])[0]["recipient"] == kept
    on_file = await _issued_for(mailing, client, customer.json()["id"], "issue-on-file")
    to_customer = await client.post(f"/invoices/{on_file}/send", json={"request_id": "send-2"})
    assert to_customer.status_code == 202, to_customer.text
    assert to_customer.json()["to"] == kept


async def test_an_address_kept_before_the_rule_is_refused_at_send_time_changing_nothing(
        mailing: Running) -> None:  # noqa: F811
    """An address stored under an older, looser rule is checked again by the same rule when
    an email would go to it."""
    client = await mailing.signed_in()
    db_path = mailing.settings.db_path
    made = await client.post("/customers", json={"name": "Heron Press",
                                                 "email": "books@heron.test"})
    assert made.status_code == 201, made.text
    invoice_id = await _issued_for(mailing, client, made.json()["id"], "issue-old")
    execute(db_path, "UPDATE customers SET email = ? WHERE id = ?", "john..doe@heron.test",
            made.json()["id"])
    before = database_digest(db_path)
    reply = await client.post(f"/invoices/{invoice_id}/send", json={"request_id": "old"})
    assert reply.status_code == 422 and reply.json()["detail"] == "invalid_recipient"
    assert "john..doe@heron.test" in reply.json()["message"]
    assert database_digest(db_path) == before


async def test_an_address_kept_with_other_dots_before_the_rule_is_refused_at_send_time(
        mailing: Running) -> None:  # noqa: F811
    """An address stored before the rule read 。 as a dot would be shown as one domain and
    mailed to another: a send to it is refused, changing nothing."""
    client = await mailing.signed_in()
    db_path = mailing.settings.db_path
    made = await client.post("/customers", json={"name": "Heron Press",
                                                 "email": "books@heron.test"})
    assert made.status_code == 201, made.text
    invoice_id = await _issued_for(mailing, client, made.json()["id"], "issue-dots")
    execute(db_path, "UPDATE customers SET email = ? WHERE id = ?", "a@evil.com。example.com",
            made.json()["id"])
    before = database_digest(db_path)
    reply = await client.post(f"/invoices/{invoice_id}/send", json={"request_id": "dots"})
    assert reply.status_code == 422 and reply.json()["detail"] == "invalid_recipient"
    assert "a@evil.com。example.com" in reply.json()["message"]
    assert database_digest(db_path) == before
