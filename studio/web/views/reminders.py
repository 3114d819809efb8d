"""The reminder settings: the steps an account's automatic payment reminders follow, in its
own words."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from studio.billing import reminding
from studio.errors import Refusal
from studio.mail import reminders
from studio.web.negotiation import answer, current_actor, moved_to, read_body, studio_of

# Blank steps the form offers beyond those kept, for the person to fill in.
BLANK_STEPS = 2
async def reminder_settings(request: Request) -> Response:
    """`GET /settings/reminders`: `{enabled, steps: [{days, subject, message}]}`."""
    actor = await current_actor(request)
    db = studio_of(request).db
    found = await db.read(reminders.settings_of, actor.id)
    kept = found["steps"] or ([] if found["revision"] else reminding.FIRST_STEPS)
    shown = kept + [{"days": "", "subject": "", "message": ""}] * BLANK_STEPS
    context = {"reminders": found, "steps": shown[:reminders.MAX_STEPS],
               "placeholders": reminders.PLACEHOLDERS,
               "can_send": bool(studio_of(request).settings.smtp_url),
               "example": await db.read(reminding.example_invoice, actor.id)}
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
