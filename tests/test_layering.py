"""The layers (issue 18): bot/ wires, handlers parse and render, skills do the work and talk to the outside only
through skills/ports.py. Checked on the source, where every import counts (top-level, under
`if TYPE_CHECKING:`, inside functions), and at run time in a fresh interpreter that loads every handler module
the registry knows.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Client libraries of the outside world: only bot/ (adapters, wiring) may use them.
OUTSIDE = ("redis", "openai", "slack_sdk", "slack_bolt", "google.cloud", "google.api_core", "google.auth", "httpx")


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file; relative imports resolved to the package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(ROOT).parts[:-1]) if path.is_relative_to(ROOT) else ""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from google import cloud` names the package only in the alias
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _hits(package: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in _modules(package):
        for line, module in _imports(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return sorted(set(bad))


def test_the_walker_sees_every_form_of_import(tmp_path: Path) -> None:
    """The checks below would pass vacuously if the walker missed guarded or function-local imports."""
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from bot.deps import Deps\n"
        "def f():\n    import redis.asyncio as r\n    from google import cloud\n"
    )
    names = {m for _, m in _imports(src)}
    assert {"bot.deps", "redis.asyncio", "google.cloud"} <= names


def test_skills_use_ports_not_client_libraries() -> None:
    assert _hits("skills", OUTSIDE) == []


def test_skills_never_import_handlers_or_bot() -> None:
    assert _hits("skills", ("handlers", "bot")) == []


def test_handlers_never_import_bot() -> None:
    assert _hits("handlers", ("bot",)) == []


_LOAD = """
import json, pkgutil, importlib, sys
import handlers, skills
from handlers.registry import load_all
load_all()
for pkg in (handlers, skills):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
print(json.dumps(sorted(m for m in sys.modules if m == "bot" or m.startswith("bot."))))
"""


def test_handlers_and_skills_load_without_bot() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LOAD], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert json.loads(out.splitlines()[-1]) == []


def _package_modules(package: str) -> dict[str, Path]:
    out = {}
    for path in _modules(package):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _module_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports, counting every import (guarded, function-local)."""
    mods = _package_modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for _, module in _imports(path):
            # `from skills.x import y` names skills.x.y too; keep the longest prefix that is a module.
            while module and module not in mods:
                module = module.rpartition(".")[0]
            if module and module != name and module != package and not name.startswith(module + "."):
                targets.add(module)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first walk (one representative per back edge)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_skills_import_one_way() -> None:
    """No import cycle between skill modules, counting every import (guarded and function-local too): a module
    that needs another's types and is needed by it shares a third module instead (e.g. the findings)."""
    graph = _module_graph("skills")
    assert _cycles(graph) == []


# The chat calls a surface makes (Responder, slack_sdk's WebClient): in the incident pipeline only the port's.
_CHAT_CALL = ("post", "update", "edit", "chat_", "upload", "files_")


def _chat_calls(path: Path, root: Path = ROOT) -> list[str]:
    """Calls that look like posting or editing a message, made on anything but the IncidentChat port."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith(_CHAT_CALL)
        ):
            target = ast.unparse(node.func.value)
            if target != "self.chat":
                bad.append(f"{path.relative_to(root)}:{node.lineno}: {target}.{node.func.attr}(...)")
    return bad


def test_the_chat_call_checker_sees_a_surface_call(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("async def f(self, slack):\n    await slack.post(1)\n    await self.chat.post_header('c', 1)\n")
    assert [c.split(": ", 1)[1] for c in _chat_calls(probe, tmp_path)] == ["slack.post(...)"]


def test_the_incident_pipeline_reaches_chat_only_through_its_port() -> None:
    """skills/incidents/ (records, publisher, effects, threads) tells Slack through the IncidentChat port
    (skills/ports.py) and nothing else: no surface (handlers: Reply, Responder, renderers), no Slack client,
    and every post or edit goes to that port. The webhook handler -> skills -> ports path goes down once."""
    assert _hits("skills/incidents", ("handlers", "bot", "slack_sdk", "slack_bolt", "redis")) == []
    calls = [c for p in _modules("skills/incidents") for c in _chat_calls(p)]
    assert calls == [], "chat calls beside the IncidentChat port:\n" + "\n".join(calls)
    ports = (ROOT / "skills" / "incidents" / "chat.py").read_text()
    assert "class IncidentChat(Protocol)" in ports
    for name in ("threads", "publisher"):
        src = (ROOT / "skills" / "incidents" / f"{name}.py").read_text()
        assert "chat: IncidentChat" in src, f"skills/incidents/{name}.py is not given the port"


# --- Serving targets (issue 36): one place knows which target serves what -----------------------------------

CLOUD_RUN_TARGET = ROOT / "skills" / "targets" / "cloud_run"


def _hits_outside(package: str, forbidden: tuple[str, ...], allowed: tuple[Path, ...]) -> list[str]:
    bad = []
    for path in _modules(package):
        if path.is_relative_to(CLOUD_RUN_TARGET) or path in allowed:
            continue
        for line, module in _imports(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return sorted(set(bad))


def test_skills_outside_the_cloud_run_target_never_import_google_cloud_run() -> None:
    assert _hits_outside("skills", ("google.cloud.run", "google.cloud.run_v2"), ()) == []


def test_only_wiring_knows_the_cloud_run_target() -> None:
    """Handlers, the incident pipeline and the target-independent skills reach a target through the port
    (skills/targets/port.py) and the registry; none of them imports the Cloud Run target or its adapter."""
    forbidden = ("skills.targets.cloud_run", "bot.adapters.cloud_run")
    assert _hits_outside("skills", forbidden, ()) == []
    assert _hits("handlers", forbidden) == []


# --- The incident surface in handlers/ renders; skills/incidents decides (issue 24) ---------------------------

# The incident work a surface must not do itself: reading logs and diagnosing, incident storage, what changed.
_INCIDENT_DOMAIN = (
    "skills.diagnosis.diagnose",
    "skills.incidents.store",
    "skills.incidents.lifecycle_store",
    "skills.incidents.outbox",
    "skills.incidents.publisher",
    "skills.incidents.effects",
    "skills.leases",
    "skills.incidents.changes.what_changed",
)
# What handlers/incident_*.py may await: posting or editing on the chat surface (the IncidentChat port's side).
_SURFACE_AWAITS = ("slack.post", "self.responder_for(channel).update", "self._post", "self._update")


def _awaited(path: Path, root: Path = ROOT) -> list[str]:
    """What the module awaits or iterates asynchronously, outside the chat surface's own calls."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        call = node.value if isinstance(node, ast.Await) else node.iter if isinstance(node, ast.AsyncFor) else None
        if isinstance(call, ast.Call) and ast.unparse(call.func) not in _SURFACE_AWAITS:
            out.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(call.func)}(...)")
    return out


def test_the_await_checker_sees_work_done_in_a_surface(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "async def f(self, slack, logs):\n    await slack.post(1)\n    d = await diagnose_service(logs)\n"
        "    async for s in investigate(1):\n        pass\n"
    )
    found = sorted(c.split(": ", 1)[1] for c in _awaited(probe, tmp_path))
    assert found == ["diagnose_service(...)", "investigate(...)"]


def test_handlers_render_incidents_and_skills_investigate_them() -> None:
    """handlers/incident_*.py render what skills/incidents hands them: no diagnosis, storage or what-changed of
    their own, and nothing awaited but the chat surface and the one investigation (skills/incidents/
    investigation.py) whose steps they render."""
    surface = sorted((ROOT / "handlers").glob("incident_*.py"))
    bad = [
        f"{p.relative_to(ROOT)}:{line} imports {module}"
        for p in surface
        for line, module in _imports(p)
        if any(module == f or module.startswith(f + ".") for f in _INCIDENT_DOMAIN)
    ]
    assert bad == [], "incident domain work in handlers:\n" + "\n".join(bad)
    work = [w for p in surface for w in _awaited(p) if not w.endswith(": investigate(...)")]
    assert work == [], "incident work awaited in handlers:\n" + "\n".join(work)


# --- The house in floors (issue 47): skills/README.md declares them; the imports follow -------------------------


def declared_floors(readme: str) -> list[list[str]]:
    """The units of each floor, lowest first, from the README's `floor N  unit unit ...` lines."""
    found = [m.groups() for m in re.finditer(r"^floor (\d+) +(\S.*)$", readme, re.M)]
    assert [int(n) for n, _ in found] == list(range(1, len(found) + 1)), "floors numbered 1, 2, ... in order"
    return [units.split() for _, units in found]


def _unit(module: str) -> str:
    """skills.deploy.flow -> deploy; skills.ports -> ports."""
    return module.split(".")[1]


def skills_unit_imports(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """unit -> imported unit -> where (`path:line`), for every import between units of skills/."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in sorted((root / "skills").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if len(parts) < 2 or parts[1] == "__init__":
            continue
        src = parts[1]
        out.setdefault(src, {})
        for line, module in _imports(path):
            if module.startswith("skills.") and _unit(module) != src:
                out[src].setdefault(_unit(module), []).append(f"{path.relative_to(root)}:{line}")
    return out


def against_the_floors(floors: list[list[str]], imports: dict[str, dict[str, list[str]]]) -> list[str]:
    """Every unit on no floor, and every import of a unit that is not lower, nor to the left on the same floor."""
    place = {unit: (n, i) for n, units in enumerate(floors) for i, unit in enumerate(units)}
    bad = [f"{unit} is on no floor of skills/README.md" for unit in sorted(imports) if unit not in place]
    for src, targets in sorted(imports.items()):
        for dst, where in sorted(targets.items()):
            if src in place and dst in place and place[dst] >= place[src]:
                bad.append(f"{src} (floor {place[src][0] + 1}) imports {dst} (floor {place[dst][0] + 1}): {where[0]}")
    return bad


def test_the_floor_check_catches_an_import_that_runs_back_up() -> None:
    floors = [["errors", "ports"], ["serving"], ["incidents"]]
    assert against_the_floors(floors, {"ports": {"errors": ["p:1"]}, "incidents": {"serving": ["i:1"]}}) == []
    found = against_the_floors(floors, {"ports": {"incidents": ["skills/ports.py:16"]}, "errors": {"ports": ["e:3"]}})
    assert found == [
        "errors (floor 1) imports ports (floor 1): e:3",
        "ports (floor 1) imports incidents (floor 3): skills/ports.py:16",
    ]
    assert against_the_floors(floors, {"bench": {}}) == ["bench is on no floor of skills/README.md"]


def test_skills_follow_their_floors() -> None:
    """skills/README.md's floors hold: every unit of skills/ is on one, and no import runs up or right (so no
    two packages import each other)."""
    floors = declared_floors((ROOT / "skills" / "README.md").read_text())
    units = [u for f in floors for u in f]
    assert len(units) == len(set(units)), "a unit on two floors"
    imports = skills_unit_imports()
    assert against_the_floors(floors, imports) == []
    graph = {src: set(dst) for src, dst in imports.items()}
    assert _cycles(graph) == []


def test_bot_has_no_import_circle() -> None:
    """Modules of bot/ import one way, counting every import (guarded and function-local too)."""
    graph = _module_graph("bot")
    assert _cycles(graph) == []


def only_re_exports(path: Path) -> bool:
    """A module whose body is nothing but imports (after its docstring): a name kept for a half-finished move.
    A package's __init__.py may name its public API so."""
    if path.name == "__init__.py":
        return False
    body = [
        n
        for n in ast.parse(path.read_text()).body
        if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
        and not (isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["__all__"])
    ]
    return bool(body) and all(isinstance(n, ast.Import | ast.ImportFrom) for n in body)


def test_the_re_export_check_sees_a_shim(tmp_path: Path) -> None:
    shim = tmp_path / "plan_deploy.py"
    shim.write_text('"""Moved."""\nfrom __future__ import annotations\nfrom x.y import (  # noqa: F401\n    a,\n)\n')
    real = tmp_path / "real.py"
    real.write_text("from x import a\n\nB = a\n")
    assert only_re_exports(shim) and not only_re_exports(real)


def test_no_module_only_re_exports_another() -> None:
    shims = [
        str(p.relative_to(ROOT)) for pkg in ("skills", "handlers", "bot") for p in _modules(pkg) if only_re_exports(p)
    ]
    assert shims == []
