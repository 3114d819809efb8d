"""A person's own invoices: drafts, issuing with gapless numbers, credit notes.

    draft --(edit: revision + 1)--> draft
    draft --(delete)--> deleted
    draft --(issue)--> issued           one way; the database refuses to change it after

Issuing is an intent like a lease: the review step freezes `{request_id, revision}` (and
the customer's revision, so the buyer issued is the one reviewed) and
everything (binding, checks, the counter, the number, the frozen hash) commits in one
BEGIN IMMEDIATE transaction. Units take a `sqlite3.Connection` and run inside
`Database.write` or `Database.read`; the async functions below are what handlers call.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from studio import counters, i18n, logs
from studio.accounts.auth import Actor
from studio.billing import balances, customers, identifiers, money, profiles, taxes
from studio.errors import N_, FieldChecks, Refusal
from studio.i18n import gettext
from studio.store import bindings, paging
from studio.store.db import Database
from studio.store.dialect import account_lock, hold
from studio.store.migrations.legacy import continue_legacy_series
from studio.store.transactions import after_commit, clock, timestamp

if TYPE_CHECKING:
    from studio.store.stores import FileStore

MAX_CUSTOMER = 200
MAX_NOTES = 2000
MAX_VAT_EXEMPTION = 300
PREFIXES = {"invoice": "INV", "credit_note": "CN"}
# How long before its supply an invoice may be issued (see `_refuse_dates_out_of_order`).
SUPPLY_AHEAD = dt.timedelta(days=366)
# What issuing freezes, and what the frozen SHA-256 covers.
FROZEN = ("id", "owner_id", "kind", "credits", "number", "customer", "currency", "due_date",
          "line_items", "net", "tax", "total", "seller", "issued_at")
# Frozen too, but hashed only when set: an invoice issued before they existed has none of
# them, and its frozen SHA-256 still reads the same.
FROZEN_WHEN_SET = ("customer_id", "buyer", "issue_date", "supply_date", "notes",
                   "period_start", "period_end", "vat_exemption")
# The buyer's details issuing copies from the customer: editing the customer later changes
# no issued invoice.
BUYER = ("name", "email", "address", "country", "vat_id")
LISTED = ("id", "number", "status", "kind", "customer", "currency", "net", "tax", "total",
          "due_date", "summary", "issued_at")


# --- input -----------------------------------------------------------------------------------


def _customer(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= MAX_CUSTOMER:
        raise Refusal("invalid_body", gettext(
            "The customer must be 1 to %(most)s characters.") % {"most": MAX_CUSTOMER})
    return identifiers.plain(value, N_("customer name")).strip()


def parse_date(value: object, what: str) -> str:
    """A date like 2026-12-31, as written; `what` names it in the refusal (an English word the
    catalogue translates, marked `N_()` where it is written)."""
    try:
        if not isinstance(value, str) or len(value) != 10:
            raise ValueError(value)
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        raise Refusal("invalid_body", gettext("The %(what)s must be a date like 2026-12-31.") % {
            "what": gettext(what)}) from None


def _due_date(value: object) -> str:
    return parse_date(value, N_("due date"))


def _supply_date(value: object) -> str | None:
    """When the goods or services were supplied, if the person says so (left out or blank:
    not said)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_date(value, N_("supply date"))


def _free_text(value: object, most: int, too_long: str, name: str) -> str:
    """A field of the person's own words: none is empty; else text of at most `most`
    characters (`too_long` says so, naming the field) with no control characters."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value.strip()) > most:
        raise Refusal("invalid_body", gettext(too_long) % {"most": i18n.number(most)})
    return identifiers.plain(value, name).strip()


def _notes(value: object) -> str:
    return _free_text(value, MAX_NOTES, N_("The notes must be text of at most %(most)s"
                                           " characters."), N_("notes"))


def parse_vat_exemption(value: object) -> str:
    """Why the lines at 0 % charge no VAT, as the law that exempts the sale says it ("Exempt
    as a small business, § 19 UStG"): printed under the tax table and sent as the e-invoice's
    exemption reason. One line of text."""
    return " ".join(_free_text(value, MAX_VAT_EXEMPTION, N_(
        "The reason for no VAT must be text of at most %(most)s characters."),
        N_("reason for no VAT")).split())


def _customer_id(value: object) -> str | None:
    """A customer's id as given (left out or blank: none); whose it is is checked in the
    transaction that saves the draft."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or len(value) > 100:
        raise Refusal("invalid_body", gettext(
            "The customer_id must be the id of one of your customers, as text."))
    return value.strip()


def parse_draft(body: dict[str, Any], before: dict[str, Any] | None = None) -> dict[str, Any]:
    """A draft's fields, checked and normalised; on an edit, what the body leaves out is kept.
    A credit note keeps its invoice's currency."""
    before = before or {}

    def given(name: str) -> Any:
        return body[name] if name in body else before.get(name)

    # A currency no longer in use may stay on a draft that already has it; a new one must be
    # in use today.
    currency = given("currency")
    if "currency" not in before or currency != before["currency"]:
        currency = money.currency_code(currency)
    if before.get("kind") == "credit_note" and currency != before["currency"]:
        raise Refusal("invalid_body", gettext(
            "A credit note keeps the currency of the invoice it corrects (%(currency)s).") % {
                "currency": before["currency"]})
    checks = FieldChecks()  # the lines and the other fields refused at once, each by its name
    lines = checks.check("line_items", money.parse_lines, given("line_items"))
    customer_id = checks.check("customer_id", _customer_id, given("customer_id"))
    # Naming a customer without a name: the name is the customer's, read when saved.
    named_by_customer = customer_id is not None and "customer_id" in body \
        and "customer" not in body
    found = {
        "customer": None if named_by_customer else checks.check("customer", _customer,
                                                                given("customer")),
        "customer_id": customer_id,
        "currency": currency,
        "due_date": checks.check("due_date", _due_date, given("due_date")),
        "supply_date": checks.check("supply_date", _supply_date, given("supply_date")),
        "notes": checks.check("notes", _notes, given("notes")),
        "vat_exemption": checks.check("vat_exemption", parse_vat_exemption,
                                      given("vat_exemption")),
    }
    checks.done()
    assert lines is not None
    return {**found, "line_items": json.dumps([line.as_json() for line in lines]),
            **money.totals(lines, currency).as_json(currency)}


def _with_customer(db: sqlite3.Connection, actor_id: str, fields: dict[str, Any]
                   ) -> dict[str, Any]:
    """The draft's fields with its customer checked as the actor's own (anyone else's is as
    absent as a made-up id), and the customer's name where the draft gave none."""
    if fields["customer_id"] is None:
        return fields
    found = customers.owned(db, actor_id, fields["customer_id"])
    return {**fields, "customer": fields["customer"] or found["name"]}


def parse_customer_revision(body: dict[str, Any]) -> int | None:
    """The revision of the customer the issue review showed, if the request says it (a
    client that leaves it out issues the customer's details as they are then)."""
    if body.get("customer_revision") is None:
        return None
    try:
        return parse_revision({"revision": body["customer_revision"]})
    except Refusal:
        raise Refusal("invalid_body", gettext(
            "Reload the page and issue again: the form did not say which version of the customer"
            " you reviewed.")) from None


def parse_revision(body: dict[str, Any]) -> int:
    return identifiers.revision(body.get("revision"), "draft")


def parse_confirm_tax(body: dict[str, Any]) -> bool | None:
    """Whether the person confirmed the invoice's tax as it is: `confirm_tax: false` asks
    (409 `tax_needs_confirming` when the tax looks wrong), `true` confirms it. The review page
    always says one or the other; a client that says neither issues as it always did."""
    given = body.get("confirm_tax")
    if given is None:
        return None
    if given in (False, "", "false"):
        return False
    if given in (True, "true", "on"):
        return True
    raise Refusal("invalid_body", gettext(
        "confirm_tax must be true (issue the tax as it is) or false."))


# --- reading ---------------------------------------------------------------------------------


def _row(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> sqlite3.Row | None:
    """The invoice if it is the actor's and not deleted; anyone else's is as absent."""
    return db.execute(
        "SELECT * FROM invoices WHERE id = ? AND owner_id = ? AND status != 'deleted'",
        (invoice_id, actor_id),
    ).fetchone()


def owned(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> sqlite3.Row:
    """The actor's own invoice, draft or issued; 404 otherwise, as for a made-up id."""
    row = _row(db, actor_id, invoice_id)
    if row is None:
        raise Refusal("invoice_not_found")
    return row


def _attachments(db: sqlite3.Connection, invoice_id: str) -> list[dict[str, Any]]:
    return [dict(row) for row in db.execute(
        "SELECT id AS attachment_id, filename, content_type, size, sha256 FROM attachments"
        " WHERE invoice_id = ? ORDER BY created_at, id", (invoice_id,))]


def _by_rate(totals: money.Totals, currency: str) -> list[dict[str, str]]:
    return [{"rate": str(rate), "net": money.text(net, currency),
             "tax": money.text(tax, currency)} for rate, net, tax in totals.by_rate]


def tax_breakdown(line_items: list[dict[str, Any]], currency: str) -> list[dict[str, str]]:
    """Net and tax per rate, in rate order, exact: they add up to the invoice's net and tax,
    as each line is rounded once and the sums are of rounded lines."""
    lines = [line for line in map(money.stored_line, line_items) if line]
    return _by_rate(money.add_up(lines, currency), currency)


def _lines_and_rates(line_items: str, currency: str
                     ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Each stored line with its rounded net, read as stored (only input is checked): empty
    where its amounts are not numbers at all; and the tax per rate, from the same sums."""
    lines = json.loads(line_items)
    read = [money.stored_line(line) for line in lines]
    totals = money.add_up([line for line in read if line], currency)
    nets = iter(totals.line_nets)
    return ([{**line, "net": money.text(next(nets), currency) if found else ""}
             for line, found in zip(lines, read, strict=True)], _by_rate(totals, currency))


def as_json(db: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    """The invoice as the API speaks it, lines with their discount and rounded net, and the
    tax per rate."""
    lines, rates = _lines_and_rates(row["line_items"], row["currency"])
    if row["status"] == "deleted":
        lines = json.loads(row["line_items"])
    lines = [{**line, "discount_percent": str(line.get("discount_percent", "0"))}
             for line in lines]
    invoice = {
        "id": row["id"], "number": row["number"], "status": row["status"],
        "kind": row["kind"], "credits": row["credits"], "revision": row["revision"],
        # Changed since it was first saved: its own fields, not its attachments.
        "edited": row["status"] == "draft" and bool(row["updated_at"] and row["created_at"])
        and row["updated_at"] > row["created_at"],
        "customer": row["customer"], "customer_id": row["customer_id"],
        "buyer": json.loads(row["buyer"]) if row["buyer"] else None,
        "currency": row["currency"], "issue_date": row["issue_date"],
        "supply_date": row["supply_date"], "due_date": row["due_date"], "notes": row["notes"],
        "vat_exemption": row["vat_exemption"],
        # A schedule's invoice names it and the service period it bills.
        "recurring_id": row["recurring_id"], "period_start": row["period_start"],
        "period_end": row["period_end"],
        "line_items": lines, "net": row["net"], "tax": row["tax"], "total": row["total"],
        "tax_breakdown": rates,
        "summary": row["summary"], "issued_at": timestamp(row["issued_at"]),
        # A reminder a person kept from the model's suggestions, for the reminder form.
        "reminder": json.loads(row["reminder"]) if row["reminder"] else None,
        "seller": json.loads(row["seller"]) if row["seller"] else None,
        "attachments": _attachments(db, row["id"]),
    }
    # What has been paid and what is due (amount_paid, amount_due, payment_status, overdue):
    invoice.update(balances.standing_of(db, row))
    return invoice


# The list: drafts newest first, then issued invoices newest first. Each part is a range of
# its own index (migration 9), so a page reads `limit` rows whatever the list's length.
_LISTED_COLUMNS = ", ".join(LISTED)
DRAFTS_FIRST = (
    f"SELECT {_LISTED_COLUMNS}, created_at FROM invoices"
    " WHERE owner_id = :owner AND status = 'draft'"
    " ORDER BY created_at DESC, id DESC LIMIT :limit")
DRAFTS_AFTER = (
    f"SELECT {_LISTED_COLUMNS}, created_at FROM invoices"
    " WHERE owner_id = :owner AND status = 'draft' AND (created_at, id) < (:at, :key)"
    " ORDER BY created_at DESC, id DESC LIMIT :limit")
ISSUED_FIRST = (
    f"SELECT {_LISTED_COLUMNS} FROM invoices WHERE owner_id = :owner AND status = 'issued'"
    " ORDER BY issued_at DESC, number DESC LIMIT :limit")
ISSUED_AFTER = (
    f"SELECT {_LISTED_COLUMNS} FROM invoices WHERE owner_id = :owner AND status = 'issued'"
    " AND (issued_at, number) < (:at, :key) ORDER BY issued_at DESC, number DESC LIMIT :limit")
LIST_QUERIES = [(sql, {"owner": "", "at": 0.0, "key": "", "limit": 1})
                for sql in (DRAFTS_FIRST, DRAFTS_AFTER, ISSUED_FIRST, ISSUED_AFTER)]


def listed(db: sqlite3.Connection, actor_id: str, limit: int, after: list[Any] | None
            ) -> paging.Page[dict[str, Any]]:
    """One page of the actor's invoices after the cursor's invoice, and the next cursor."""
    part, at, key = paging.key_of(after, str, float, str) if after else ("draft", 0.0, "")
    if part not in ("draft", "issued"):
        raise Refusal("invalid_cursor")
    found: list[sqlite3.Row] = []
    asked = {"owner": actor_id, "limit": limit + 1, "at": at, "key": key}
    if part == "draft":
        found += db.execute(DRAFTS_AFTER if after else DRAFTS_FIRST, asked).fetchall()
    if len(found) <= limit:  # room left: the issued invoices follow the drafts
        asked["limit"] = limit + 1 - len(found)
        found += db.execute(ISSUED_AFTER if part == "issued" else ISSUED_FIRST,
                            asked).fetchall()
    return page_of(found, limit)


def page_of(found: list[sqlite3.Row], limit: int) -> paging.Page[dict[str, Any]]:
    """A page of the list from its rows (drafts, then issued invoices, read one past `limit`),
    and the cursor of the next: drafts go by when they were made, issued ones by when they
    were issued and their number."""
    last = found[limit - 1] if len(found) > limit else None
    following = None
    if last is not None:
        following = paging.cursor(
            ["draft", last["created_at"], last["id"]] if last["status"] == "draft"
            else ["issued", last["issued_at"], last["number"]])
    items = [{**{name: row[name] for name in LISTED}, "issued_at": timestamp(row["issued_at"])}
             for row in found[:limit]]
    return paging.Page(items, following)


def _one(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> dict[str, Any] | None:
    row = _row(db, actor_id, invoice_id)
    return as_json(db, row) if row else None


def _with_corrections(db: sqlite3.Connection, actor_id: str, invoice_id: str
                      ) -> dict[str, Any] | None:
    """An invoice for its page and its document: the invoice a credit note corrects and the
    credit notes made from it."""
    invoice = _one(db, actor_id, invoice_id)
    if invoice is None:
        return None
    if invoice["credits"]:
        corrected = db.execute("SELECT number, seller, buyer, customer FROM invoices"
                               " WHERE id = ?", (invoice["credits"],)).fetchone()
        invoice["credits_number"] = corrected["number"]
        # A credit note reverses its invoice's VAT treatment, judged from the parties as that
        # invoice kept them (documents.zero_rate_category).
        invoice["credited"] = {
            "seller": json.loads(corrected["seller"]) if corrected["seller"] else None,
            "buyer": json.loads(corrected["buyer"]) if corrected["buyer"] else None,
            "customer": corrected["customer"]}
    invoice["credit_notes"] = [dict(row) for row in db.execute(
        "SELECT id, number, status, total FROM invoices WHERE credits = ? AND owner_id = ?"
        " AND status != 'deleted' ORDER BY created_at", (invoice_id, actor_id))]
    return invoice


def _some(db: sqlite3.Connection, actor_id: str, invoice_ids: list[str]) -> list[dict[str, Any]]:
    found = [_one(db, actor_id, invoice_id) for invoice_id in invoice_ids]
    if any(invoice is None for invoice in found):
        raise Refusal("invoice_not_found")
    return found  # type: ignore[return-value]


# --- drafts ----------------------------------------------------------------------------------


def default_rate(db: sqlite3.Connection, actor_id: str, customer_id: object) -> str | None:
    """The rate a new line of the actor's draft starts at for this customer (see
    `taxes.default_rate`); a customer not the actor's counts as none, the draft refuses it."""
    buyer = None
    if isinstance(customer_id, str) and customer_id.strip():
        buyer = db.execute("SELECT name, country, vat_id FROM customers WHERE id = ?"
                           " AND owner_id = ?", (customer_id.strip(), actor_id)).fetchone()
    return taxes.default_rate(profiles.profile_of(db, actor_id), dict(buyer) if buyer else None)


def bound_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """What a request id binds of a draft's or a schedule's fields: a reason for no VAT only
    when given, so a request bound before drafts had one is still the same request."""
    return {name: value for name, value in fields.items()
            if name != "vat_exemption" or value}


def create_draft(db: sqlite3.Connection, actor_id: str, fields: dict[str, Any],
                 request_id: str | None, now: float | None = None, binding: str = "draft"
                 ) -> tuple[dict, bool]:
    """A new draft, once per request id (an import's external id is one too): a lost reply
    makes one draft, not two."""
    hold(db, account_lock(actor_id))
    now = clock(now)

    def make(invoice_id: str) -> None:
        db.execute(
            "INSERT INTO invoices (id, owner_id, customer, customer_id, currency, due_date,"
            " supply_date, notes, vat_exemption, line_items, net, tax, total, created_at,"
            " updated_at)"
            " VALUES (:id, :owner_id, :customer, :customer_id, :currency, :due_date,"
            " :supply_date, :notes, :vat_exemption, :line_items, :net, :tax, :total, :now,"
            " :now)",
            {**_with_customer(db, actor_id, fields), "id": invoice_id, "owner_id": actor_id,
             "now": now},
        )

    if request_id is None:
        invoice_id, created = str(uuid.uuid4()), True
        make(invoice_id)
    else:
        invoice_id, created = bindings.once(
            db, actor_id, binding, request_id, bindings.fingerprint(bound_fields(fields)),
            make, now)
    row = db.execute("SELECT * FROM invoices WHERE id = ?", (invoice_id,)).fetchone()
    return as_json(db, row), created


def _refuse_unless_draft(db: sqlite3.Connection, actor_id: str, invoice_id: str,
                         revision: int | None = None) -> sqlite3.Row:
    row = owned(db, actor_id, invoice_id)
    if row["status"] == "issued":
        raise Refusal("invoice_issued", gettext(
            "This invoice was issued as %(number)s; an issued invoice never changes. Make a"
            " credit note to correct it.") % {"number": row["number"]})
    if revision is not None and row["revision"] != revision:
        raise Refusal("draft_changed", gettext(
            "This draft changed since you opened it (in another tab or elsewhere). Reload it and"
            " make your change again."))
    return row


def edit_draft(db: sqlite3.Connection, actor_id: str, invoice_id: str, revision: int,
               body: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """Edit the revision the person saw; a stale one is refused, so no tab loses work. An
    edit that changes nothing writes nothing: the draft keeps its revision, so another tab's
    edit of it still saves."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    row = _refuse_unless_draft(db, actor_id, invoice_id, revision)
    before = {**dict(row), "line_items": json.loads(row["line_items"])}
    body = taxes.with_default_rate(body, default_rate(
        db, actor_id, body.get("customer_id", row["customer_id"])))
    fields = _with_customer(db, actor_id, parse_draft(body, before))
    if _unchanged(row, fields):
        return as_json(db, row)
    db.execute(
        "UPDATE invoices SET customer = :customer, customer_id = :customer_id,"
        " currency = :currency, due_date = :due_date, supply_date = :supply_date,"
        " notes = :notes, vat_exemption = :vat_exemption, line_items = :line_items,"
        " net = :net, tax = :tax, total = :total,"
        " revision = revision + 1, updated_at = :now"
        " WHERE id = :id AND owner_id = :owner_id AND status = 'draft' AND revision = :revision",
        {**fields, "id": invoice_id, "owner_id": actor_id, "revision": revision, "now": now},
    )
    return as_json(db, _row(db, actor_id, invoice_id))  # type: ignore[arg-type]


def _unchanged(row: sqlite3.Row, fields: dict[str, Any]) -> bool:
    """Whether a draft's edited fields are those it holds (its lines compared as lines, not
    as the text they are kept in)."""
    return all(row[name] == value for name, value in fields.items() if name != "line_items") \
        and json.loads(row["line_items"]) == json.loads(fields["line_items"])


def delete_draft(db: sqlite3.Connection, actor_id: str, invoice_id: str,
                 now: float | None = None, store: FileStore | None = None) -> None:
    """A draft leaves the person's lists; its row stays for the requests that named it. Its
    attachments go with it, their keys freed, and their files after the commit once nothing
    names them (without `store`, or after a crash, the orphan sweep removes them)."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    _refuse_unless_draft(db, actor_id, invoice_id)
    db.execute(
        "UPDATE invoices SET status = 'deleted', updated_at = ? WHERE id = ? AND owner_id = ?"
        " AND status = 'draft'", (now, invoice_id, actor_id))
    attached = db.execute("SELECT id, sha256 FROM attachments WHERE invoice_id = ?",
                          (invoice_id,)).fetchall()
    db.execute("DELETE FROM request_bindings WHERE actor_id = ? AND kind = 'attachment'"
               " AND target_id IN (SELECT id FROM attachments WHERE invoice_id = ?)",
               (actor_id, invoice_id))
    db.execute("DELETE FROM attachments WHERE invoice_id = ?", (invoice_id,))
    for row in attached:
        logs.state_change("attachment", row["id"], actor_id, "attached", "deleted",
                          "draft_deleted", invoice_id=invoice_id)
    if store is not None:
        store.forget(db, sorted({(actor_id, row["sha256"]) for row in attached}))


def make_credit_note(db: sqlite3.Connection, actor_id: str, invoice_id: str,
                     request_id: str | None, now: float | None = None) -> tuple[dict, bool]:
    """A draft credit note copied from an issued invoice, to edit down to what is credited."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    row = owned(db, actor_id, invoice_id)
    if row["status"] != "issued":
        raise Refusal("invoice_not_issued", gettext(
            "Only an issued invoice can be credited; a draft can simply be edited."))
    if row["kind"] != "invoice":
        raise Refusal("not_creditable")
    # One credit note of an invoice is drafted at a time: asking again, with whatever request
    # id, opens that draft; once it is issued or deleted, the next is a new one.
    drafted = db.execute("SELECT id FROM invoices WHERE credits = ? AND owner_id = ?"
                         " AND status = 'draft' ORDER BY created_at, id LIMIT 1",
                         (invoice_id, actor_id)).fetchone()
    open_id = drafted["id"] if drafted else None
    made: list[str] = []

    def make(note_id: str) -> None:
        if note_id == open_id:
            return
        made.append(note_id)
        db.execute(
            "INSERT INTO invoices (id, owner_id, kind, credits, customer, customer_id,"
            " currency, due_date, supply_date, vat_exemption, line_items, net, tax, total,"
            " created_at, updated_at)"
            " SELECT ?, owner_id, 'credit_note', id, customer, customer_id, currency, ?,"
            " supply_date, vat_exemption, line_items, net, tax, total, ?, ? FROM invoices"
            " WHERE id = ?",
            (note_id, dt.datetime.fromtimestamp(now, dt.UTC).date().isoformat(), now, now,
             invoice_id),
        )

    if request_id is None:
        note_id = open_id or str(uuid.uuid4())
        make(note_id)
    else:
        note_id, _ = bindings.once(db, actor_id, "credit_note", request_id,
                                   bindings.fingerprint({"credits": invoice_id}), make, now,
                                   target_id=open_id)
    return as_json(db, db.execute("SELECT * FROM invoices WHERE id = ?",
                                  (note_id,)).fetchone()), bool(made)


# --- issuing ---------------------------------------------------------------------------------


def frozen_sha256(db: sqlite3.Connection, fields: dict[str, Any],
                  attachments: list[dict[str, Any]] | None = None) -> str:
    """The SHA-256 of everything issuing freezes, attachments included."""
    content = {name: fields[name] for name in FROZEN}
    content["line_items"] = json.loads(fields["line_items"])
    content["seller"] = json.loads(fields["seller"]) if fields["seller"] else None
    content.update({name: fields[name] for name in FROZEN_WHEN_SET if fields.get(name)})
    if "buyer" in content:
        content["buyer"] = json.loads(content["buyer"])
    content["attachments"] = [
        {"sha256": item["sha256"], "filename": item["filename"]}
        for item in (_attachments(db, fields["id"]) if attachments is None else attachments)
    ]
    return bindings.fingerprint(content)


def _buyer(db: sqlite3.Connection, draft: sqlite3.Row) -> tuple[dict[str, str], int | None]:
    """The buyer as issuing freezes it: the customer's details as they are now, under the
    name the draft gives; and the revision of that customer (None: the draft names no
    customer, and has a name alone)."""
    if draft["customer_id"] is None:
        return {"name": draft["customer"]}, None
    found = customers.owned(db, draft["owner_id"], draft["customer_id"])
    # The customer's language is frozen with the buyer: the issued document never changes.
    return {**{name: found[name] for name in BUYER}, "name": draft["customer"],
            "language": customers.language_of(found)}, found["revision"]


def buyer_of_draft(db: sqlite3.Connection, actor_id: str, invoice_id: str
                   ) -> tuple[dict[str, str], int | None]:
    """The buyer that issuing the draft now would keep, for the review step, and the
    revision of the customer it comes from."""
    return _buyer(db, owned(db, actor_id, invoice_id))


def _refuse_unless_reviewed(customer_revision: int | None, found: int | None) -> None:
    """The buyer issued is the buyer reviewed: a customer edited since is refused."""
    if customer_revision is not None and found is not None and found != customer_revision:
        raise Refusal("customer_changed", gettext(
            "The customer's details changed since you opened this page; reload it to see them,"
            " then issue."))


def _refuse_dates_out_of_order(draft: sqlite3.Row, issued_on: dt.date) -> None:
    """An invoice is due on or after the day it is issued: due before, it would be overdue
    the moment it exists. It may bill what was supplied at any time before, or what is to be
    supplied up to a year after (an invoice in advance); a supply date later than that is
    taken for a typing slip (2062 for 2026), since the invoice never changes once issued.
    A credit note has no due date to pay by and keeps the supply date of what it corrects,
    so neither is asked of it. A draft may hold any of these dates until it is issued."""
    if draft["kind"] != "invoice":
        return
    if draft["due_date"] < issued_on.isoformat():
        raise Refusal("due_before_issue", gettext(
            "This invoice would be issued today, %(today)s, but it is due %(due)s, before that."
            " Change the due date to %(today)s or later, then issue.") % {
                "today": issued_on, "due": draft["due_date"]})
    latest = issued_on + SUPPLY_AHEAD
    if draft["supply_date"] and draft["supply_date"] > latest.isoformat():
        raise Refusal("supply_too_far_ahead", gettext(
            "The date of supply, %(supply)s, is more than a year after today, %(today)s, when"
            " this invoice would be issued. Check it for a typo: it may be %(latest)s at the"
            " latest.") % {"supply": draft["supply_date"], "today": issued_on,
                           "latest": latest})


def _refuse_excess_credit(db: sqlite3.Connection, note: sqlite3.Row) -> None:
    """The credit notes of one invoice never exceed its total."""
    original = db.execute("SELECT number, total, currency FROM invoices WHERE id = ?",
                          (note["credits"],)).fetchone()
    so_far = balances.credited_so_far(db, note["credits"])
    if so_far + Decimal(note["total"]) > Decimal(original["total"]):
        left = money.text(Decimal(original["total"]) - so_far, original["currency"])
        raise Refusal("credit_exceeds_invoice", gettext(
            "Credit notes for %(number)s may come to at most %(currency)s %(total)s;"
            " %(currency)s %(left)s is left to credit. Lower the amounts of this credit note.")
            % {"number": original["number"], "currency": original["currency"],
               "total": original["total"], "left": left})


def next_number(db: sqlite3.Connection, actor_id: str, kind: str, year: int) -> int:
    """The next number of a series, from its counter row in the caller's transaction: a
    rollback takes the number back with everything else, so the series has no gaps."""
    return db.execute(
        "INSERT INTO invoice_series (owner_id, kind, year, last) VALUES (?, ?, ?, 1)"
        " ON CONFLICT (owner_id, kind, year) DO UPDATE SET last = invoice_series.last + 1"
        " RETURNING last",
        (actor_id, kind, year),
    ).fetchone()[0]


def series_of(kind: str, year: int | None = None) -> str:
    """The series a number comes from: kind and year of issue (this year, unless named)."""
    return f"{PREFIXES[kind]}-{year or dt.datetime.now(dt.UTC).year}"


def _issued(db: sqlite3.Connection, invoice_id: str) -> dict[str, Any]:
    row = db.execute("SELECT id, number, status, issued_at FROM invoices WHERE id = ?",
                     (invoice_id,)).fetchone()
    return {"invoice_id": row["id"], "number": row["number"], "status": row["status"],
            "issued_at": timestamp(row["issued_at"])}


def tax_to_confirm(kind: str, seller: dict[str, Any], buyer: dict[str, Any],
                   lines: list[dict[str, Any]], exemption: str) -> list[str]:
    """What issuing asks the person to confirm about the tax (`taxes.to_confirm`); nothing
    for a credit note, which follows the invoice it corrects."""
    return taxes.to_confirm(seller, buyer, lines, exemption) if kind == "invoice" else []


def _refuse_tax_unconfirmed(row: sqlite3.Row, seller: dict[str, Any], buyer: dict[str, Any]
                            ) -> None:
    """An invoice whose tax breaks a rule known to apply is issued only once the person
    confirms it."""
    found = tax_to_confirm(row["kind"], seller, buyer, json.loads(row["line_items"]),
                           row["vat_exemption"])
    if found:
        raise Refusal("tax_needs_confirming", " ".join(found) + " " + i18n.gettext(
            "Change the rates, or confirm the tax as it is to issue it (confirm_tax: true)."))


def issue(db: sqlite3.Connection, actor_id: str, invoice_id: str, request_id: str,
          revision: int, now: float | None = None, customer_revision: int | None = None,
          tax_confirmed: bool | None = None) -> tuple[dict[str, Any], bool]:
    """Issue the reviewed revision of a draft, once per request id, in one transaction:
    binding, ownership, still a draft, the revision (and the customer's, when given),
    complete, the tax confirmed where asked (`tax_confirmed=False` asks), the counter, the
    number, the frozen hash. Returns (receipt, created)."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    receipt: dict[str, Any] = {}

    def make(_: str) -> None:
        row = _refuse_unless_draft(db, actor_id, invoice_id, revision)
        buyer, found_revision = _buyer(db, row)
        _refuse_unless_reviewed(customer_revision, found_revision)
        seller = profiles.seller_snapshot(db, actor_id)
        if tax_confirmed is False:
            _refuse_tax_unconfirmed(row, seller, buyer)
        if row["kind"] == "credit_note":
            _refuse_excess_credit(db, row)
        issued_on = dt.datetime.fromtimestamp(now, dt.UTC).date()
        _refuse_dates_out_of_order(row, issued_on)
        sequence = next_number(db, actor_id, row["kind"], issued_on.year)
        fields = {**dict(row), "number": f"{series_of(row['kind'], issued_on.year)}-"
                                         f"{sequence:04d}",
                  "seller": json.dumps(seller, sort_keys=True),
                  "buyer": json.dumps(buyer, sort_keys=True),
                  "issue_date": issued_on.isoformat(), "issued_at": now}
        changed = db.execute(
            "UPDATE invoices SET status = 'issued', number = ?, series_year = ?, sequence = ?,"
            " seller = ?, buyer = ?, issue_date = ?, issued_at = ?, frozen_sha256 = ?,"
            " updated_at = ? WHERE id = ? AND owner_id = ? AND status = 'draft'"
            " AND revision = ?",
            (fields["number"], issued_on.year, sequence, fields["seller"], fields["buyer"],
             fields["issue_date"], now, frozen_sha256(db, fields), now, invoice_id, actor_id,
             revision),
        ).rowcount
        assert changed == 1, "checked above inside this same transaction"
        # What is left to pay: the new invoice's whole total, or the credited invoice's less.
        if row["kind"] == "credit_note":
            balances.settle(db, row["credits"], now)
        else:
            balances.open_balance(db, row, now)
        logs.state_change("invoice", invoice_id, actor_id, "draft", "issued", "issued",
                          number=fields["number"])
        receipt.update(invoice_id=invoice_id, number=fields["number"], status="issued",
                       issued_at=timestamp(now))

    # The binding is written first; a refusal in `make` rolls it back with everything else.
    reviewed: dict[str, Any] = {"invoice_id": invoice_id, "revision": revision}
    if customer_revision is not None:  # left out, the fingerprint reads as it always did
        reviewed["customer_revision"] = customer_revision
    if tax_confirmed is not None:  # likewise: one id, one body, whatever it said of the tax
        reviewed["confirm_tax"] = tax_confirmed
    _, created = bindings.once(db, actor_id, "issue", request_id,
                               bindings.fingerprint(reviewed), make, now, target_id=invoice_id)
    if not created:
        return _issued(db, invoice_id), False
    after_commit(counters.issues_total.inc)
    return receipt, True


def sealed_legacy(db: sqlite3.Connection, row: dict[str, Any]) -> dict[str, Any]:
    """An invoice numbered before part two, completed as issued: explicit tax rates of 0,
    no tax, and its content sealed with its frozen hash."""
    lines = [{"description": item.get("description", ""), "quantity": str(item.get("quantity")),
              "unit_price": str(item.get("unit_price")), "tax_rate": str(item.get("tax_rate", 0))}
             for item in json.loads(row["line_items"])]
    fields = {"kind": "invoice", "credits": None, "seller": None, **row,
              "line_items": json.dumps(lines), "net": row["total"],
              "tax": money.text(Decimal(0), row["currency"]), "status": "issued"}
    # Made before attachments existed: it has none (and the table may not exist yet).
    return {**fields, "frozen_sha256": frozen_sha256(db, fields, attachments=[])}


def seal_legacy(db: sqlite3.Connection) -> None:
    """Invoices that exist before part two keep their numbers and count as issued. Where an
    old number reads as one of a studio series (`INV-2026-0007`, `cn-2026-3 `), that series
    continues after it, so no number is ever given twice."""
    for row in db.execute("SELECT * FROM invoices WHERE frozen_sha256 IS NULL"
                          " AND status = 'issued'").fetchall():
        fields = sealed_legacy(db, dict(row))
        db.execute(
            "UPDATE invoices SET line_items = :line_items, tax = :tax,"
            " frozen_sha256 = :frozen_sha256, created_at = :issued_at WHERE id = :id",
            fields,
        )
    continue_legacy_series(db)


# --- what handlers call ----------------------------------------------------------------------


async def list_invoices(db: Database, actor: Actor, limit: int = paging.DEFAULT_LIMIT,
                        after: list[Any] | None = None) -> paging.Page[dict[str, Any]]:
    """A page of the actor's invoices: drafts newest first, then issued newest first."""
    return await db.read(listed, actor.id, limit, after)


async def get_invoice(db: Database, actor: Actor, invoice_id: str) -> dict[str, Any]:
    """One invoice, if it is the actor's; anyone else's is as absent as a made-up id."""
    found = await db.read(_one, actor.id, invoice_id)
    if found is None:
        raise Refusal("invoice_not_found")
    return found


def _logo(db: sqlite3.Connection, actor_id: str, seller: dict[str, Any] | None
          ) -> bytes | None:
    """The bytes of the logo the seller had when the invoice was issued, if any."""
    sha256 = (seller or {}).get("logo_sha256")
    found = profiles.logo(db, actor_id, sha256) if sha256 else None
    return found[1] if found else None


def document_of(db: sqlite3.Connection, actor_id: str, invoice_id: str, logo: bool = False
              ) -> dict[str, Any] | None:
    """The invoice as its document shows it, the frozen hash its kept PDF is filed by, and
    when asked the seller's logo (the document's bytes travel to the renderer whole)."""
    found = _with_corrections(db, actor_id, invoice_id)
    if found is not None:
        found["frozen_sha256"] = db.execute("SELECT frozen_sha256 FROM invoices WHERE id = ?",
                                            (invoice_id,)).fetchone()[0]
        found["logo"] = _logo(db, actor_id, found["seller"]) if logo else None
    return found


async def get_document(db: Database, actor: Actor, invoice_id: str, logo: bool = False
                       ) -> dict[str, Any]:
    found = await db.read(document_of, actor.id, invoice_id, logo)
    if found is None:
        raise Refusal("invoice_not_found")
    return found


async def get_invoices(db: Database, actor: Actor, invoice_ids: list[str]) -> list[dict[str, Any]]:
    return await db.read(_some, actor.id, invoice_ids)
