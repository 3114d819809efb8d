"""The outbox: an email to send is a row (`sends`) written in the transaction of its request,
and delivered after it by a worker that claims it, talks to the mail server outside any
transaction, and records how it went only while its claim still holds.

One request is one email: the send is bound to its request id (`bindings.once`), its
Message-ID is derived from its id, and a try whose outcome was never recorded (the process
died) is tried again under the same Message-ID.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import unicodedata
import uuid
from decimal import Decimal
from typing import Any

from studio import addresses, i18n
from studio.billing import balances, documents, identifiers, shares
from studio.billing.invoices import owned
from studio.errors import N_, FieldChecks, Refusal
from studio.mail import smtp
from studio.store import bindings, presence
from studio.store.dialect import account_lock, dialect_of, hold, hold_free
from studio.store.transactions import after_commit, clock, timestamp

log = logging.getLogger("studio.outbox")

KINDS = {"send": "invoice", "reminder": "reminder"}  # binding kind -> the send's kind
MAX_SUBJECT = 200
MAX_MESSAGE = 10_000
MAX_CC = 10
BACKOFF_FIRST_S = 1.0
DAY = 86400.0
# A mail server that still answers "later" this long after the email was queued is not going
# to take it: the send is failed with its last reply, and nothing tries it for ever.
GIVE_UP_AFTER_DAYS = 3
GIVE_UP_AFTER_S = GIVE_UP_AFTER_DAYS * DAY
CLAIMED_BY = ":send:"  # a claim is `<worker><CLAIMED_BY><random>`


# --- what a person asks ----------------------------------------------------------------------


def _one_line(value: object, refusal: str, most: int) -> str | None:
    """A header's text: one line, no control character (a line break of any kind would
    start a header of its own, or keep the email from being built at all)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > most \
            or any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value):
        raise Refusal(refusal)
    return value.strip() or None


def _address(value: object) -> str | None:
    """A recipient typed, by the rule every kept address meets (`addresses.address_fault`)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Refusal("invalid_recipient")
    if not value.strip():
        return None
    try:
        return addresses.address(value)
    except addresses.NotAnAddress as fault:
        raise Refusal("invalid_recipient", _not_an_address(value.strip(), fault)) from None


def _not_an_address(address: str, fault: object) -> str:
    return i18n.gettext("The address “%(address)s” %(fault)s.") % {"address": address[:100],
                                                                     "fault": fault}


def _copies(value: object) -> list[str]:
    """Cc: a list, or addresses separated by commas as a form field holds them."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        if "\r" in value or "\n" in value:
            raise Refusal("invalid_recipient")
        value = [part for part in value.replace(";", ",").split(",") if part.strip()]
    if not isinstance(value, list) or len(value) > MAX_CC:
        raise Refusal("invalid_recipient", i18n.gettext(
            "Copy the email to at most %(most)s addresses, separated by commas.")
            % {"most": MAX_CC})
    return [address for item in value if (address := _address(item))]


def parse_send(body: dict[str, Any]) -> dict[str, Any]:
    """`{to?, cc?, subject?, message?}` checked; what is left out is filled in from the
    invoice when the send is written."""
    checks = FieldChecks()  # every field refused at once, each by its name
    found = {"to": checks.check("to", _address, body.get("to")),
             "cc": checks.check("cc", _copies, body.get("cc")),
             "subject": checks.check("subject", _one_line, body.get("subject"),
                                     "invalid_subject", MAX_SUBJECT),
             "message": checks.check("message", _message, body.get("message"))}
    checks.done()
    return found


def _message(message: object) -> str | None:
    if message is None or message == "":
        return None
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        raise Refusal("invalid_message")
    return identifiers.plain(message, N_("message")).strip() or None


# --- the words -------------------------------------------------------------------------------


def _invoice_facts(db: sqlite3.Connection, invoice: sqlite3.Row) -> dict[str, Any]:
    seller = json.loads(invoice["seller"]) if invoice["seller"] else {}
    buyer = json.loads(invoice["buyer"]) if invoice["buyer"] else {}
    # What is due as the invoice page says it, credit notes and payments included.
    standing = balances.standing_of(db, invoice)
    customer_email = ""
    if invoice["customer_id"]:
        row = db.execute("SELECT email FROM customers WHERE id = ?",
                         (invoice["customer_id"],)).fetchone()
        customer_email = row["email"] if row else ""
    return {"number": invoice["number"], "kind": invoice["kind"],
            "currency": invoice["currency"], "total": invoice["total"],
            "due_date": invoice["due_date"], "customer": invoice["customer"],
            "seller": seller.get("name") or "",
            "seller_email": seller.get("email") or "",
            "email": customer_email or buyer.get("email") or "",
            "amount_due": standing["amount_due"],
            "payment_status": standing["payment_status"],
            "language": documents.stored_language(invoice)}


def default_words(facts: dict[str, Any], kind: str) -> tuple[str, str]:
    """The subject and message a send starts with, in the customer's language with its
    amounts and dates; the person may change both."""
    with i18n.use(facts.get("language")):
        return _words(facts, kind)


def _words(facts: dict[str, Any], kind: str) -> tuple[str, str]:
    _, seller = i18n.gettext, facts["seller"]
    regards = _("Kind regards,")
    sign = f"\n\n{regards}\n{seller}" if seller else f"\n\n{regards.rstrip(',')}"
    words = {"number": facts["number"], "due_date": i18n.date(facts["due_date"]),
             "seller": seller, "total": i18n.money(facts["total"], facts["currency"]),
             "amount_due": i18n.money(facts["amount_due"] or facts["total"],
                                      facts["currency"])}
    hello = _("Hello,")
    if kind == "reminder":
        return (_("Reminder: invoice {number} is still open").format(**words),
                f"{hello}\n\n" + _(
                    "this is a friendly reminder that invoice {number}, due on {due_date},"
                    " still has {amount_due} to pay. If you have already paid it, please"
                    " ignore this email. The invoice is attached again for your records."
                ).format(**words) + sign)
    if facts["kind"] == "credit_note":
        subject = _("Credit note {number} from {seller}") if seller else _("Credit note {number}")
        body = _("please find attached credit note {number} for {total}.")
    else:
        subject = _("Invoice {number} from {seller}") if seller else _("Invoice {number}")
        if facts["payment_status"] == "paid":
            body = _("please find attached invoice {number} for your records: it is paid in"
                     " full, thank you.")
        elif facts["payment_status"] == "partially_paid" or (
                facts["amount_due"] not in (None, facts["total"])):  # credited or part paid
            body = _("please find attached invoice {number}, with {amount_due} left to pay,"
                     " due on {due_date}.")
        else:
            body = _("please find attached invoice {number} for {total}, due on {due_date}.")
    return subject.format(**words), f"{hello}\n\n{body.format(**words)}{sign}"


def online_line(language: str, link: str) -> str:
    """The line every email ends with: where the invoice is seen online."""
    with i18n.use(language):
        return i18n.gettext("View the invoice online: {link}").format(link=link)


def _refuse_unless_sendable(invoice: sqlite3.Row, facts: dict[str, Any], kind: str) -> None:
    if invoice["status"] != "issued":
        raise Refusal("invoice_not_issued")
    if kind == "reminder" and facts["payment_status"] in (None, "paid"):
        raise Refusal("nothing_due")


# --- queueing --------------------------------------------------------------------------------


def queue(db: sqlite3.Connection, actor_id: str, invoice_id: str, binding: str,
          request_id: str, asked: dict[str, Any], mail_from: str, base_url: str,
          now: float | None = None, share_days: float = shares.DEFAULT_DAYS,
          step: int | None = None) -> tuple[dict[str, Any], bool]:
    """Write the send with its request binding, in one transaction: (the send, created).
    The same request again answers the send it made, whatever happened since. A reminder
    step's send names its step (`step`, its days), which one invoice has at most once, and
    its message says where the share link goes (`{link}`)."""
    hold(db, account_lock(actor_id))
    now = clock(now)
    kind = KINDS[binding]
    invoice = owned(db, actor_id, invoice_id)

    def make(send_id: str) -> None:
        facts = _invoice_facts(db, invoice)
        _refuse_unless_sendable(invoice, facts, kind)
        recipient = asked["to"] or facts["email"]
        if not recipient:
            raise Refusal("recipient_missing")
        # An address kept before the rule was the one it is now is checked again here.
        fault = addresses.address_fault(recipient)
        if fault is not None:
            raise Refusal("invalid_recipient", _not_an_address(recipient, fault))
        subject, message = default_words(facts, kind)
        subject = asked["subject"] or subject
        fault = addresses.header_text_fault(subject)
        if fault is not None:
            raise Refusal("invalid_subject", i18n.gettext("The subject %(fault)s.")
                          % {"fault": fault})
        message = asked["message"] or message
        link_id, token = shares.mint(db, actor_id, invoice_id, now, share_days)
        link = shares.link_url(base_url, token)
        if step is not None and "{link}" in message:
            message = message.replace("{link}", link)
        else:
            message += f"\n\n{online_line(facts['language'], link)}"
        db.execute(
            "INSERT INTO sends (id, owner_id, invoice_id, kind, recipient, cc, subject, message,"
            " document_sha256, message_id, share_link_id, status, next_attempt_at, created_at,"
            " step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
            (send_id, actor_id, invoice_id, kind, recipient, ", ".join(asked["cc"]),
             subject, message, invoice["frozen_sha256"],
             addresses.message_id(send_id, mail_from), link_id, now, now, step))
        after_commit(lambda: log.info("send %s of invoice %s queued for %s", send_id,
                                      invoice_id, recipient))

    send_id, created = bindings.once(db, actor_id, binding, request_id,
                                     bindings.fingerprint({"invoice_id": invoice_id, **asked}),
                                     make, now)
    return _send(db, send_id), created


def _send(db: sqlite3.Connection, send_id: str) -> dict[str, Any]:
    row = db.execute("SELECT * FROM sends WHERE id = ?", (send_id,)).fetchone()
    return as_json(row)


def as_json(row: Any) -> dict[str, Any]:
    return {"send_id": row["id"], "invoice_id": row["invoice_id"], "kind": row["kind"],
            "status": row["status"], "to": row["recipient"],
            "cc": [a for a in row["cc"].split(", ") if a], "subject": row["subject"],
            "message_id": row["message_id"], "attempts": row["attempts"],
            "reply": row["reply"], "created_at": timestamp(row["created_at"]),
            "sent_at": timestamp(row["sent_at"]),
            # The automatic reminder step that queued it (its days from the due date), if any.
            "step": row["step"]}


# --- reading ---------------------------------------------------------------------------------


def sends_of(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> list[dict[str, Any]]:
    """Every send of the actor's invoice, newest first."""
    owned(db, actor_id, invoice_id)
    return [as_json(row) for row in db.execute(
        "SELECT * FROM sends WHERE invoice_id = ? AND owner_id = ?"
        " ORDER BY created_at DESC, id DESC", (invoice_id, actor_id))]


def sending_of(db: sqlite3.Connection, actor_id: str, invoice_id: str) -> dict[str, Any]:
    """What the invoice page shows of sending: its sends, and the forms' first words."""
    invoice = owned(db, actor_id, invoice_id)
    sends = sends_of(db, actor_id, invoice_id)
    if invoice["status"] != "issued":
        return {"sends": sends, "issued": False}
    facts = _invoice_facts(db, invoice)
    send_subject, send_message = default_words(facts, "invoice")
    remind_subject, remind_message = default_words(facts, "reminder")
    # A reminder the person kept from the suggestions fills the form; sending stays theirs.
    kept = json.loads(invoice["reminder"]) if invoice["reminder"] else None
    return {"sends": sends, "issued": True, "to": facts["email"],
            "send_words": {"subject": send_subject, "message": send_message},
            "remind_words": kept or {"subject": remind_subject, "message": remind_message},
            "kept_reminder": kept is not None,
            "can_remind": facts["payment_status"] not in (None, "paid")}


# --- delivery --------------------------------------------------------------------------------


def reminder_not_due(db: sqlite3.Connection, send: dict[str, Any]) -> str | None:
    """Why a queued reminder must not go out any more, in plain words: since it was queued,
    its invoice was paid or credited in full. None while something is left to pay, and for
    every other send."""
    if send["kind"] != "reminder":
        return None
    invoice = db.execute("SELECT * FROM invoices WHERE id = ? AND owner_id = ?",
                         (send["invoice_id"], send["owner_id"])).fetchone()
    if invoice is None:
        return None
    standing = balances.worked_out(db, invoice)
    if standing["payment_status"] != "paid":
        return None
    paid = Decimal(standing["amount_paid"]) > 0
    credited = Decimal(standing["amount_credited"]) > 0
    how = ("paid and credited in full" if paid and credited
           else "credited in full by a credit note" if credited else "paid in full")
    return (f"Not sent: invoice {invoice['number']} was {how} after this reminder was"
            " queued, so nothing is left to pay and the customer was not reminded.")


def any_due(db: sqlite3.Connection, now: float | None = None) -> bool:
    """Whether a send waits for a try now (a cheap look before claiming)."""
    now = clock(now)
    return db.execute(
        "SELECT 1 FROM sends WHERE status = 'queued' AND next_attempt_at <= ?"
        " AND (claim IS NULL OR claim_expires_at <= ?) LIMIT 1", (now, now)).fetchone() is not None


def claim(db: sqlite3.Connection, claim_token: str, claim_seconds: float,
          now: float | None = None) -> dict[str, Any] | None:
    """Take a send whose try is due, or one whose claim timed out and that the mail server
    cannot have: its worker was never let end the message (`still_held`), or that worker is
    gone (`presence.gone`). Only the claim's holder may record how the try went or end the
    message, so a worker that lives keeps a send it may have handed over however long it takes
    to record (a paused host's too: its connections, and so its presence, last while it is
    paused), and one request is one email unless a worker died before it could record.

    A worker that stops before handing the message over (a paused host) keeps its sends only
    until their claims time out: then another takes them, and the first, back, finds at
    `still_held` that they are no longer its own and drops its connection before the end.

    Accounts take turns, as tasks' actors do (`worker.claim_task`): the account whose email
    was claimed longest ago goes next, with its send waiting longest, so one account's
    hundreds of reminders do not hold back another's one invoice. Right on row locks alone:
    the send is locked (others pass over it) and its state checked again as it is taken.

    Every claim counts as a try, so one whose worker died before recording anything counts
    too; a send stranded that way past GIVE_UP_AFTER_DAYS is failed instead (`give_up_stranded`)."""
    now = clock(now)
    give_up_stranded(db, now)
    args = {"claim": claim_token, "expires": now + claim_seconds, "now": now}
    # Timed-out claims first (they waited longest), however busy the queue; a few a time.
    row = None
    for stale in db.execute(
            "SELECT claim, handed_at FROM sends WHERE status = 'queued'"
            " AND next_attempt_at <= :now AND claim IS NOT NULL AND claim_expires_at <= :now"
            f" ORDER BY next_attempt_at LIMIT 20 {dialect_of(db).skip_locked_row}",
            args).fetchall():
        if stale["handed_at"] is None:
            row = _take(db, "claim = :stale AND claim_expires_at <= :now AND handed_at IS NULL",
                        {**args, "stale": stale["claim"]})
        elif presence.gone(db, holder_of(stale["claim"])):
            row = _take(db, "claim = :stale AND claim_expires_at <= :now",
                        {**args, "stale": stale["claim"]})
        if row is not None:
            break
    if row is None:
        row = _take(db, "claim IS NULL", args)
    if row is None:
        return None
    # The account goes to the back. Its turn is written by one claim at a time and never
    # waited for: while another claim of this account writes it (a host paused inside one,
    # say), that one moves the account back, and no claim queues behind its row.
    if hold_free(db, f"send-turn:{row['owner_id']}"):
        db.execute(
            "INSERT INTO send_turns (actor_id, turn)"
            " VALUES (?, (SELECT COALESCE(MAX(turn), 0) + 1 FROM send_turns))"
            " ON CONFLICT (actor_id) DO UPDATE SET turn = excluded.turn", (row["owner_id"],))
    return dict(row)


def _take(db: sqlite3.Connection, which: str, args: dict[str, Any]) -> Any:
    """The claim of the first queued send due now that `which` names, accounts in turn."""
    return db.execute(
        f"""
        UPDATE sends SET claim = :claim, claim_expires_at = :expires, attempts = attempts + 1,
                         handed_at = NULL
         WHERE id = (SELECT id FROM sends
                      WHERE status = 'queued' AND next_attempt_at <= :now AND {which}
                      ORDER BY COALESCE((SELECT turn FROM send_turns
                                          WHERE send_turns.actor_id = sends.owner_id), 0),
                               next_attempt_at
                      LIMIT 1 {dialect_of(db).skip_locked_row})
           AND status = 'queued' AND {which}
        RETURNING id, owner_id, invoice_id, kind, recipient, cc, subject, message,
                  message_id, attempts, created_at
        """, args).fetchone()


def stranded_reply(attempts: int, last_reply: str) -> str:
    """Why a send whose every try ended with its worker gone is given up, in plain words."""
    times = "once" if attempts == 1 else f"{attempts} times"
    last = f" The last reply before that: {last_reply[:500]}" if last_reply else ""
    return (f"No answer was recorded from the mail server; tried {times} over"
            f" {GIVE_UP_AFTER_DAYS} days, each time stopping before the outcome could be"
            f" written, so no more tries follow.{last}")


def give_up_stranded(db: sqlite3.Connection, now: float) -> int:
    """Fail the sends queued more than GIVE_UP_AFTER_DAYS ago whose last claim timed out (their
    worker died mid-try, as it did on every try so far) instead of trying them for ever.

    A conditional write: only a send still queued under that timed-out claim. The claim is
    kept on the failed send, so if its worker was only cut off and does hear the server take
    the email, `record` still writes it as sent: the row never says failed for an email that
    left, and no second email follows either way."""
    stranded = db.execute(
        "SELECT id, claim, attempts, reply FROM sends"
        " WHERE status = 'queued' AND next_attempt_at <= :now AND claim IS NOT NULL"
        " AND claim_expires_at <= :now AND created_at <= :since"
        f" LIMIT 20 {dialect_of(db).skip_locked_row}",
        {"now": now, "since": now - GIVE_UP_AFTER_S}).fetchall()
    given_up = 0
    for send in stranded:
        reply = stranded_reply(send["attempts"], send["reply"])
        if db.execute(
                "UPDATE sends SET status = 'failed', reply = ?, claim_expires_at = NULL"
                " WHERE id = ? AND claim = ? AND status = 'queued' AND claim_expires_at <= ?",
                (reply, send["id"], send["claim"], now)).rowcount == 1:
            given_up += 1
            after_commit(lambda send_id=send["id"], reply=reply: log.warning(
                "send %s: failed (%s)", send_id, reply))
    return given_up


def backoff(attempts: int, cap: float) -> float:
    """Seconds before the next try after `attempts` tries: 1, 2, 4, ... at most `cap`."""
    return min(cap, BACKOFF_FIRST_S * 2 ** max(0, min(attempts - 1, 30)))


def record(db: sqlite3.Connection, send_id: str, claim_token: str, outcome: smtp.Outcome,
           retry_cap: float, now: float | None = None) -> bool:
    """How a try went, written only while this claim still holds the queued send; False when
    it no longer does (it timed out and another worker took the send over)."""
    now = clock(now)
    reply, status = outcome.reply[:1000], outcome.status
    held = "WHERE id = :id AND claim = :claim AND status = 'queued'"
    args = {"id": send_id, "claim": claim_token, "reply": reply, "now": now}
    if outcome.status == "sent":
        # Also over a give-up of this very claim (`give_up_stranded`): the email did leave.
        sql = ("UPDATE sends SET status = 'sent', sent_at = :now, reply = :reply, claim = NULL,"
               " claim_expires_at = NULL WHERE id = :id AND claim = :claim"
               " AND status IN ('queued', 'failed')")
    elif outcome.status == "failed":
        sql = ("UPDATE sends SET status = 'failed', reply = :reply, claim = NULL,"
               f" claim_expires_at = NULL {held}")
    else:
        send = db.execute("SELECT attempts, created_at FROM sends WHERE id = ?",
                          (send_id,)).fetchone()
        if send is not None and now - send["created_at"] >= GIVE_UP_AFTER_S:
            # Put off for days: failed, its last reply kept with why no try follows.
            status = "failed"
            args["reply"] = (f"{reply[:900]} (still not taken {GIVE_UP_AFTER_DAYS} days after"
                             " it was queued, so no more tries)")
            sql = ("UPDATE sends SET status = 'failed', reply = :reply, claim = NULL,"
                   f" claim_expires_at = NULL {held}")
        else:
            sql = ("UPDATE sends SET next_attempt_at = :now + :wait, reply = :reply,"
                   f" claim = NULL, claim_expires_at = NULL {held}")
            args["wait"] = backoff(send["attempts"] if send else 1, retry_cap)
    if db.execute(sql, args).rowcount == 1:
        after_commit(lambda: log.info("send %s: %s (%s)", send_id, status, args["reply"]))
        return True
    return False


def keep_claims(db: sqlite3.Connection, claims: list[str], claim_seconds: float) -> None:
    """A worker mid-conversation keeps its claims from timing out (never shortening one that
    `still_held` made to last through the end of DATA)."""
    now = clock(None)
    db.executemany("UPDATE sends SET claim_expires_at = CASE WHEN claim_expires_at > :until"
                   " THEN claim_expires_at ELSE :until END"
                   " WHERE claim = :claim AND status = 'queued'",
                   [{"until": now + claim_seconds, "claim": token} for token in claims])


def still_held(db: sqlite3.Connection, send_id: str, claim_token: str, seconds: float) -> bool:
    """Just before the message is ended (the "." after DATA), whether this claim still holds
    the send; if so it is made to last `seconds` (the wait for the server's reply, and more)
    and marked handed over, so nobody takes the send over while its worker lives (`claim`):
    the server may be taking the message."""
    now = clock(None)
    return db.execute(
        "UPDATE sends SET claim_expires_at = ?, handed_at = ?"
        " WHERE id = ? AND claim = ? AND status = 'queued'",
        (now + seconds, now, send_id, claim_token)).rowcount == 1


def new_claim(worker_name: str) -> str:
    return f"{worker_name}{CLAIMED_BY}{uuid.uuid4().hex}"


def holder_of(claim_token: str) -> str:
    """The worker a claim belongs to (`new_claim`)."""
    return claim_token.rsplit(CLAIMED_BY, 1)[0]
