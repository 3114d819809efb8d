"""An issued invoice never changes: its PDF is rendered once, in another process, and kept;
a credit note's document reads as credit."""

from __future__ import annotations

import asyncio
import io
import uuid
from typing import Any

import pypdf
import pytest

from studio.billing import documents
from tests.conftest import days_ahead, rows, scalar

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}


async def issued(client: Any, lines: int = 1, **changes: Any) -> dict[str, Any]:
    """A draft with `lines` lines, issued; the invoice JSON."""
    saved = await client.post("/settings", json={"name": "Ada Works", "address": "1 Lane",
                                                 "vat_id": "DE136695976"})
    assert saved.status_code == 200
    made = await client.post("/invoices", json={
        "customer": "Acme Ltd", "currency": "EUR", "due_date": days_ahead(61),
        "line_items": [{"description": f"Widget {n}", "quantity": "3", "unit_price": "19.99",
                        "tax_rate": "19"} for n in range(lines)], **changes})
    assert made.status_code == 201, made.text
    done = await client.post(f"/invoices/{made.json()['id']}/issue", json={
        "request_id": str(uuid.uuid4()), "revision": 1})
    assert done.status_code == 201, done.text
    return (await client.get(f"/invoices/{made.json()['id']}")).json()


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each render the studio asks for, by invoice id."""
    counted: list[str] = []
    original = documents.render_elsewhere

    async def counting(invoice: dict[str, Any]) -> bytes:
        counted.append(invoice["id"])
        return await original(invoice)

    monkeypatch.setattr(documents, "render_elsewhere", counting)
    return counted


async def test_an_issued_pdf_is_rendered_once_and_kept(studio, renders) -> None:
    client = await studio.signed_in()
    invoice = await issued(client, lines=3)
    first = await client.get(f"/invoices/{invoice['id']}.pdf")
    assert first.status_code == 200 and first.content.startswith(b"%PDF")
    [kept] = rows(studio.settings.db_path,
                  "SELECT invoice_id, frozen_sha256, content FROM issued_documents")
    assert kept["invoice_id"] == invoice["id"] and bytes(kept["content"]) == first.content
    assert kept["frozen_sha256"] == scalar(
        studio.settings.db_path, "SELECT frozen_sha256 FROM invoices WHERE id = ?",
        invoice["id"])
    second = await client.get(f"/invoices/{invoice['id']}.pdf")
    assert second.status_code == 200 and second.content == first.content
    assert renders == [invoice["id"]]


async def test_concurrent_first_downloads_render_once_and_get_the_same_bytes(
        studio, renders) -> None:
    client = await studio.signed_in()
    invoice = await issued(client, lines=40)
    replies = await asyncio.gather(*[client.get(f"/invoices/{invoice['id']}.pdf")
                                     for _ in range(12)])
    assert {reply.status_code for reply in replies} == {200}
    assert len({reply.content for reply in replies}) == 1
    assert renders == [invoice["id"]]
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM issued_documents") == 1


async def test_the_pdf_is_rendered_in_another_process(studio, monkeypatch) -> None:
    """fpdf2 is pure Python: rendered on a thread of the serving process it would hold the
    GIL that the event loop needs, so it runs in a process of its own."""
    def not_here(*_: Any, **__: Any) -> bytes:
        raise AssertionError("rendered inside the serving process")

    monkeypatch.setattr(documents, "render_pdf", not_here)
    client = await studio.signed_in()
    invoice = await issued(client)
    reply = await client.get(f"/invoices/{invoice['id']}.pdf")
    assert reply.status_code == 200 and reply.content.startswith(b"%PDF")


async def test_a_credit_note_reads_as_credit_and_names_the_invoice_it_credits(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued(client)
    note = (await client.post(f"/invoices/{invoice['id']}/credit-note",
                              json={"request_id": "cn-doc"})).json()
    done = await client.post(f"/invoices/{note['id']}/issue",
                             json={"request_id": str(uuid.uuid4()), "revision": 1})
    assert done.status_code == 201, done.text
    number = done.json()["number"]

    pdf = await client.get(f"/invoices/{note['id']}.pdf")
    text = pypdf.PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    assert f"Credit note {number}" in text
    assert f"Credits invoice {invoice['number']}" in text
    assert "-€71.36" in text and "-€59.97" in text and "-€11.39" in text
    assert "Total credited" in text
    assert "Due" not in text and invoice["due_date"] not in text

    page = (await client.get(f"/invoices/{note['id']}/document", headers=PAGE)).text
    assert f"Credit note {number}" in page and invoice["number"] in page
    assert "Credits invoice" in page and "Total credited" in page
    assert "-€71.36" in page and "-€59.97" in page
    assert "<dt>Due</dt>" not in page
    # In the list too: the credit note's total below zero, and no due date beside it.
    listed = (await client.get("/invoices", headers=PAGE)).text
    [row] = [tr for tr in listed.split("<tr>") if number in tr]
    assert "-€71.36" in row and note["due_date"] not in row
    # The invoice itself still reads as an invoice: positive amounts and a due date.
    original = pypdf.PdfReader(io.BytesIO(
        (await client.get(f"/invoices/{invoice['id']}.pdf")).content)).pages[0].extract_text()
    assert "Due" in original and "-€" not in original and "€71.36" in original


async def test_the_document_shows_unit_prices_in_the_currencys_minor_units(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued(client, line_items=[{"description": "Design", "quantity": "2",
                                                "unit_price": "450", "tax_rate": "0"}])
    text = pypdf.PdfReader(io.BytesIO((await client.get(
        f"/invoices/{invoice['id']}.pdf")).content)).pages[0].extract_text()
    assert "Design 2 450.00 0 %" in text
    page = (await client.get(f"/invoices/{invoice['id']}/document", headers=PAGE)).text
    assert '<td class="num">450.00</td>' in page
