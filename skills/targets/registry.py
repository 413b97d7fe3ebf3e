"""Which serving target serves what: the one place that knows (bot/wiring.py fills it from the settings).

A profile names its target (`target:` in skills/data/profiles.yaml, Cloud Run when unstated). A service is on the
target the settings name for it (TPU_SERVICE_NAME's, and VLLM_SERVICE_NAME on the default); else on the target
that holds a service of that name, which `locate` asks the targets (each through the port's `get_service`) and
remembers in `learned`; else on the default. Service names are unique across targets: a deploy plan refuses a name
another target holds, or one the settings give another target (skills/deploy/plan_builder.py), so at most one
target answers for a name. Everything else asks this registry and talks to the port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from skills.errors import InvalidInput, NotFound, UserFacingError
from skills.serving.profiles import DEFAULT_TARGET, load_profiles
from skills.targets.port import ServingTarget


async def holds(target: ServingTarget, service: str) -> bool:
    """Whether `target` has a service named `service` (its `get_service` answers). NotFound, or a name the target
    refuses as a name (InvalidInput: it cannot hold it), is no; any other error is raised (could not ask)."""
    try:
        await target.get_service(service)
    except (NotFound, InvalidInput):
        return False
    return True


@dataclass(frozen=True)
class Holding:
    """Whether one target holds a service name (None: it could not be asked, `why`)."""

    target: ServingTarget
    holds: bool | None
    why: str = ""


async def who_holds(targets: list[ServingTarget], service: str, timeout_s: float) -> list[Holding]:
    """Ask each of `targets` at once whether it holds `service`, each within `timeout_s`."""

    async def one(target: ServingTarget) -> Holding:
        try:
            return Holding(target, await asyncio.wait_for(holds(target, service), timeout_s))
        except TimeoutError:
            return Holding(target, None, f"no answer within {timeout_s:g} s")
        except UserFacingError as exc:
            return Holding(target, None, exc.message[:160])

    return list(await asyncio.gather(*(one(t) for t in targets)))


@dataclass(frozen=True)
class Targets:
    by_kind: Mapping[str, ServingTarget]
    default_kind: str = DEFAULT_TARGET
    services: Mapping[str, str] = field(default_factory=dict)  # service name -> target kind, from the settings
    default_service: str = ""  # the default target's service the settings name (VLLM_SERVICE_NAME)
    # service name -> target kind, as the targets answered `locate` (and writes that created or deleted one);
    # bot/deps.py keeps one for the process, so every Targets it builds shares what was learned.
    learned: MutableMapping[str, str] = field(default_factory=dict)
    # Targets the code knows but the settings do not set up, by kind: what to set (said when a command needs one).
    unwired: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted({self.default_kind, *self.services.values()} - set(self.by_kind))
        if unknown:
            raise ValueError(f"serving targets named but not wired: {', '.join(unknown)}")

    @property
    def default(self) -> ServingTarget:
        return self.by_kind[self.default_kind]

    def for_kind(self, kind: str) -> ServingTarget:
        target = self.by_kind.get(kind)
        if target is None and kind in self.unwired:
            raise InvalidInput(f"The serving target `{kind}` is not set up in this bot.", self.unwired[kind])
        if target is None:
            raise InvalidInput(
                f"No serving target `{kind}` is set up in this bot.",
                "Targets: " + ", ".join(f"`{k}`" for k in sorted(self.by_kind)) + ".",
            )
        return target

    def wired_kind(self, service: str) -> str | None:
        """The target kind the settings give `service` (None: they name no target for it)."""
        if service in self.services:
            return self.services[service]
        return self.default_kind if service and service == self.default_service else None

    def for_service(self, service: str) -> ServingTarget:
        """The service's target as known now, without asking (the settings, then what was learned, then the
        default); `locate` asks."""
        kind = self.wired_kind(service) or self.learned.get(service) or self.default_kind
        return self.for_kind(kind if kind in self.by_kind else self.default_kind)

    def others(self, target: ServingTarget) -> list[ServingTarget]:
        """Every wired target but `target` (the ones a deploy plan asks whether they hold its name)."""
        return [t for t in self.by_kind.values() if t is not target]

    def learn(self, service: str, kind: str) -> None:
        """`service` is on `kind` (a write created it there); the default needs no entry."""
        if self.wired_kind(service) is not None:
            return
        if kind == self.default_kind:
            self.learned.pop(service, None)
        elif kind in self.by_kind:
            self.learned[service] = kind

    def forget(self, service: str) -> None:
        """`service` is gone (a destroy deleted it)."""
        self.learned.pop(service, None)

    async def locate(self, service: str) -> ServingTarget:
        """The target holding `service`, asked: the one the settings name; else the first target whose
        `get_service` answers (the one last learned first, then the default, then the others), remembered; else
        the default (which then says the service does not exist). A target that cannot be asked is skipped; when
        none holds the name and the default could not be asked, its error is raised (as its own call would)."""
        wired = self.wired_kind(service)
        if wired is not None:
            return self.for_kind(wired)
        order: list[ServingTarget] = []
        for t in (self.for_service(service), self.default, *self.by_kind.values()):
            if all(t is not o for o in order):
                order.append(t)
        unasked: UserFacingError | None = None
        for target in order:
            try:
                found = await holds(target, service)
            except UserFacingError as exc:
                if target is self.default:
                    unasked = exc
                continue  # could not ask this one: another may still answer
            if found:
                self.learn(service, target.kind)
                return target
        if unasked is not None:
            raise unasked
        self.forget(service)
        return self.default

    def for_write(self, kind: str, params: dict[str, Any], default_service: str) -> ServingTarget:
        """The target a write plan is for: the service's, when it is wired to one; else a deploy's profile names
        it. (A profile for another target than the service's is then refused: skills/deploy/plan_builder.py.)"""
        service, target = self._wired_or_profile(kind, params, default_service)
        return target or self.for_service(service)

    async def locate_write(self, kind: str, params: dict[str, Any], default_service: str) -> ServingTarget:
        """As `for_write`, but a write on an existing service (destroy, scale, ...) goes to the target that holds
        it (`locate`), not only to one the settings name."""
        service, target = self._wired_or_profile(kind, params, default_service)
        return target or await self.locate(service)

    def _wired_or_profile(
        self, kind: str, params: dict[str, Any], default_service: str
    ) -> tuple[str, ServingTarget | None]:
        service = params.get("service") if isinstance(params, dict) else None
        service = service if isinstance(service, str) and service else default_service
        # The default's own service (default_service) is not routed here: a deploy under it goes where its profile
        # says, and the plan refuses the name there (skills/deploy/plan_builder.py); other writes locate it.
        if service in self.services:
            return service, self.for_service(service)
        name = params.get("profile") if kind == "deploy" and isinstance(params, dict) else None
        profile = load_profiles().get(name) if isinstance(name, str) else None
        if profile is not None:  # an unknown profile is the planner's to refuse
            return service, self.for_kind(profile.target)
        return service, None
