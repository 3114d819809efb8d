"""The studio's own clock: every worker looks for due periods of recurring invoices and makes
them, one period a transaction (`recurring.make_period`), and for reminder steps due, and
queues them, with the database's clock. Any number of workers on any number of hosts may
look at once: what another worker is making is passed over, and the period binding (the one
send per invoice and step) makes each once whatever happens."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from studio import i18n
from studio.billing import recurring
from studio.config import Settings
from studio.errors import Refusal
from studio.mail import outbox, reminders
from studio.store.db import Database
from studio.store.dialect import hold_free
from studio.store.transactions import DatabaseUnavailable, after_commit

log = logging.getLogger("studio.schedules")

LOOK_EVERY_S = 0.5
# Beside the pages, a catch-up rests this many times as long as each period took.
PAGES_FIRST = 3.0
# Schedules a look considers at once, the longest waiting first.
DUE_AT_ONCE = 20


def _emailer(settings: Settings) -> recurring.Deliver:
    """How a `send` schedule's invoice is queued: through the outbox, bound to its period,
    so one invoice is one email however often its period is looked at."""

    def deliver(db: Any, owner_id: str, invoice_id: str, schedule: Any, period_start: str
                ) -> None:
        if not settings.smtp_url:
            raise Refusal("sending_not_configured", i18n.gettext(
                "this studio has no mail server set up (STUDIO_SMTP_URL), so nothing was"
                " emailed."))
        asked = {"to": schedule["email_to"] or None, "cc": [], "subject": None,
                 "message": None}
        outbox.queue(db, owner_id, invoice_id, "send",
                     f"recurring:{schedule['id']}:{period_start}", asked, settings.mail_from,
                     settings.public_url or "/", share_days=settings.share_link_days)

    return deliver


def make_next(db: sqlite3.Connection, settings: Settings, queued: Callable[[], None]
              ) -> bool:
    """Make one due period of a schedule no other worker is making now, if any: True when a
    schedule was looked at (a period made, or found made), False when none was free."""
    for recurring_id in recurring.due(db, DUE_AT_ONCE):
        # A schedule another worker holds is passed over, never waited for.
        if not hold_free(db, f"recurring:{recurring_id}"):
            continue
        made = recurring.make_period(db, recurring_id, _emailer(settings))
        if made is not None:
            after_commit(lambda made=made, recurring_id=recurring_id: log.info(
                "recurring %s made %s for %s to %s%s", recurring_id,
                made["number"] or "a draft", made["period_start"], made["period_end"],
                f" ({made['problem']})" if made["problem"] else ""))
            after_commit(queued)
        return True
    return False


def remind_next(db: sqlite3.Connection, settings: Settings, queued: Callable[[], None]
                ) -> bool:
    """Queue the due reminder steps of an account no other worker is looking at now: True
    when an account was looked at."""
    for actor_id in reminders.accounts_due(db):
        if not hold_free(db, f"reminders:{actor_id}"):
            continue
        if reminders.queue_due(db, actor_id, settings.mail_from, settings.public_url or "/",
                               settings.share_link_days):
            after_commit(queued)
        return True
    return False


async def keep_the_clock(db: Database, settings: Settings, wake: asyncio.Event,
                         queued: Callable[[], None], beside_pages: bool = False) -> None:
    """Make every due period, queue every due reminder (with a mail server to send them),
    then look again about every half second (or when woken). Beside the pages (in `studio
    serve`), a catch-up rests between periods as long as `PAGES_FIRST` times the period took:
    the pages' polls are answered as when idle, and a `studio worker` catches up at full
    speed."""
    while True:
        try:
            while await db.read(recurring.any_due):
                started = time.perf_counter()
                if not await db.write(make_next, settings, queued):
                    break
                if beside_pages:
                    await asyncio.sleep((time.perf_counter() - started) * PAGES_FIRST)
            while settings.smtp_url and await db.read(reminders.accounts_due) \
                    and await db.write(remind_next, settings, queued):
                pass
        except DatabaseUnavailable as error:
            log.warning("the database is unavailable; looking for due periods shortly: %s",
                        error)
        except sqlite3.IntegrityError as error:
            log.info("what this worker was making was made elsewhere meanwhile (%s); looking"
                     " again shortly", error)
        except Exception:
            log.exception("making a due period failed; trying again shortly")
        try:
            async with asyncio.timeout(LOOK_EVERY_S):
                await wake.wait()
        except TimeoutError:
            pass
        wake.clear()
