"""Slack's Web API rate limits, as the Slack stand-in enforces them.

What Slack documents (https://docs.slack.dev/apis/web-api/rate-limits, also https://api.slack.com/docs/rate-limits):
- limits apply "per API method per app per workspace";
- chat.postMessage is in the Special tier: "generally allows posting one message per second per channel, while
  also maintaining a workspace-wide limit"; "Posting messages: 1 per second. Short bursts >1 allowed";
- chat.update is Tier 3: "50+ per minute ... Sporadic bursts are welcome";
- over a limit, Slack answers "HTTP 429 Too Many Requests ... and a Retry-After header containing the number
  of seconds until you can retry" (quoted in slackapi/python-slack-sdk docs-src, "Rate Limits"), with the
  body {"ok": false, "error": "ratelimited"} (the `ratelimited` error of every Web API method).

Not published, so chosen here (and settable): the burst sizes and the workspace-wide chat.postMessage limit.
Slack allows "1 per second, short bursts" per channel: a bucket of BURST tokens refilled at 1/s. The defaults
below are estimates, kept on the strict side so a bot that passes against the stand-in is not relying on a
generous burst.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from skills.clock import REAL_CLOCK, Clock


@dataclass
class RateLimits:
    """Token-bucket parameters (rate per second, burst size). `None` for a method: not limited."""

    post_per_channel_rate: float = 1.0  # documented: 1 message per second per channel
    post_per_channel_burst: int = 4  # estimate: "short bursts >1 allowed"
    post_workspace_rate: float = 5.0  # estimate: "a workspace-wide limit" (value not published)
    post_workspace_burst: int = 20  # estimate
    update_rate: float = 50 / 60  # documented: Tier 3, 50+ per minute
    update_burst: int = 10  # estimate: "sporadic bursts are welcome"
    enabled: bool = True


@dataclass
class _Bucket:
    rate: float
    burst: float
    tokens: float
    at: float

    def take(self, now: float) -> float:
        """Take one token; 0.0 if granted, else the seconds until one is available."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


@dataclass
class Limiter:
    limits: RateLimits = field(default_factory=RateLimits)
    clock: Clock = REAL_CLOCK
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    limited: int = 0  # 429s answered

    def _bucket(self, key: str, rate: float, burst: int, now: float) -> _Bucket:
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = _Bucket(rate, float(burst), float(burst), now)
        return b

    def check(self, method: str, channel: str) -> int | None:
        """None when the call may go ahead, else the Retry-After in whole seconds (at least 1)."""
        lim = self.limits
        if not lim.enabled:
            return None
        with self._lock:
            now = self.clock.now()
            if method == "chat.postMessage":
                chan = self._bucket(f"post:{channel}", lim.post_per_channel_rate, lim.post_per_channel_burst, now)
                space = self._bucket("post:*", lim.post_workspace_rate, lim.post_workspace_burst, now)
                # Peek both before taking either, so a refused call does not spend the other's token.
                wait = max(_peek(chan, now), _peek(space, now))
                if wait == 0.0:
                    chan.take(now)
                    space.take(now)
                    return None
            elif method == "chat.update":
                wait = self._bucket("update", lim.update_rate, lim.update_burst, now).take(now)
                if wait == 0.0:
                    return None
            else:
                return None
            self.limited += 1
            return max(1, math.ceil(wait))


def _peek(b: _Bucket, now: float) -> float:
    tokens = min(b.burst, b.tokens + (now - b.at) * b.rate)
    return 0.0 if tokens >= 1.0 else (1.0 - tokens) / b.rate
