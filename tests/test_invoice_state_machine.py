"""A model of drafts, edits, issues, replays and credit notes, checked after every step:
every series gapless, every issued invoice matching its frozen hash, credits within totals,
and a replayed issue always answering the number it gave first."""

from __future__ import annotations

import os
import tempfile
from decimal import Decimal
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from studio.billing import invoices, profiles
from studio.errors import Refusal
from studio.ops import audit
from studio.store.db import connect_to
from studio.store.transactions import in_transaction
from tests import backends

OWNER = "actor-1"
amounts = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("500"), places=2)
rates = st.sampled_from(["0", "7", "19", "20"])


def lines_of(prices: list[Decimal], rate: str) -> list[dict[str, str]]:
    return [{"description": f"Item {n}", "quantity": "1", "unit_price": str(price),
             "tax_rate": rate} for n, price in enumerate(prices)]


class Invoicing(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.TemporaryDirectory()
        self.path = Path(self.folder.name) / "studio.db"
        self.db = connect_to(backends.settings(self.path))
        self.now = 1_790_000_000.0
        in_transaction(self.db, lambda db: db.execute(
            "INSERT INTO actors (id, email, password_hash, created_at) VALUES (?, ?, 'x', 0)",
            (OWNER, "owner@example.com")))
        in_transaction(self.db, profiles.save, OWNER, {"name": "S", "address": "", "vat_id": ""})
        self.drafts: dict[str, int] = {}  # draft id -> revision the model expects
        self.issued: dict[str, str] = {}  # request id -> number answered
        self.issued_for: dict[str, str] = {}  # request id -> invoice id
        self.invoices: list[str] = []  # issued invoices (not credit notes)
        self.requests = 0

    def teardown(self) -> None:
        self.db.close()
        backends.drop(self.path)
        self.folder.cleanup()

    def call(self, unit, *args):  # type: ignore[no-untyped-def]
        self.now += 1
        return in_transaction(self.db, unit, *args, now=self.now)

    @rule(prices=st.lists(amounts, min_size=1, max_size=3), rate=rates)
    def make_draft(self, prices: list[Decimal], rate: str) -> None:
        fields = invoices.parse_draft({"customer": "C", "currency": "EUR",
                                       "due_date": "2027-01-01",
                                       "line_items": lines_of(prices, rate)})
        made, created = self.call(invoices.create_draft, OWNER, fields, None)
        assert created
        self.drafts[made["id"]] = 1

    @precondition(lambda self: self.drafts)
    @rule(data=st.data(), prices=st.lists(amounts, min_size=1, max_size=3), stale=st.booleans())
    def edit(self, data: st.DataObject, prices: list[Decimal], stale: bool) -> None:
        draft = data.draw(st.sampled_from(list(self.drafts)))
        revision = self.drafts[draft] - (1 if stale and self.drafts[draft] > 1 else 0)
        stored = "SELECT line_items FROM invoices WHERE id = ?"
        lines = self.db.execute(stored, (draft,)).fetchone()[0]
        try:
            edited = self.call(invoices.edit_draft, OWNER, draft, revision,
                               {"line_items": lines_of(prices, "19")})
        except Refusal as refusal:
            assert refusal.code == "draft_changed" and revision != self.drafts[draft]
            return
        assert revision == self.drafts[draft]
        # An edit that changes nothing writes nothing and keeps the revision.
        unchanged = self.db.execute(stored, (draft,)).fetchone()[0] == lines
        assert edited["revision"] == revision + (0 if unchanged else 1)
        self.drafts[draft] = edited["revision"]

    @precondition(lambda self: self.drafts)
    @rule(data=st.data())
    def issue(self, data: st.DataObject) -> None:
        draft = data.draw(st.sampled_from(list(self.drafts)))
        self.requests += 1
        request_id = f"issue-{self.requests}"
        kind = self.db.execute("SELECT kind FROM invoices WHERE id = ?", (draft,)).fetchone()[0]
        try:
            receipt, created = self.call(invoices.issue, OWNER, draft, request_id,
                                         self.drafts[draft])
        except Refusal as refusal:
            assert refusal.code == "credit_exceeds_invoice" and kind == "credit_note"
            return
        assert created
        self.issued[request_id] = receipt["number"]
        self.issued_for[request_id] = draft
        del self.drafts[draft]
        if kind == "invoice":
            self.invoices.append(draft)

    @precondition(lambda self: self.issued)
    @rule(data=st.data(), other_input=st.booleans())
    def replay(self, data: st.DataObject, other_input: bool) -> None:
        request_id = data.draw(st.sampled_from(list(self.issued)))
        invoice_id = self.issued_for[request_id]
        revision = 99 if other_input else None
        if revision is None:
            revision = self.db.execute("SELECT revision FROM invoices WHERE id = ?",
                                       (invoice_id,)).fetchone()[0]
        try:
            receipt, created = self.call(invoices.issue, OWNER, invoice_id, request_id,
                                         revision)
        except Refusal as refusal:
            assert other_input and refusal.code == "request_id_conflict"
            return
        assert not other_input and not created
        assert receipt["number"] == self.issued[request_id]

    @precondition(lambda self: self.invoices)
    @rule(data=st.data(), share=st.sampled_from([Decimal("0.25"), Decimal("0.5"), Decimal(1)]))
    def credit(self, data: st.DataObject, share: Decimal) -> None:
        invoice_id = data.draw(st.sampled_from(self.invoices))
        note, created = self.call(invoices.make_credit_note, OWNER, invoice_id, None)
        # One credit note of an invoice is drafted at a time: asking again opens that draft.
        assert created == (note["id"] not in self.drafts)
        if not created:
            assert note["revision"] == self.drafts[note["id"]]
            return
        lines = [{**line, "quantity": str(Decimal(line["quantity"]) * share)}
                 for line in note["line_items"]]
        edited = self.call(invoices.edit_draft, OWNER, note["id"], 1, {"line_items": lines})
        self.drafts[note["id"]] = edited["revision"]  # 1 still when it credits the whole

    @precondition(lambda self: self.drafts)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        draft = data.draw(st.sampled_from(list(self.drafts)))
        self.call(invoices.delete_draft, OWNER, draft)
        del self.drafts[draft]

    @invariant()
    def books_are_whole(self) -> None:
        self.db.execute("BEGIN")
        try:
            assert audit.problems(self.db) == []
        finally:
            self.db.execute("COMMIT")
        numbers = sorted(self.issued.values())
        assert len(set(numbers)) == len(numbers)


Invoicing.TestCase.settings = settings(
    max_examples=int(os.environ.get("STUDIO_SM_EXAMPLES", "40")),
    stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestInvoicingKeepsGaplessSeriesFrozenHashesAndCreditsWithinTotals = Invoicing.TestCase
