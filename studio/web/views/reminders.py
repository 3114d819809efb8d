"""The reminder settings: the steps an account's automatic payment reminders follow, in its
own words."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from studio.errors import Refusal
from studio.mail import reminders
from studio.web.negotiation import answer, current_actor, moved_to, read_body, studio_of

# Blank steps the form offers beyond those kept, for the person to fill in.
BLANK_STEPS = 2
# What the form starts with before any step is kept: the person's to change or clear.
FIRST_STEPS = [
    {"days": 7, "subject": "Reminder: invoice {number} is overdue",
     "message": "Hello,\n\ninvoice {number}, due on {due_date}, still has {currency}"
                " {amount_due} to pay. If you have already paid it, please ignore this email."
                "\n\nView the invoice: {link}"},
    {"days": 21, "subject": "Second reminder: invoice {number}",
     "message": "Hello,\n\ninvoice {number} is now {days_overdue} days overdue; {currency}"
                " {amount_due} is still open. Please pay it soon, or tell us if something is"
                " wrong with it.\n\nView the invoice: {link}"},
]


async def reminder_settings(request: Request) -> Response:
    """`GET /settings/reminders`: `{enabled, steps: [{days, subject, message}]}`."""
    actor = await current_actor(request)
    found = await studio_of(request).db.read(reminders.settings_of, actor.id)
    kept = found["steps"] or ([] if found["revision"] else FIRST_STEPS)
    shown = kept + [{"days": "", "subject": "", "message": ""}] * BLANK_STEPS
    context = {"reminders": found, "steps": shown[:reminders.MAX_STEPS],
               "placeholders": reminders.PLACEHOLDERS,
               "can_send": bool(studio_of(request).settings.smtp_url)}
    return answer(request, {"enabled": found["enabled"], "steps": found["steps"]},
                  template="reminders.html", context=context)


async def save_reminder_settings(request: Request) -> Response:
    """`PUT /settings/reminders` (forms: POST): the steps, checked; switched on only with a
    mail server to send them."""
    body = await read_body(request)
    actor = await current_actor(request)
    studio = studio_of(request)
    fields = reminders.parse_settings(body)
    if fields["enabled"] and not studio.settings.smtp_url:
        raise Refusal("sending_not_configured")
    saved = await studio.db.write(reminders.save_settings, actor.id, fields)
    if studio.worker is not None:
        studio.worker.clock_wake.set()
    return moved_to(request, "/settings/reminders",
                    {"enabled": saved["enabled"], "steps": saved["steps"]})
