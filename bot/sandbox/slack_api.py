"""A Slack Web API stand-in: answers like Slack on /api/<method>, records every call, and records posts to
response URLs (/response/<id>). Faults can be injected per method (429 with Retry-After, 500, ok=false).

It enforces Slack's rate limits (bot/sandbox/slack_limits.py: chat.postMessage per channel and workspace-wide,
chat.update Tier 3), answering HTTP 429 with Retry-After and {"ok": false, "error": "ratelimited"} as Slack
does, on an injectable clock; and Block Kit's message limits (at most 50 blocks, 3,000 characters in a
section's text: https://api.slack.com/reference/block-kit/blocks#section) with Slack's `invalid_blocks`.

slack-sdk talks to it for real (AsyncWebClient(base_url=.../api/)); Bolt's `respond` posts to the
response_url the test puts in the slash-command payload.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.basic_objects import JsonObject
from slack_sdk.models.blocks import Block
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot.sandbox.slack_limits import Limiter, RateLimits
from skills.clock import REAL_CLOCK, Clock

MAX_BLOCKS = 50  # Block Kit: up to 50 blocks per message
MAX_SECTION_TEXT = 3000  # a section block's text: at most 3,000 characters
# The Web API methods this stand-in serves (apps.connections.open is the Socket Mode stand-in's route); any
# other name gets Slack's `unknown_method` (e.g. the retired channels.history: slack-rs/slack-rs-api#110).
KNOWN_METHODS = frozenset(
    {
        "auth.test",
        "chat.postMessage",
        "chat.postEphemeral",
        "chat.update",
        "usergroups.users.list",
        "views.open",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
        "conversations.info",
    }
)


@dataclass
class Call:
    method: str
    payload: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


@dataclass
class Fault:
    status: int = 500
    retry_after: int | None = None
    error: str | None = None  # with status 200: {"ok": false, "error": error}


class SlackStandIn:
    def __init__(self, limits: RateLimits | None = None, clock: Clock = REAL_CLOCK) -> None:
        self.clock = clock
        self.limiter = Limiter(limits or RateLimits(), clock)
        # Messages Slack accepted (chat.postMessage / chat.update answered ok), with ts and the clock's time.
        self.accepted: list[dict[str, Any]] = []
        self.calls: list[Call] = []
        self.responses: list[dict[str, Any]] = []  # bodies posted to response URLs
        self.uploads: dict[str, bytes] = {}
        self.pending_files: dict[str, dict[str, Any]] = {}  # issued upload URLs not completed yet
        self.shared: list[dict[str, Any]] = []  # completed uploads: what was shared where
        self.usergroups: dict[str, list[str]] = {}
        self.faults: dict[str, list[Fault]] = {}
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        self.base_url = ""  # set by the fixture once served
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._api, methods=["POST", "GET"]),
                Route("/response/{rid}", self._response, methods=["POST"]),
                Route("/upload/{fid}", self._upload, methods=["POST"]),
            ]
        )

    # --- test helpers -------------------------------------------------------------------------------
    def inject(self, method: str, *faults: Fault) -> None:
        with self._lock:
            self.faults.setdefault(method, []).extend(faults)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [c.payload for c in list(self.calls) if c.method == method]

    def response_url(self, rid: str = "r1") -> str:
        return f"{self.base_url}/response/{rid}"

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return bool(predicate())

    # --- wire -----------------------------------------------------------------------------------------
    async def _payload(self, request: Request) -> dict[str, Any]:
        body = await request.body()
        ctype = request.headers.get("content-type", "")
        data: dict[str, Any] = dict(request.query_params)
        if "json" in ctype and body:
            data.update(json.loads(body))
        elif body:
            data.update(dict(parse_qsl(body.decode())))
        for key in ("blocks", "attachments", "files", "view"):
            if isinstance(data.get(key), str):
                try:
                    data[key] = json.loads(data[key])
                except ValueError:
                    pass
        return data

    def channel_id(self, channel: str) -> str:
        """Like Slack: a post to '#name' lands in a channel whose id (C...) the answer carries."""
        if not channel.startswith("#"):
            return channel
        return "C" + format(abs(hash(channel)) % 10**8, "08d")

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        payload = await self._payload(request)
        if not request.headers.get("authorization", "").startswith("Bearer ") and "token" not in payload:
            return JSONResponse({"ok": False, "error": "not_authed"})
        with self._lock:
            queue = self.faults.get(method) or []
            fault = queue.pop(0) if queue else None
        self.calls.append(Call(method, payload, self.clock.now()))
        if fault is not None:
            if fault.error:
                return JSONResponse({"ok": False, "error": fault.error}, status_code=fault.status)
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            err = "ratelimited" if fault.status == 429 else "internal_error"
            return JSONResponse({"ok": False, "error": err}, status_code=fault.status, headers=headers)
        retry_after = self.limiter.check(method, self.channel_id(str(payload.get("channel", ""))))
        if retry_after is not None:
            return JSONResponse(
                {"ok": False, "error": "ratelimited"}, status_code=429, headers={"Retry-After": str(retry_after)}
            )
        if method not in KNOWN_METHODS:
            return JSONResponse({"ok": False, "error": "unknown_method"})  # as Slack answers a misspelled method
        if method in ("chat.postMessage", "chat.postEphemeral", "chat.update") and not _blocks_ok(
            payload.get("blocks")
        ):
            return JSONResponse({"ok": False, "error": "invalid_blocks"})
        answer = self._answer(method, payload)
        if method in ("chat.postMessage", "chat.update") and answer.get("ok"):
            with self._lock:
                self.accepted.append({**payload, "_method": method, "ts": answer["ts"], "_at": self.clock.now()})
        return JSONResponse(answer)

    def _answer(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://acme.slack.com/",
                "team": "Acme",
                "user": "gemma-sre",
                "team_id": "T0001",
                "user_id": "UBOT",
                "bot_id": "BBOT",
            }
        if method in ("chat.postMessage", "chat.postEphemeral"):
            ts = self._next_ts()
            return {
                "ok": True,
                "channel": self.channel_id(str(p.get("channel", ""))),
                "ts": ts,
                "message_ts": ts,
                "message": {"text": p.get("text", ""), "ts": ts, "thread_ts": p.get("thread_ts")},
            }
        if method == "chat.update":
            if str(p.get("channel", "")).startswith("#"):
                return {"ok": False, "error": "channel_not_found"}  # chat.update takes ids, not names
            return {
                "ok": True,
                "channel": p.get("channel", ""),
                "ts": p.get("ts", ""),
                "text": p.get("text", ""),
            }
        if method == "usergroups.users.list":
            return {"ok": True, "users": self.usergroups.get(str(p.get("usergroup", "")), [])}
        if method == "views.open":
            return {"ok": True, "view": {"id": "V0001", **(p.get("view") or {})}}
        if method == "files.getUploadURLExternal":
            return self._upload_url(p)
        if method == "files.completeUploadExternal":
            return self._complete_upload(p)
        if method == "conversations.info":
            return {"ok": True, "channel": {"id": p.get("channel"), "name": "general"}}
        return {"ok": True}

    async def _response(self, request: Request) -> Response:
        body = await request.body()
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            return PlainTextResponse("invalid_payload", status_code=400)
        data["_rid"] = request.path_params["rid"]
        self.responses.append(data)
        return PlainTextResponse("ok")

    # --- files upload v2, as Slack documents it -------------------------------------------------------------
    # https://docs.slack.dev/reference/methods/files.getUploadURLExternal/ : `filename` and `length` (bytes) are
    # required ("missing_argument ... typically only occurs when the length provided is 0");
    # https://docs.slack.dev/reference/methods/files.completeUploadExternal/ : `files` (required) is an array of
    # {"id", "title"?}; "This method can only be called once"; `thread_ts` is another message's ts, with one
    # channel (`channel_id`). What the docs leave unnamed is answered with Slack's generic `invalid_arguments`.
    def _upload_url(self, p: dict[str, Any]) -> dict[str, Any]:
        unknown = set(p) - {"token", "filename", "length", "alt_txt", "snippet_type"}
        if unknown:
            return {"ok": False, "error": "invalid_arguments"}
        try:
            length = int(str(p.get("length", "0")))
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        if not p.get("filename") or length <= 0:
            return {"ok": False, "error": "missing_argument"}
        fid = f"F{next(self._ts):06d}"
        self.pending_files[fid] = {"filename": str(p["filename"]), "length": length}
        return {"ok": True, "upload_url": f"{self.base_url}/upload/{fid}", "file_id": fid}

    def _complete_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        files = p.get("files")
        unknown = set(p) - {"token", "files", "channel_id", "channels", "thread_ts", "initial_comment", "blocks"}
        if unknown or not isinstance(files, list) or not files:
            return {"ok": False, "error": "invalid_arguments"}
        if p.get("thread_ts") and not p.get("channel_id"):
            return {"ok": False, "error": "invalid_arguments"}  # a thread reply needs its one channel
        out = []
        for f in files:
            fid = f.get("id") if isinstance(f, dict) else None
            if fid not in self.pending_files or fid not in self.uploads:  # never issued, never uploaded, or completed
                return {"ok": False, "error": "invalid_arguments"}
        for f in files:
            meta = self.pending_files.pop(f["id"])
            self.shared.append({**meta, "id": f["id"], "title": f.get("title", ""), "content": self.uploads[f["id"]],
                                "channel": p.get("channel_id", ""), "thread_ts": p.get("thread_ts", "")})  # fmt: skip
            out.append({"id": f["id"], "title": f.get("title", "")})
        return {"ok": True, "files": out}

    async def _upload(self, request: Request) -> Response:
        fid = request.path_params["fid"]
        if fid not in self.pending_files:
            return PlainTextResponse("unknown upload", status_code=404)
        self.uploads[fid] = await request.body()
        return PlainTextResponse("OK - " + str(len(self.uploads[fid])))


def _blocks_ok(blocks: Any) -> bool:
    """Block Kit's rules as slack-sdk's own models know them (types, required fields, lengths), plus the
    per-message caps; what they refuse Slack answers with `invalid_blocks`."""
    if blocks is None:
        return True
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        return False
    for b in blocks:
        t = b.get("text") if isinstance(b, dict) else None
        text = t.get("text", "") if isinstance(t, dict) else (t or "")
        if isinstance(b, dict) and b.get("type") == "section" and len(str(text)) > MAX_SECTION_TEXT:
            return False
    try:
        parsed = Block.parse_all(blocks)
        for block in parsed:
            if block is None or type(block) is Block:  # a type slack-sdk does not know
                return False
            validate_deep(block)
    except (SlackObjectFormationError, AttributeError, KeyError, TypeError, ValueError):
        return False
    return True


def validate_deep(obj: JsonObject) -> None:
    """validate_json on an object and every object inside it (a block's own check skips its elements')."""
    obj.validate_json()
    for name in obj.attributes:
        value = getattr(obj, name, None)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, JsonObject):
                validate_deep(item)
