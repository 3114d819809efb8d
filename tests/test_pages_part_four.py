"""Forms and pages meet the person: the review step counts what will be made, a request that
ran out of time offers to ask again, forms start from where the person came, a credit note asks
only what a credit note has, an empty form shows no error, a customer's VAT ID is not the
seller's own, and one working share link per invoice serves every email."""

from __future__ import annotations

import re

import pytest

from tests.conftest import lease_body, scalar
from tests.test_words_pages import visible

pytestmark = pytest.mark.anyio
PAGE = {"Accept": "text/html"}
HTMX = {"HX-Request": "true", "Accept": "text/html"}


def words(html: str) -> str:
    return " ".join(" ".join(visible(html).text).split())


async def test_the_review_step_counts_the_suggestions_that_will_be_made(studio) -> None:
    client = await studio.signed_in()
    ids = studio.invoice_ids()[:3]
    query = "&".join(f"invoice_id={invoice_id}" for invoice_id in ids)
    # Two writers ticked, but the best available one is the built-in one here: 3 x 1 x 2.
    review = await client.get(f"/review?purpose=summarize_invoice&{query}&provider=local"
                              "&provider=auto&candidates=2", headers=PAGE)
    assert review.status_code == 200
    counted = re.search(r'id="task-count">(\d+)<', review.text)
    assert counted is not None and counted.group(1) == "6", words(review.text)
    assert "exactly what will be asked" not in review.text

    made = await client.post("/leases", json=lease_body(ids, "counted", providers=["local", "auto"],
                                                        candidates=2))
    assert made.status_code == 201, made.text
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM tasks WHERE lease_id = ?",
                  made.json()["lease_id"]) == 6
