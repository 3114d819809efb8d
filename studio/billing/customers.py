"""A person's customers: the buyers their invoices name.

    create --(the one request binding, kind "customer")--> customer
    customer --(edit: revision + 1)--> customer
    customer --(delete, while no invoice names it)--> gone, with its binding

Units take a connection and run inside `Database.write` or `Database.read`; the async
functions below are what handlers call.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from studio import i18n
from studio.accounts.auth import Actor
from studio.billing import identifiers, money
from studio.errors import N_, FieldChecks, Refusal
from studio.i18n import gettext
from studio.store import bindings, paging
from studio.store.db import Database
from studio.store.dialect import account_lock, anywhere, dialect_of, hold
from studio.store.transactions import clock, timestamp

MAX_NAME = 200
MAX_ADDRESS = 1000
MAX_QUERY = 200
DEFAULT_TERMS_DAYS = 14
MAX_TERMS_DAYS = 365
PICKER_MATCHES = 8
FIELDS = ("name", "email", "address", "country", "vat_id", "currency", "payment_terms_days")


# --- input -----------------------------------------------------------------------------------


def _terms_days(value: object) -> int:
    if value is None or value == "":
        return DEFAULT_TERMS_DAYS
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() \
            and len(value.strip()) <= 3:
        value = int(value.strip())  # a form field is text
    if type(value) is not int or not 0 <= value <= MAX_TERMS_DAYS:
        raise Refusal("invalid_body", gettext(
            "The payment terms must be a whole number of days from 0 to %(most)s.") % {
                "most": MAX_TERMS_DAYS})
    return value


def _currency(value: object, before: str | None) -> str:
    """Optional; a currency no longer in use may stay on a customer that already has it."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    if value == before:
        return before
    return money.currency_code(value)


def _language(value: object) -> str | None:
    """Optional: a language the studio writes documents in; none chosen (null) follows the
    country."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    code = value.strip().lower() if isinstance(value, str) else None
    if code not in i18n.LANGUAGES:
        choices = ", ".join(f"{code} ({i18n.NAMES[code]})" for code in i18n.LANGUAGES)
        raise Refusal("invalid_body", gettext(
            "The language must be one of %(choices)s, or left empty to follow the customer's"
            " country.") % {"choices": choices})
    return code


def language_of(customer: Any) -> str:
    """The language the customer is written to: the one chosen, else its country's."""
    return customer["language"] or i18n.of_country(customer["country"])


def parse_customer(body: dict[str, Any], before: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """A customer's fields, checked and normalised; on an edit, what the body leaves out is
    kept."""
    before = before or {}

    def given(name: str) -> Any:
        return body[name] if name in body else before.get(name)

    checks = FieldChecks()  # every field refused at once, each by its name
    country = checks.check("country", identifiers.country, given("country"))
    found = {
        "name": checks.check("name", lambda: identifiers.text(given("name"), N_("name"), MAX_NAME,
                                                              least=1)),
        "email": checks.check("email", identifiers.email, given("email")),
        "address": checks.check("address", identifiers.text, given("address"), N_("address"),
                                MAX_ADDRESS),
        "country": country,
        "vat_id": checks.check("vat_id", identifiers.vat_id, given("vat_id"), country or ""),
        "currency": checks.check("currency", _currency, given("currency"),
                                 before.get("currency")),
        "payment_terms_days": checks.check("payment_terms_days", _terms_days,
                                           given("payment_terms_days")),
        "reminders": checks.check("reminders", _reminders, body, before),
        "language": checks.check("language", _language, given("language")),
    }
    checks.done()
    return found


def _reminders(body: dict[str, Any], before: dict[str, Any]) -> bool:
    """Whether the account's automatic reminders go to this customer (yes unless said): JSON
    says `reminders`; a form's checkbox is absent when unticked, so the form says it showed
    one (`reminders_shown`)."""
    value = body.get("reminders", False if "reminders_shown" in body else None)
    if value is None:
        return bool(before.get("reminders", True))
    if value in (True, "true", "1", "on"):
        return True
    if value in (False, "false", "0", "off", ""):
        return False
    raise Refusal("invalid_body", gettext("The reminders setting must be true or false."))


def parse_revision(body: dict[str, Any]) -> int:
    return identifiers.revision(body.get("revision"), "customer")


def parse_query(value: object) -> str:
    """`?q=`: the text to look for in names and emails; empty finds every customer. The
    invoice list's search is read by it too."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_QUERY:
        raise Refusal("invalid_body", gettext(
            "Search for at most %(most)s characters of text.") % {"most": MAX_QUERY})
    return identifiers.plain(value, N_("search")).strip()


# --- reading ---------------------------------------------------------------------------------


def as_json(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], **{name: row[name] for name in FIELDS},
            "reminders": bool(row["reminders"]),
            # The language its documents and emails speak; `language_chosen` false: the
            # country's, following it when the country changes.
            "language": language_of(row), "language_chosen": row["language"] is not None,
            "revision": row["revision"], "created_at": timestamp(row["created_at"]),
            "updated_at": timestamp(row["updated_at"])}


def owned(db: sqlite3.Connection, actor_id: str, customer_id: str) -> sqlite3.Row:
    """The actor's own customer; 404 otherwise, as for a made-up id."""
    row = db.execute("SELECT * FROM customers WHERE id = ? AND owner_id = ?",
                     (customer_id, actor_id)).fetchone()
    if row is None:
        raise Refusal("customer_not_found")
    return row


def _one(db: sqlite3.Connection, actor_id: str, customer_id: str) -> dict[str, Any]:
    found = as_json(owned(db, actor_id, customer_id))
    found["invoices"] = db.execute(
        "SELECT COUNT(*) FROM invoices WHERE customer_id = ? AND status != 'deleted'",
        (customer_id,)).fetchone()[0]
    return found


def holding(db: Any, *columns: str) -> str:
    """SQL true where one of `columns` holds `:text` (a pattern made by
    `studio.store.dialect.anywhere`) in any case. Letters of every script are lowered on both
    databases alike: by Python's str.lower on SQLite (a function of the connection's), by ICU's
    on PostgreSQL, whatever locale the database was made with. Lowered, not folded: ß stays ß,
    so `strasse` does not find `Straße`, though `STRAẞE` does."""
    dialect = dialect_of(db)
    lowered = [db.lowered(column) if dialect.name == "postgresql"
               else f"{dialect.lower}({column})" for column in columns]
    return "(" + " OR ".join(f"{column} LIKE :text ESCAPE '\\'" for column in lowered) + ")"


AFTER = " AND (name, id) > (:name, :key)"


def _listed(db: sqlite3.Connection, actor_id: str, limit: int, after: list[Any] | None,
            query: str = "") -> paging.Page[dict[str, Any]]:
    """One page of the actor's customers by name, after the cursor's customer; with a query,
    those whose name or email holds it, in any case."""
    name, key = paging.key_of(after, str, str) if after else ("", "")
    matching = " AND " + holding(db, "name", "email") if query else ""
    sql = ("SELECT * FROM customers WHERE owner_id = :owner" + matching
           + (AFTER if after else "") + " ORDER BY name, id LIMIT :limit")
    found = db.execute(sql, {"owner": actor_id, "text": anywhere(query), "name": name,
                             "key": key, "limit": limit + 1}).fetchall()
    following = None
    if len(found) > limit:
        last = found[limit - 1]
        following = paging.cursor([last["name"], last["id"]])
    return paging.Page([as_json(row) for row in found[:limit]], following)


# --- writing ---------------------------------------------------------------------------------


def _refuse_sellers_own_vat_id(db: sqlite3.Connection, actor_id: str, vat_id: str) -> None:
    """A customer's VAT ID is the customer's: the seller's own, typed in by mistake, would put
    the seller on both sides of the invoice."""
    if not vat_id:
        return
    row = db.execute("SELECT vat_id FROM profiles WHERE actor_id = ?", (actor_id,)).fetchone()
    sellers = "".join((row["vat_id"] if row is not None else "").split()).upper()
    if sellers and sellers == "".join(vat_id.split()).upper():
        raise Refusal("invalid_vat_id", gettext(
            "%(vat_id)s is your own VAT ID (in Settings); enter the customer's VAT ID, or leave"
            " it empty.") % {"vat_id": vat_id})


def create(db: sqlite3.Connection, actor_id: str, fields: dict[str, Any],
           request_id: str | None, now: float | None = None) -> tuple[dict[str, Any], bool]:
    """A new customer, once per request id: a lost reply makes one customer, not two."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    _refuse_sellers_own_vat_id(db, actor_id, fields["vat_id"])

    def make(customer_id: str) -> None:
        db.execute(
            "INSERT INTO customers (id, owner_id, name, email, address, country, vat_id,"
            " currency, payment_terms_days, reminders, language, created_at, updated_at)"
            " VALUES (:id, :owner_id, :name, :email, :address, :country, :vat_id, :currency,"
            " :payment_terms_days, :reminders, :language, :now, :now)",
            {**fields, "reminders": int(fields["reminders"]), "id": customer_id,
             "owner_id": actor_id, "now": now})

    if request_id is None:
        customer_id, created = str(uuid.uuid4()), True
        make(customer_id)
    else:
        customer_id, created = bindings.once(db, actor_id, "customer", request_id,
                                             bindings.fingerprint(fields), make, now)
    return as_json(owned(db, actor_id, customer_id)), created


def edit(db: sqlite3.Connection, actor_id: str, customer_id: str, revision: int,
         body: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """Edit the revision the person saw; a stale one is refused, so no tab loses work.
    Issued invoices keep the buyer as it was when they were issued. An edit that changes
    nothing writes nothing: the customer keeps its revision, so another tab's edit of it, or
    an issue reviewed with it, still goes through."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    row = owned(db, actor_id, customer_id)
    if row["revision"] != revision:
        raise Refusal("customer_changed")
    fields = parse_customer(body, dict(row))
    if all(row[name] == value for name, value in fields.items()):
        return as_json(row)
    if fields["vat_id"] != row["vat_id"]:
        _refuse_sellers_own_vat_id(db, actor_id, fields["vat_id"])
    db.execute(
        "UPDATE customers SET name = :name, email = :email, address = :address,"
        " country = :country, vat_id = :vat_id, currency = :currency,"
        " payment_terms_days = :payment_terms_days, reminders = :reminders,"
        " language = :language, revision = revision + 1, updated_at = :now"
        " WHERE id = :id AND owner_id = :owner_id AND revision = :revision",
        {**fields, "reminders": int(fields["reminders"]), "id": customer_id,
         "owner_id": actor_id, "revision": revision, "now": now})
    return as_json(owned(db, actor_id, customer_id))


def delete(db: sqlite3.Connection, actor_id: str, customer_id: str) -> None:
    """A customer goes only while no invoice (draft or issued) names it. The id of the request
    that made it stays bound, as a deleted draft's does: that request sent again (a lost
    reply, Back and Save) answers that the customer is gone, and makes no second one."""
    hold(db, account_lock(actor_id))
    owned(db, actor_id, customer_id)
    named = db.execute("SELECT number FROM invoices WHERE customer_id = ?"
                       " AND status != 'deleted' ORDER BY number IS NULL, number LIMIT 1",
                       (customer_id,)).fetchone()
    if named is not None:
        raise Refusal("customer_in_use", gettext(
            "Invoice %(number)s names this customer, so it cannot be deleted; it stays in your"
            " list.") % {"number": named["number"]} if named["number"] else gettext(
            "A draft names this customer, so it cannot be deleted: delete the draft, or choose"
            " another customer on it, first."))
    if db.execute("SELECT 1 FROM recurring WHERE customer_id = ? LIMIT 1",
                  (customer_id,)).fetchone() is not None:
        raise Refusal("customer_in_use", gettext(
            "A recurring invoice names this customer, so it cannot be deleted; it stays in your"
            " list."))
    # A deleted draft's row stays for the requests that named it; it no longer names anyone.
    db.execute("UPDATE invoices SET customer_id = NULL WHERE customer_id = ?"
               " AND status = 'deleted'", (customer_id,))
    db.execute("DELETE FROM customers WHERE id = ? AND owner_id = ?", (customer_id, actor_id))


# --- what handlers call ----------------------------------------------------------------------


async def list_customers(db: Database, actor: Actor, limit: int = paging.DEFAULT_LIMIT,
                         after: list[Any] | None = None, query: str = ""
                         ) -> paging.Page[dict[str, Any]]:
    return await db.read(_listed, actor.id, limit, after, query)


async def get_customer(db: Database, actor: Actor, customer_id: str) -> dict[str, Any]:
    """One customer with how many invoices name it; anyone else's is as absent."""
    return await db.read(_one, actor.id, customer_id)


async def create_customer(db: Database, actor: Actor, fields: dict[str, Any],
                          request_id: str | None) -> tuple[dict[str, Any], bool]:
    return await db.write(create, actor.id, fields, request_id)


async def edit_customer(db: Database, actor: Actor, customer_id: str, revision: int,
                        body: dict[str, Any]) -> dict[str, Any]:
    return await db.write(edit, actor.id, customer_id, revision, body)


async def delete_customer(db: Database, actor: Actor, customer_id: str) -> None:
    await db.write(delete, actor.id, customer_id)
