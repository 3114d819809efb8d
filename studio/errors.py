"""Refusals: every 4xx the studio gives, with the sentence a person reads."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from studio import i18n

T = TypeVar("T")


def N_(message: str) -> str:
    """A message for the catalogue, translated where it is read (`Refusal.message`)."""
    return message


REFUSALS: dict[str, tuple[int, str]] = {
    "not_signed_in": (401, N_("Sign in to continue.")),
    "invalid_credentials": (401, N_("That email and password do not match an account.")),
    "account_disabled": (
        403, N_("This account is disabled; ask whoever runs this studio about it.")),
    "cross_origin_request": (403, N_("This request came from another site and was refused.")),
    "not_found": (404, N_("There is nothing at this address.")),
    "invoice_not_found": (404, N_("That invoice does not exist or is not yours.")),
    "attachment_not_found": (404, N_("That attachment does not exist or is not yours.")),
    "payment_not_found": (404, N_("That payment does not exist or is not yours.")),
    "lease_not_found": (404, N_("That request does not exist or is not yours.")),
    "customer_not_found": (404, N_("That customer does not exist or is not yours.")),
    "recurring_not_found": (404, N_("That recurring invoice does not exist or is not yours.")),
    "method_not_allowed": (405, N_("This address does not accept that method.")),
    "request_id_conflict": (
        409, N_("This form was already sent with different content. Reload the page to start"
             " again.")),
    "import_conflict": (409, N_("That external id was imported before with other content.")),
    "lease_expired": (
        409, N_("The time ran out: nothing was written. Ask again for new suggestions.")),
    "lease_open": (
        409, N_("The suggestions are still being written; wait for them before using one.")),
    "lease_applied": (
        409, N_("Suggestions from this request were already used and saved on the invoices.")),
    "lease_rejected": (409, N_("This request was stopped; none of its suggestions can be used.")),
    "lease_failed": (
        409, N_("No suggestion could be written for this request, so there is none to use.")),
    "lease_not_cancelable": (409, N_("This request has already ended and cannot be stopped.")),
    "request_timeout": (
        408, N_("What was sent stopped arriving before it was complete; send it again.")),
    "invoice_issued": (409, N_("This invoice is issued; an issued invoice never changes.")),
    "draft_changed": (
        409, N_("This draft changed since you opened it. Reload it and make your change again.")),
    "invoice_not_issued": (409, N_("This invoice is still a draft; it has no document yet.")),
    "tax_needs_confirming": (
        409, N_("This invoice's VAT does not look right for this customer; check the rates, or"
             " confirm the tax as it is to issue it.")),
    "nothing_to_read": (
        422, N_("This draft has no receipt attached to read. Attach a photo or PDF of it first.")),
    "invoice_changed": (
        409, N_("A payment or credit note was recorded since this was written, so it may be"
             " wrong; nothing was saved. Ask again.")),
    "reminder_changed": (
        409, N_("This reminder step's words were changed since the wording was asked for, so"
             " nothing was kept. Ask again for suggestions.")),
    "currency_mismatch": (
        409, N_("The receipt is in another currency than the draft; nothing was added.")),
    "invalid_proposal": (422, N_("The suggestion does not fit what was asked for.")),
    "einvoice_incomplete": (409, N_("This invoice lacks what every e-invoice must carry; its"
                                 " PDF is a complete invoice.")),
    "not_creditable": (409, N_("A credit note cannot itself be credited; credit the invoice.")),
    "sending_not_configured": (
        409, N_("This studio cannot send email yet: whoever runs it sets STUDIO_SMTP_URL (the mail"
             " server) and STUDIO_MAIL_FROM (the address emails come from), then restarts it."
             " Until then, download the PDF and email it yourself.")),
    "nothing_due": (409, N_("Nothing is left to pay on this invoice, so there is nothing to remind"
                         " the customer of.")),
    "credit_note_not_payable": (
        409, N_("A credit note is not paid; record the payment on the invoice it corrects.")),
    "customer_changed": (
        409, N_("This customer changed since you opened it. Reload it and make your change"
                " again.")),
    "recurring_changed": (
        409, N_("This recurring invoice changed since you opened it. Reload it and make your"
             " change again.")),
    "recurring_ended": (
        409, N_("This recurring invoice has ended; it makes no more invoices. Make a new one to"
             " start again.")),
    "customer_in_use": (
        409, N_("An invoice names this customer, so it cannot be deleted; it stays in your list.")),
    "conflict": (
        409, N_("That could not be saved: it clashes with something already stored, and nothing"
             " was changed. Reload the page to see the latest, then try again.")),
    "body_too_large": (
        413, N_("That is more than the studio accepts at once (at most 64 KB in one go); send"
             " less.")),
    "upload_too_large": (413, N_("That file is too large to attach.")),
    "unsupported_media_type": (
        415, N_("Attach a PDF or a photo (PNG, JPEG, WebP or HEIC); that file is none of these.")),
    "client_key_conflict": (
        409, N_("That upload key already belongs to a different file. Choose the file again.")),
    "invalid_body": (422, N_("What was sent could not be read; reload the page and try again.")),
    "invalid_text": (
        422, N_("That text holds an invisible control character, which is not text; remove it and"
             " try again.")),
    "invalid_request_id": (
        422, N_("This form's one-time key must be 1 to 100 characters. Reload the page to start"
             " again.")),
    "invalid_client_key": (422, N_("The client key must be 1 to 100 characters.")),
    "invalid_limit": (422, N_("The limit must be a whole number from 1 to 500.")),
    "invalid_recipient": (
        422, N_("Write each address on one line, like name@example.com; separate copies with"
             " commas.")),
    "recipient_missing": (
        422, N_("This customer has no email address on file; write the address to send to.")),
    "invalid_subject": (422, N_("The subject must be one line of at most 200 characters.")),
    "invalid_message": (422, N_("The message must be text of at most 10,000 characters.")),
    "invalid_date": (
        422, N_("Dates must be written like 2026-12-31, the first not after the last.")),
    "invalid_email": (422, N_("The email must be an address like name@example.com.")),
    "invalid_language": (
        422, N_("The language of these pages must be de, en or fr, or empty to follow the"
             " browser.")),
    "invalid_country": (
        422, N_("The country must be a two-letter ISO 3166 code such as DE, FR or US.")),
    "invalid_vat_id": (422, N_("That VAT ID is not a valid one; check it for a typo.")),
    "invalid_iban": (422, N_("That IBAN is not a valid one; check it for a typo.")),
    "invalid_bic": (422, N_("That BIC is not a valid one; check it for a typo.")),
    "invalid_cursor": (
        422, N_("That page address is not one the studio gave; start again from the first page.")),
    "purpose_not_allowed": (422, N_("That purpose is not one the studio offers.")),
    "unknown_provider": (422, N_("That is not one the studio can ask for suggestions.")),
    "too_many_tasks": (
        422, N_("That asks for too many suggestions at once; choose fewer invoices or"
             " fewer suggestions each.")),
    "invoice_incomplete": (422, N_("This draft is not complete enough to issue.")),
    "due_before_issue": (
        422, N_("An invoice cannot be due before the day it is issued; change its due date, then"
             " issue.")),
    "supply_too_far_ahead": (
        422, N_("The date of supply is more than a year after today; check it for a typo, then"
             " issue.")),
    "credit_exceeds_invoice": (
        422, N_("The credit notes of an invoice cannot come to more than its total.")),
    "payment_exceeds_balance": (
        422, N_("That is more than is left to pay on this invoice; record the amount due or"
                " less.")),
    "invalid_choice": (
        422, N_("A chosen suggestion was not written for that invoice in this request.")),
    "too_many_attempts": (
        429, N_("Too many failed sign-ins. Try again later.")),
    "too_many_open_tasks": (
        429, N_("You have too many suggestions still being written. Wait for some to finish, or"
             " stop a request, then ask again.")),
    "database_busy": (503, N_("The studio is busy; try again in a moment.")),
    "database_unavailable": (
        503, N_("The studio cannot reach its database just now; try again in a moment.")),
    "storage_quota_exceeded": (
        413, N_("Your attachments use all the storage you have; remove some you no longer need,"
             " then attach this file again.")),
    "too_many_attachments": (
        409, N_("This invoice has as many attachments as one may hold; remove one first.")),
    "upload_lost": (
        503, N_("The file was lost before it could be stored, and nothing was attached; send it"
             " again.")),
    "insufficient_storage": (
        507, N_("The studio's storage is full, so nothing was saved. Try again later; if it keeps"
             " happening, tell whoever runs this studio to free some disk space.")),
}


class Refusal(Exception):
    """A request the studio refuses, with its code, HTTP status and message."""

    def __init__(self, code: str, message: str | None = None,
                 headers: dict[str, str] | None = None,
                 fields: dict[str, str] | None = None) -> None:
        self.code = code
        self.status, self.default = REFUSALS[code]
        self.given = message
        self.headers = headers or {}  # e.g. Retry-After, or Connection: close after a stall
        # What is wrong with each field of a form, by its name (`amount`, `unit_price.2` for
        # the second line's): a page shows each message beside its field.
        self.fields = fields or {}
        super().__init__(f"{code}: {message or self.default}")

    @property
    def message(self) -> str:
        """The sentence a person reads, in the language of the answer being made."""
        return self.given or i18n.gettext(self.default)

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"detail": self.code, "message": self.message}
        if self.fields:
            found["fields"] = dict(self.fields)
        return found


class FieldChecks:
    """Checks a form's fields one by one, then refuses every field found wrong at once, each
    message under its field's name; the first one is the refusal's own message."""

    def __init__(self) -> None:
        self.refused: list[tuple[str, Refusal]] = []

    def check(self, field: str, read: Callable[..., T], *args: Any) -> T | None:
        """What `read(*args)` gives, or None when it refuses the field (kept for `done`)."""
        try:
            return read(*args)
        except Refusal as refusal:
            if refusal.status != 422:  # not a field's fault
                raise
            self.refused.append((field, refusal))
            return None

    def done(self) -> None:
        if not self.refused:
            return
        fields: dict[str, str] = {}
        for field, refusal in self.refused:
            fields.update(refusal.fields or {field: refusal.message})
        first = self.refused[0][1]
        raise Refusal(first.code, first.message, first.headers, fields)


# A file the system refuses to let grow: no space, a disk quota, or a file-size limit.
NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def storage_full(error: BaseException) -> bool:
    """Whether the disk or the database had no room for a write: SQLite's own SQLITE_FULL, or
    the system's refusal to grow a file."""
    if isinstance(error, sqlite3.OperationalError):
        return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL \
            or "database or disk is full" in str(error)
    return isinstance(error, OSError) and error.errno in NO_ROOM


# Refused wherever text arrives: PostgreSQL cannot store it, and no person types it.
NUL_TEXT = N_("Text may not hold the NUL character (code 0); remove it and send again.")
