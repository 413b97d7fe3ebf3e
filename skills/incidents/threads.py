"""Alert threads in Slack: the queue worker's job, and the incident's one investigation.

A queue worker calls `IncidentThreads.handle(entry_id, alert)` for each queued alert. The job only records:
the alert is folded into its incident in Redis (skills/incidents/store.py, an optimistic transaction, no lock)
and the incident is marked for the publisher (skills/incidents/publisher.py), which makes every Slack call
within Slack's rate limits, with an intent recorded before each post, through the IncidentChat port
(skills/ports.py; the surface renders). An incident's first alert also runs its investigation (the injected
`Investigator`: findings, then the agent's plan) once per incident; its messages are stored and posted under
the thread once it exists. An incident is one failing condition on one service, so an alert of another
condition gets an incident (thread, investigation, buttons) of its own: why a thread rather than a section of
the service's thread is said in skills/incidents/model.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable

from skills.clock import REAL_CLOCK, Clock
from skills.incidents.chat import DeadNotice, IncidentChat, Rendered
from skills.incidents.effects import STORE_DOWN
from skills.incidents.model import Alert, Change, Incident, utcnow
from skills.incidents.publisher import IncidentPublisher
from skills.incidents.settings import IncidentSettings
from skills.incidents.store import IncidentStore
from skills.logs.redact import redact
from skills.ports import Store

log = logging.getLogger(__name__)

# (incident, alert) -> messages for the thread as each becomes ready (findings first, then the plan), rendered
# by the surface that wired it (handlers/incident_investigation.py renders what skills/incidents/investigation.py
# yields).
Investigator = Callable[[Incident, Alert], AsyncIterator[Rendered]]


class IncidentThreads:
    def __init__(
        self,
        store: Store,
        settings: IncidentSettings,
        chat: IncidentChat,
        investigate: Investigator | None = None,
        clock: Clock = REAL_CLOCK,
        store_down: tuple[type[BaseException], ...] = STORE_DOWN,
        known: Iterable[str] = (),
    ) -> None:
        self.s = settings
        self.chat = chat
        self.investigate = investigate
        # The services it diagnoses: the default target's, and those the settings put on other targets (`known`:
        # an ACA or TPU service), so their alerts are investigated through their own target's logs.
        self.known = frozenset({self.s.vllm_service_name, *known})
        self.store = IncidentStore(store, self.s.key_prefix, clock)
        self.publisher = IncidentPublisher(store, settings, chat, clock, on_dead=self.on_dead, store_down=store_down)

    async def load(self, inc_id: str | bytes) -> Incident | None:
        return await self.store.load(str(inc_id))

    # --- the job ---------------------------------------------------------------------------------------
    async def handle(self, entry_id: str, alert: Alert) -> None:
        inc, change = await self.store.record(
            entry_id,
            alert,
            utcnow(),
            channel=self.s.slack_alerts_channel,
            known=self.known,
            window_s=self.s.alert_group_window_s,
        )
        self.publisher.wake()
        if (
            change is Change.OPENED
            and inc.known_service
            and not inc.test
            and self.investigate is not None
            and await self.store.claim_investigation(inc.id, entry_id)
        ):
            await self._investigate(inc, alert)

    async def _investigate(self, inc: Incident, alert: Alert) -> None:
        """Findings, then the plan, each stored once (a retried job keeps what was stored) for the publisher. What
        the investigation cannot do it says in its own messages; anything it raises retries the job."""
        assert self.investigate is not None
        i = 0
        async for message in self.investigate(inc, alert):
            await self.store.add_reply(inc, i, message.model_dump_json())
            self.publisher.wake()
            i += 1

    async def on_dead(self, entry_id: str, alert: Alert | None, error: str, attempts: int) -> None:
        """A job that failed `attempts` times: say so in the alerts channel (its thread, if it has one and its record
        can be read: a job often dies of the very record the lookup reads)."""
        what = f"*{alert.name}* on `{alert.service or 'unknown'}`" if alert else f"queue entry {entry_id}"
        stream = self.publisher.outbox.dead_letter_stream
        notice = DeadNotice(what=what, error=redact(error)[:400], attempts=attempts, stream=stream, entry=entry_id)
        try:
            inc_id = await self.store.find_id(alert) if alert else ""
            pub = await self.store.pub(inc_id) if inc_id else {}
        except Exception as exc:  # noqa: BLE001 - the notice matters more than its thread: the alerts channel then
            log.warning("dead-lettered entry %s: its thread could not be looked up (%s)", entry_id, type(exc).__name__)
            pub = {}
        await self.chat.post_dead(pub.get("channel") or self.s.slack_alerts_channel, pub.get("ts") or None, notice)
