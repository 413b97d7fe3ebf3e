"""One console session on the sandbox, in this process: the lines a user types go through bot/console.py's
`handle_line` exactly as at the prompt, against the sandbox's simulators (real Google clients on 127.0.0.1)
and Redis at `redis_url` (the tests' real one). Used by the console tests and the model-based test of whole
console runs (bench/console_model.py).

Ctrl-C is what the console does with it: the running line's task is cancelled (bot/console.py `interact`)."""

from __future__ import annotations

import asyncio
import io
import os
import re
import uuid
from collections.abc import Callable
from typing import Any

from bot.console import ConsoleResponder, handle_line, interrupted_note
from bot.deps import Deps
from bot.sandbox.attach import attach_console, build_sandbox_deps
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.settings import load_settings
from bot.wiring import reconcile_writes, resume_canary_watches
from handlers.registry import load_all
from skills.deploy.flow import BACKGROUND, settle_background

SERVICE = "vllm-gemma4"


class ConsoleSession:
    def __init__(
        self,
        redis_url: str,
        speed: float = 3000.0,
        key_prefix: str = "",
        sandbox: Sandbox | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.redis_url = redis_url
        self.overrides = settings or {}  # more settings (e.g. CANARY_LEASE_MS), over the session's own
        self.speed = speed
        self.key_prefix = key_prefix or f"gemma-sre-session-{uuid.uuid4().hex[:10]}"
        self.sandbox: Sandbox | None = sandbox  # given: shared with other sessions (started, closed by its owner)
        self._own_sandbox = sandbox is None
        self.deps: Deps | None = None
        self.out = io.StringIO()
        self.responder = ConsoleResponder(self.out, self._answer)
        self.modal_answer = SERVICE  # what the console user types into a dialog (the destroy's service name)

    def _answer(self, prompt: str) -> str:
        return self.modal_answer

    async def start(self) -> ConsoleSession:
        # google-cloud-logging asks the GCE metadata server where it runs while it parses entries (Logger
        # __init__ -> detect_resource): point that at a closed port on 127.0.0.1, or each log read waits out a
        # DNS lookup of metadata.google.internal (~5 s here; and no network beyond 127.0.0.1 in tests).
        for name, value in (("GCE_METADATA_HOST", "127.0.0.1:9"), ("GCE_METADATA_IP", "127.0.0.1:9")):
            os.environ.setdefault(name, value)
        os.environ.setdefault("NO_GCE_CHECK", "true")
        load_all()
        if self.sandbox is None:
            sandbox = Sandbox(clock=SandboxClock(self.speed), image=load_settings().vllm_image)
            self.sandbox = await asyncio.to_thread(sandbox.start)
        settings = load_settings(
            key_prefix=self.key_prefix,
            redis_url=self.redis_url,
            deploy_poll_s=0.05,
            alert_group_window_s=0,
            # The console is no Slack channel: no pacing of posts and edits to wait out between steps.
            slack_post_per_s=1000.0,
            slack_post_burst=1000,
            slack_update_per_min=100000.0,
            alert_header_debounce_s=0.0,
            alert_coalesce_interval_s=0.0,
            alert_storm_edit_interval_s=0.0,
            **self.overrides,
        )
        self.deps = build_sandbox_deps(self.sandbox.configure(settings, console=True), self.sandbox, None)
        await attach_console(self.deps, self.responder)
        await reconcile_writes(self.deps)
        await resume_canary_watches(self.deps, lambda channel: self.responder)  # canaries a stopped session watched
        return self

    async def close(self, keep_sandbox: bool = False, keep_state: bool = False) -> None:
        """`keep_state`: leave this session's Redis keys (a process that stops; the next one starts on them)."""
        await settle_background(60)
        if self.sandbox is not None:  # first what was wired to it for this session (the alert queue)
            for close in reversed(self.sandbox.closers):
                await close()
            self.sandbox.closers.clear()
        if self.deps is not None:
            from bot.wiring import close_deps

            keys = [k async for k in self.deps.redis.scan_iter(match=f"{self.key_prefix}:*", count=1000)]
            if keys and not keep_state:
                await self.deps.redis.delete(*keys)
            await close_deps(self.deps)
        if self.sandbox is not None and self._own_sandbox and not keep_sandbox:
            await self.sandbox.aclose()

    @property
    def text(self) -> str:
        return self.out.getvalue()

    async def line(self, text: str) -> str:
        """Type one line; returns what the console printed for it (background work included)."""
        assert self.deps is not None
        mark = len(self.text)
        await handle_line(self.deps, self.responder, text)
        return self.text[mark:]

    async def interrupt(self, text: str, when: Callable[[str], bool], timeout_s: float = 60.0) -> str:
        """Type a line and press Ctrl-C once what it printed satisfies `when` (or it ended first)."""
        assert self.deps is not None
        mark = len(self.text)
        before = set(BACKGROUND)
        task = asyncio.get_running_loop().create_task(handle_line(self.deps, self.responder, text))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not (task.done() or when(self.text[mark:])):
            if loop.time() > deadline:
                raise TimeoutError(f"`{text}` printed nothing that `when` accepts in {timeout_s} s")
            await asyncio.sleep(0.005)
        if not task.done():
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            going = [t for t in BACKGROUND if t not in before and not t.done()]
            print("^C " + interrupted_note(len(going)), file=self.out)  # ^C: the terminal's echo of the key
        return self.text[mark:]

    async def settle(self, timeout_s: float = 120.0) -> bool:
        """Let background work end: watches a Ctrl-C left running, and revisions still starting."""
        assert self.sandbox is not None
        ok = await settle_background(timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.sandbox.lifecycle.active and loop.time() < deadline:
            self.sandbox.tick()
            await asyncio.sleep(0.01)
        if self.sandbox.settle is not None:
            await self.sandbox.settle()
        return ok and not self.sandbox.lifecycle.active

    # --- what the stand-in shows ------------------------------------------------------------------------
    def service(self) -> dict[str, Any] | None:
        assert self.sandbox is not None
        return self.sandbox.cloud_run.services.get(SERVICE)

    def revision_state(self, name: str) -> bool | None:
        """True ready, False failed, None starting (or unknown), from the stand-in's Ready condition."""
        assert self.sandbox is not None
        for rev in self.sandbox.cloud_run.revisions.get(SERVICE, []):
            if rev["name"].endswith("/" + name):
                state = next((c["state"] for c in rev.get("conditions", []) if c.get("type") == "Ready"), "")
                return {"CONDITION_SUCCEEDED": True, "CONDITION_FAILED": False}.get(state)
        return None

    def traffic(self) -> dict[str, int]:
        """Revision -> percent of traffic, as the stand-in routes it."""
        svc = self.service() or {}
        out: dict[str, int] = {}
        for t in svc.get("trafficStatuses") or []:
            if t.get("revision"):
                out[t["revision"]] = out.get(t["revision"], 0) + int(t.get("percent") or 0)
        return out

    def buttons(self, since: int = 0) -> list[tuple[int, str]]:
        """(number, label) of the buttons shown, from `since` on."""
        return [(i + 1, b.label) for i, (b, _) in enumerate(self.responder.buttons) if i >= since]


READY_SERVING = re.compile(r"revision `([\w-]+)` is ready and serving (\d+)% of traffic")
READY_IDLE = re.compile(r"revision `([\w-]+)` is ready but serves no traffic")
CONFIRMED = re.compile(r"confirmed by @console · plan `([0-9a-f]+)`")
