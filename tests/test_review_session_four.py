"""Outside review of sending (public links, giving up, addresses in any script, the body's
encoding) and of why a rate of 0 % charges no VAT. Each test states a promise the code did not
keep when the review wrote it; each is mended."""

from __future__ import annotations

import base64
import email.utils
import uuid
from typing import Any

import pytest
from lxml import etree

from studio.config import Settings
from tests.conftest import Running, running
from tests.mailserver import Inbox, MailServer
from tests.test_full_invoice import add_customer, full_body, issue, line
from tests.test_legal_document import full_seller, text_of
from tests.test_sending import send_body, send_row, wait_for, with_mail

pytestmark = pytest.mark.anyio

NS = {"ram": "urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100"}
GERMAN_SELLER = {"country": "DE", "vat_id": "DE136695976",
                 "address": "Hauptstraße 1\n10115 Berlin"}
ZERO_RATE = [line("Design", "3", "19.99", "0")]


def encoded_word(text: str) -> str:
    """`text` as an RFC 2047 encoded word: plain ASCII letters, digits, `=`, `?` and `-`."""
    return "=?utf-8?b?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.fixture
async def mailing(settings: Settings, smtp: MailServer) -> Any:
    async with running(with_mail(settings, smtp)) as started:
        yield started


async def queued_or_refused(mailing: Running, **fields: Any) -> str | None:
    """The send's id once its try has ended, or None when the request was refused (422)."""
    client = await mailing.signed_in()
    reply = await client.post(f"/invoices/{mailing.invoice_ids()[0]}/send",
                              json=send_body(str(uuid.uuid4()), **fields))
    if reply.status_code == 422:
        return None
    assert reply.status_code == 202, reply.text
    send_id = reply.json()["send_id"]
    await wait_for(lambda: send_row(mailing, send_id)["status"] != "queued", what="an end")
    return send_id


# --- the body's encoding ---------------------------------------------------------------------


async def test_a_long_paragraph_in_plain_ascii_is_delivered_not_refused_for_its_length(
        mailing: Running, inbox: Inbox) -> None:
    paragraph = " ".join(f"word{n}" for n in range(250))  # about 1,700 characters, one line
    send_id = await queued_or_refused(mailing, message=paragraph)
    assert send_id is not None
    row = send_row(mailing, send_id)
    assert row["status"] == "sent", row["reply"]
    assert len(inbox.messages) == 1
    body = inbox.messages[0].get_body(("plain",)).get_content()
    assert paragraph in body


# --- header injection through RFC 2047 encoded words -----------------------------------------


async def test_an_encoded_word_in_the_subject_starts_no_header_of_its_own(
        mailing: Running, inbox: Inbox) -> None:
    subject = encoded_word("Invoice\r\nX-Injected: yes")
    send_id = await queued_or_refused(mailing, subject=subject)
    if send_id is not None:
        for message in inbox.messages:
            assert message["X-Injected"] is None, message.as_string()[:400]


async def test_an_encoded_word_before_the_at_names_no_other_address_in_the_to_header(
        mailing: Running, inbox: Inbox) -> None:
    recipient = encoded_word("victim@evil.test, accounts") + "@northwind.test"
    send_id = await queued_or_refused(mailing, to=recipient)
    if send_id is not None:
        assert inbox.messages, send_row(mailing, send_id)["reply"]
        for message in inbox.messages:
            named = [address for _, address in email.utils.getaddresses(
                [str(message["To"] or ""), str(message["Cc"] or "")])]
            assert not any(address.endswith("evil.test") for address in named), named


# --- why a rate of 0 % charges no VAT --------------------------------------------------------


async def issued_at_zero(studio: Running, client: Any, customer_id: str) -> dict[str, Any]:
    draft = await client.post("/invoices", json=full_body(customer_id=customer_id,
                                                          line_items=ZERO_RATE))
    assert draft.status_code == 201, draft.text
    assert (await issue(client, draft.json())).status_code == 201
    return (await client.get(f"/invoices/{draft.json()['id']}")).json()


async def categories(client: Any, invoice_id: str) -> list[str]:
    xml = (await client.get(f"/invoices/{invoice_id}.xml")).content
    return etree.fromstring(xml).xpath("//ram:CategoryCode/text()", namespaces=NS)


async def test_a_credit_note_has_the_vat_categories_of_the_invoice_it_credits(
        studio: Running) -> None:
    db_path = studio.settings.db_path
    full_seller(db_path, **GERMAN_SELLER)
    client = await studio.signed_in()
    customer_id = add_customer(db_path, country="FR", vat_id="FR40303265045",
                               address="2 Rue de la Paix\n75001 Paris")
    invoice = await issued_at_zero(studio, client, customer_id)
    assert set(await categories(client, invoice["id"])) == {"AE"}
    # The customer's VAT ID is taken off (it lapsed, or was on the wrong record) after the
    # invoice was issued; the invoice keeps it, as it should.
    customer = (await client.get(f"/customers/{customer_id}")).json()
    edited = await client.patch(f"/customers/{customer_id}", json={
        "revision": customer["revision"], "vat_id": ""})
    assert edited.status_code == 200, edited.text
    note = (await client.post(f"/invoices/{invoice['id']}/credit-note")).json()
    assert (await issue(client, note)).status_code == 201
    assert await categories(client, note["id"]) == await categories(client, invoice["id"])
    pdf = text_of((await client.get(f"/invoices/{note['id']}.pdf")).content)
    # In the French customer's language and the German seller's.
    assert "Autoliquidation" in " ".join(pdf.split())
    assert "Steuerschuldnerschaft des Leistungsempfängers" in " ".join(pdf.split())


async def test_a_zero_rate_to_a_northern_ireland_vat_id_is_not_an_export_outside_the_eu(
        studio: Running) -> None:
    db_path = studio.settings.db_path
    full_seller(db_path, **GERMAN_SELLER)
    client = await studio.signed_in()
    customer_id = add_customer(db_path, country="GB", vat_id="XI123456782",
                               address="1 Donegall Sq\nBelfast BT1 5GS")
    invoice = await issued_at_zero(studio, client, customer_id)
    assert set(await categories(client, invoice["id"])) == {"AE"}
    xml = etree.fromstring((await client.get(f"/invoices/{invoice['id']}.xml")).content)
    buyer_country = xml.xpath("//ram:BuyerTradeParty/ram:PostalTradeAddress/ram:CountryID/text()",
                              namespaces=NS)
    assert buyer_country == ["GB"]  # the address's country; XI is the VAT ID's prefix only
    pdf = text_of((await client.get(f"/invoices/{invoice['id']}.pdf")).content)
    assert "Export outside the EU" not in " ".join(pdf.split())
