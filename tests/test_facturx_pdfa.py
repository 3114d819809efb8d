"""The Factur-X PDF is a PDF/A-3B that strict validators accept: it holds images (the payment
code, a logo), so it names the colour space they are meant in with an sRGB output intent whose
ICC profile travels inside the file. Its XML states the document's one payment term."""

from __future__ import annotations

import io

import pypdf
import pytest
from lxml import etree
from PIL import ImageCms

from studio.billing import facturx
from tests.test_facturx import issued_with_two_rates

pytestmark = pytest.mark.anyio


async def test_the_facturx_pdf_carries_an_srgb_output_intent_with_its_icc_profile(
        studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    reply = await client.get(f"/invoices/{invoice['id']}.facturx.pdf")
    assert reply.status_code == 200, reply.text
    reader = pypdf.PdfReader(io.BytesIO(reply.content))
    assert any(page.images for page in reader.pages)  # what makes the intent necessary
    [intent] = [entry.get_object() for entry in reader.trailer["/Root"]["/OutputIntents"]]
    assert intent["/Type"] == "/OutputIntent" and intent["/S"] == "/GTS_PDFA1"
    assert intent["/OutputConditionIdentifier"] == "sRGB IEC61966-2.1"
    profile = intent["/DestOutputProfile"].get_object()
    assert profile["/N"] == 3
    icc = profile.get_data()
    assert icc[36:40] == b"acsp" and icc[16:20] == b"RGB "  # an ICC profile, of RGB
    described = ImageCms.getProfileDescription(ImageCms.ImageCmsProfile(io.BytesIO(icc)))
    assert "sRGB" in described
    # Still PDF/A-3B, as its metadata says, and still the same e-invoice inside.
    xmp = reader.trailer["/Root"]["/Metadata"].get_object().get_data().decode()
    assert "<pdfaid:part>3</pdfaid:part>" in xmp and "<pdfaid:conformance>B" in xmp


async def test_the_e_invoice_states_the_documents_one_payment_term(studio) -> None:
    client = await studio.signed_in()
    invoice = await issued_with_two_rates(client)
    xml = (await client.get(f"/invoices/{invoice['id']}.xml")).content
    tree = etree.fromstring(xml)
    [said] = tree.xpath("//ram:SpecifiedTradePaymentTerms/ram:Description/text()",
                        namespaces=facturx.NAMESPACES)
    # The seller's own "within 14 days" is left out; no bank details in the terms.
    assert said.startswith("Payment within ") and f"by {invoice['due_date']}." in said, said
    assert "14 days" not in said and "IBAN" not in said, said
