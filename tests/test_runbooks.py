"""Issue 34, runbooks: one per finding kind, each naming the analyzer it documents and real cases from the corpus;
every finding in a thread links its kind's; `/gemma runbook` and the agent's read-only tool read them; a kind the
bot does not know (or a path) is refused."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bot.agent.toolset import Toolset
from handlers.commands.logs import render_diagnosis
from skills.diagnosis.analyzers import KINDS
from skills.diagnosis.diagnose import diagnose
from skills.errors import InvalidInput
from skills.incidents.runbooks import REPO_RUNBOOKS, read_runbook
from skills.ports import LogEntry
from tests.agent_fixtures import logging_api, make_deps, script  # noqa: F401  (fixtures)
from tests.deploy_helpers import command
from tests.observe_fixtures import reply_text

ROOT = Path(__file__).resolve().parent.parent
KV_LINE = (
    "ValueError: To serve at least one request with the models's max seq len (131072), (3.57 GiB KV cache is "
    "needed, which is larger than the available KV cache memory (2.93 GiB). Based on the available memory, the "
    "estimated maximum model length is 88064."
)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_sourced_runbook(kind: str) -> None:
    text = (REPO_RUNBOOKS / f"{kind}.md").read_text()
    assert text.startswith(f"# Runbook: `{kind}`")
    modules = re.findall(r"`(skills/diagnosis/analyzers/[a-z_]+\.py)`", text)
    assert modules and all((ROOT / m).is_file() for m in modules)
    assert f'"{kind}"' in (ROOT / modules[0]).read_text()  # the module it names raises this kind
    assert "## Real cases" in text and "## Team notes" in text
    assert read_runbook(kind) == text


def test_findings_link_their_runbook() -> None:
    d = diagnose([LogEntry(text=KV_LINE, severity="ERROR")], token_budget=500)
    assert "kv_cache_insufficient" in d.kinds()
    text = reply_text(render_diagnosis("vllm-gemma4", d))
    for kind in d.kinds():
        assert f"Runbook: `runbooks/{kind}.md` (`/gemma runbook {kind}`)" in text


@pytest.mark.parametrize("bad", ["../README", "kv_cache_insufficient.md", "nope", ""])
def test_an_unknown_kind_or_a_path_is_refused(bad: str) -> None:
    with pytest.raises(InvalidInput):
        read_runbook(bad)


def test_a_configured_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "engine_hung.md").write_text("# ours\n")
    assert read_runbook("engine_hung", str(tmp_path)) == "# ours\n"
    with pytest.raises(InvalidInput):  # that folder has no runbook for this kind
        read_runbook("gpu_oom_at_load", str(tmp_path))


async def test_the_command_and_the_agents_tool(make_deps: Any) -> None:  # noqa: F811
    deps = make_deps()
    reply, _ = await command(deps, "runbook kv_cache_insufficient")
    assert reply is not None and "First five minutes" in reply_text(reply)
    bad, _ = await command(deps, "runbook ../../etc/passwd")
    assert bad is not None and bad.ephemeral and "No finding kind" in bad.title
    registry = Toolset(deps).registry()
    tool = registry.get("read_runbook")
    assert tool is not None and tool.run is not None and not tool.modifies
    assert "First five minutes" in await tool.run(tool.args(kind="engine_hung"))
    changes = registry.get("what_changed")
    assert changes is not None and changes.run is not None and not changes.modifies
    seen = await changes.run(changes.args(started_minutes_ago=0))
    assert "last healthy revision: vllm-gemma4-" in seen  # the seeded service's revision
