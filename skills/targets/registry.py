"""Which serving target serves what: the one place that knows (bot/wiring.py fills it from the settings).

A profile names its target (`target:` in skills/data/profiles.yaml, Cloud Run when unstated); a service is on
the target it was wired to, else the default. Everything else asks this registry and talks to the port.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skills.deploy.profiles import DEFAULT_TARGET, load_profiles
from skills.errors import InvalidInput
from skills.targets.port import ServingTarget


@dataclass(frozen=True)
class Targets:
    by_kind: Mapping[str, ServingTarget]
    default_kind: str = DEFAULT_TARGET
    services: Mapping[str, str] = field(default_factory=dict)  # service name -> target kind, when not the default

    def __post_init__(self) -> None:
        unknown = sorted({self.default_kind, *self.services.values()} - set(self.by_kind))
        if unknown:
            raise ValueError(f"serving targets named but not wired: {', '.join(unknown)}")

    @property
    def default(self) -> ServingTarget:
        return self.by_kind[self.default_kind]

    def for_kind(self, kind: str) -> ServingTarget:
        target = self.by_kind.get(kind)
        if target is None:
            raise InvalidInput(
                f"No serving target `{kind}` is set up in this bot.",
                "Targets: " + ", ".join(f"`{k}`" for k in sorted(self.by_kind)) + ".",
            )
        return target

    def for_service(self, service: str) -> ServingTarget:
        return self.for_kind(self.services.get(service, self.default_kind))

    def for_write(self, kind: str, params: dict[str, Any], default_service: str) -> ServingTarget:
        """The target a write plan is for: the service's, when it is wired to one; else a deploy's profile names
        it. (A profile for another target than the service's is then refused: skills/deploy/plan_builder.py.)"""
        service = params.get("service") if isinstance(params, dict) else None
        service = service if isinstance(service, str) and service else default_service
        if service in self.services:
            return self.for_service(service)
        name = params.get("profile") if kind == "deploy" and isinstance(params, dict) else None
        profile = load_profiles().get(name) if isinstance(name, str) else None
        if profile is not None:  # an unknown profile is the planner's to refuse
            return self.for_kind(profile.target)
        return self.for_service(service)
