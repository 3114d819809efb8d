"""One rule for a line (`studio.lines`): the proposal's schema, the receipt reader and apply
take the same lines, so a ready suggestion can be used, or says why not before anything is
pressed; a reading's summary says what apply would add; a reminder's subject is one line."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio import lines
from studio.billing import money
from studio.errors import Refusal
from studio.leasing import purposes
from studio.leasing.readers import parse
from tests import backends
from tests.conftest import lease_body, running, scalar, wait_for_status
from tests.receipts import frischmarkt, pdf
from tests.test_invoices import issue
from tests.test_model_work import draft_with_receipt, lines_of, proposed, read

READING = purposes.PURPOSES["read_receipt"]
REMINDER = purposes.PURPOSES["draft_reminder"]
TEA = {"description": "Tea", "quantity": "1", "unit_price": "6.07", "tax_rate": "7"}
ANSWER = {"supplier": "Frischmarkt Sommer", "date": None, "currency": "EUR", "total": "6.49",
          "lines": [TEA]}
PAGE = {"Accept": "text/html"}
pure = backends.first_pass_only  # touches no database


def reading_with(**line: Any) -> dict[str, Any]:
    return {**ANSWER, "lines": [{**TEA, **line}]}


class Writer:
    """A writer that answers what it is told to, as a model might."""

    name = "local"

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    async def complete(self, purpose: Any, invoice: Any, actor_id: str, *, candidate: int,
                       timeout: float) -> dict[str, Any]:
        return self.answer


def as_read(reading: dict[str, Any]) -> dict[str, Any]:
    """A reading without its check, which the studio works out itself."""
    return {key: value for key, value in reading.items() if key != "check"}


def apply_takes(proposal: dict[str, Any]) -> bool:
    """Whether apply takes each line the reading would add, by the draft's own rule."""
    try:
        for number, line in enumerate(purposes.reading_lines(proposal), start=1):
            money.parse_line(line, number)
    except Refusal:
        return False
    return True


# --- the schema and the check take only what apply takes -----------------------------------


@pure
@pytest.mark.parametrize("line", [
    {"tax_rate": "999.99"}, {"tax_rate": "100.5"}, {"quantity": "0"}, {"quantity": "0.000"},
    {"description": "Tea\x00"}, {"description": "   "}, {"description": "\u200b"},
    {"description": " \u200b\u2060 "}, {"description": "\U000e0001"},
], ids=repr)
def test_a_line_apply_refuses_never_becomes_a_suggestion(line: dict[str, str]) -> None:
    proposal = reading_with(**line)
    assert not apply_takes(proposal)
    with pytest.raises(Refusal) as refused:
        purposes.checked(READING, proposal)
    assert refused.value.code == "invalid_proposal"


@pure
@settings(max_examples=300, deadline=None)
@given(description=st.one_of(st.from_regex(f"^{lines.DESCRIPTION}$", fullmatch=True),
                             st.text(max_size=8)),
       quantity=st.one_of(st.from_regex(f"^{lines.QUANTITY}$", fullmatch=True),
                          st.from_regex(r"^[0-9]{1,13}(\.[0-9]{1,7})?$", fullmatch=True)),
       unit_price=st.from_regex(r"^-{0,2}[0-9]{1,13}(\.[0-9]{1,7})?$", fullmatch=True),
       tax_rate=st.from_regex(r"^[0-9]{1,3}(\.[0-9]{1,5})?$", fullmatch=True))
def test_a_line_the_schema_takes_is_one_apply_takes(description: str, quantity: str,
                                                   unit_price: str, tax_rate: str) -> None:
    proposal = reading_with(description=description, quantity=quantity, unit_price=unit_price,
                            tax_rate=tax_rate)
    try:
        purposes.checked(READING, proposal)
    except Refusal:
        return
    assert apply_takes(proposal)


@pure
def test_the_schema_is_held_to_the_draft_s_count_of_lines_and_stays_a_json_schema() -> None:
    items = READING.schema["properties"]["lines"]
    assert items["maxItems"] == money.MAX_LINES == lines.MAX_LINES
    for name in ("description", "quantity", "unit_price", "tax_rate"):
        pattern = items["items"]["properties"][name]["pattern"]
        assert pattern.startswith("^") and pattern.endswith("$")
        assert "(?" not in pattern  # no look-around: a strict model's grammar has none
        re.compile(pattern)
    too_many = {**ANSWER, "lines": [TEA] * (lines.MAX_LINES + 1)}
    with pytest.raises(Refusal, match="invalid_proposal"):
        purposes.checked(READING, too_many)


# --- the reader writes only lines apply takes --------------------------------------------


@pure
def test_the_reader_never_writes_a_line_apply_would_refuse() -> None:
    for text in ("Frischmarkt Sommer\nBeratung 1000000000 x 0,01 10000000,00\n"
                 "Summe EUR 10000000,00\n",
                 "Frischmarkt Sommer\nTee\x00 Earl Grey 1,99\nSumme EUR 1,99\n"):
        reading = parse(text)
        assert as_read(purposes.checked(READING, reading)) == as_read(reading)
        assert apply_takes(reading)


@pure
def test_a_receipt_of_more_lines_than_a_draft_holds_reads_as_many_as_it_holds() -> None:
    text = "Frischmarkt Sommer\n" + "".join(
        f"Artikel {n} 1,00\n" for n in range(1, 251)) + "Summe EUR 250,00\n"
    reading = parse(text)
    assert len(reading["lines"]) == lines.MAX_LINES
    assert as_read(purposes.checked(READING, reading)) == as_read(reading)


@pure
@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.from_regex(r"^[A-Za-z\x00\u200b ]{0,10} ?[0-9]{1,12}([.,][0-9]{1,3})?"
                  r"( x [0-9]{1,10}([.,][0-9]{1,3})?)?( [0-9]{1,3}%)?$", fullmatch=True),
    st.text(max_size=20)), max_size=12))
def test_whatever_a_receipt_says_its_reading_is_one_apply_takes(rows: list[str]) -> None:
    reading = parse("\n".join(["Laden", *rows, "Summe EUR 12,00"]))
    assert as_read(purposes.checked(READING, reading)) == as_read(reading)
    assert not purposes.reading_lines(reading) or apply_takes(reading)


# --- what the person reads before pressing anything ---------------------------------------


@pytest.mark.anyio
async def test_a_reading_the_draft_has_no_room_for_says_so_before_apply(settings) -> None:
    answer = {**ANSWER, "total": None, "lines": [TEA] * lines.MAX_LINES}
    async with running(settings, {"local": Writer(answer)}) as studio:
        client = await studio.signed_in()
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        summary = lease["invoices"][0]["candidates"][0]["summary"]
        assert "This draft has 1 line and the receipt 200, more than the 200 a draft holds" \
            in summary and "new draft" in summary
        page = (await client.get(f"/leases/{lease['lease_id']}", headers=PAGE)).text
        assert "more than the 200 a draft holds" in page
        refused = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert refused.status_code == 422, refused.text
        assert "more than the 200 a draft holds" in refused.json()["message"]
        assert len(lines_of(studio.settings.db_path, invoice_id)) == 1
        assert scalar(studio.settings.db_path, "SELECT status FROM leases") == "proposed"


@pytest.mark.anyio
async def test_amounts_no_invoice_may_total_say_so_before_apply(settings) -> None:
    answer = reading_with(quantity="999999999999", unit_price="999999999999")
    async with running(settings, {"local": Writer(answer)}) as studio:
        client = await studio.signed_in()
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        assert "1,000,000,000,000,000 or more" in lease["invoices"][0]["candidates"][0]["summary"]
        refused = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert refused.status_code == 422 and "or more" in refused.json()["message"]
        assert len(lines_of(studio.settings.db_path, invoice_id)) == 1


@pytest.mark.anyio
async def test_a_reading_whose_lines_do_not_come_to_its_total_says_what_apply_would_add(
        settings) -> None:
    """Beratung 99.999,00 on a receipt whose total is 6,49: the summary names what apply adds,
    and that the receipt says otherwise, before anything is applied."""
    answer = {**ANSWER, "lines": [TEA, {"description": "Beratung", "quantity": "1",
                                        "unit_price": "99999.00", "tax_rate": "0"}]}
    async with running(settings, {"local": Writer(answer)}) as studio:
        client = await studio.signed_in()
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        summary = lease["invoices"][0]["candidates"][0]["summary"]
        assert summary == (
            "2 lines from Frischmarkt Sommer, EUR 100005.49 (EUR 100005.07 before tax)."
            " The lines come to EUR 100005.49, the receipt says EUR 6.49: check them before you"
            " use them.")
        page = (await client.get(f"/leases/{lease['lease_id']}", headers=PAGE)).text
        assert "the receipt says EUR 6.49: check them" in page
        assert len(lines_of(studio.settings.db_path, invoice_id)) == 1
        # What the summary said is what apply adds.
        applied = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert applied.status_code == 200, applied.text
        total = scalar(studio.settings.db_path, "SELECT total FROM invoices WHERE id = ?",
                       invoice_id)
        assert Decimal(total) == Decimal("119.00") + Decimal("100005.49")


@pytest.mark.anyio
async def test_a_reading_without_a_currency_is_in_the_draft_s_and_says_so(settings) -> None:
    async with running(settings, {"local": Writer({**ANSWER, "currency": None})}) as studio:
        client = await studio.signed_in()
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        summary = lease["invoices"][0]["candidates"][0]["summary"]
        assert summary == ("1 line from Frischmarkt Sommer, EUR 6.49 (EUR 6.07 before tax)."
                           " The lines come to the receipt's total. The receipt names no"
                           " currency: its amounts are taken as EUR, the draft's.")
        applied = await client.post(f"/leases/{lease['lease_id']}/apply")
        assert applied.status_code == 200, applied.text
        assert lines_of(studio.settings.db_path, invoice_id)[1:] == [TEA]


# --- a reminder's subject is one line ------------------------------------------------------


@pure
@pytest.mark.parametrize("subject", [
    "Reminder\r\nBcc: victim@example.com", "Reminder\nBcc: victim@example.com",
    "Reminder\u2028Bcc: victim@example.com", "=?utf-8?b?UmVtaW5kZXINCkJjYzogdmljdGlt?=",
    "Reminder\x00", " \u200b ",
], ids=repr)
def test_a_subject_that_is_not_one_line_never_becomes_a_suggestion(subject: str) -> None:
    with pytest.raises(Refusal, match="invalid_proposal"):
        purposes.checked(REMINDER, {"subject": subject, "message": "Please pay."})


@pytest.mark.anyio
async def test_a_reminder_whose_subject_would_add_a_header_is_never_kept(settings) -> None:
    words = {"subject": "Reminder\r\nBcc: victim@example.com", "message": "Please pay."}
    async with running(settings, {"local": Writer(words)}) as studio:
        client = await studio.signed_in()
        invoice_id = studio.invoice_ids()[0]
        made = await client.post("/leases", json=lease_body(
            [invoice_id], "remind-1", purpose="draft_reminder"))
        assert made.status_code == 201, made.text
        await wait_for_status(client, made.json()["lease_id"], "failed")
        db = studio.settings.db_path
        assert scalar(db, "SELECT error FROM tasks").startswith("invalid_proposal")
        assert scalar(db, "SELECT COUNT(*) FROM proposals") == 0
        assert scalar(db, "SELECT reminder FROM invoices WHERE id = ?", invoice_id) is None


# --- a draft issued or deleted after reading -----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("then", ["issued", "deleted"])
async def test_a_draft_issued_or_deleted_since_reading_says_what_to_do_instead(
        settings, then: str) -> None:
    async with running(settings, {"local": Writer(ANSWER)}) as studio:
        client = await studio.signed_in()
        invoice_id = await draft_with_receipt(client, pdf(frischmarkt()))
        lease = await proposed(client, read(invoice_id))
        if then == "issued":
            draft = (await client.get(f"/invoices/{invoice_id}")).json()
            done = await issue(client, draft)
        else:
            done = await client.delete(f"/invoices/{invoice_id}")
        assert done.status_code in (200, 201), done.text
        line_items = scalar(studio.settings.db_path,
                            "SELECT line_items FROM invoices WHERE id = ?", invoice_id)
        refused = await client.post(f"/leases/{lease['lease_id']}/apply")
        answer = (409, "invoice_issued") if then == "issued" else (404, "invoice_not_found")
        assert (refused.status_code, refused.json()["detail"]) == answer, refused.text
        message = refused.json()["message"]
        assert then in message and "attach it to a new draft" in message
        assert "Read it again" not in message
        assert scalar(studio.settings.db_path, "SELECT line_items FROM invoices WHERE id = ?",
                      invoice_id) == line_items
        assert json.loads(line_items)[1:] == []
