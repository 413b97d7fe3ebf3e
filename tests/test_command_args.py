"""Every /gemma subcommand's arguments come from its declared parser: bad words give that command's usage,
the help is the parser's, and the words people have always typed still parse."""

from __future__ import annotations

import pytest

from handlers.context import CommandContext
from handlers.registry import COMMANDS, load_all
from handlers.router import help_for, help_reply, run_command
from skills.actions.params import DeployParams
from skills.errors import InvalidInput
from tests.agent_helpers import RecordingResponder

load_all()

# One bad argument list per command, and words the error must say. Parse errors come before any handler
# work, so no dependency is touched (deps is None on purpose: a handler reaching it would fail loudly).
BAD: dict[str, tuple[list[str], str]] = {
    "analyze": (["--since"], "`--since` needs a value."),
    "ask": ([], "Nothing to ask."),
    "audit": (["ten"], "`N` must be a whole number, not `ten`."),
    "bench": (["--concurrency", "a,b"], "`--concurrency` needs numbers, got `a,b`."),
    "config": (["p1", "p2"], "Unexpected argument `p2`."),
    "cost": (["svc", "extra"], "Unexpected argument `extra`."),
    "deploy": ([], "Missing PROFILE."),
    "destroy": (["svc", "--force"], "Unknown option `--force`."),
    "diagnose": (["--severity", "ERROR"], "Unknown option `--severity`."),
    "eval": (["--all"], "Unknown option `--all`."),
    "fit": (["26b-qat", "--kv-cache-dtype", "int4"], "`--kv-cache-dtype`: invalid choice: 'int4'"),
    "handoff": (["--since"], "`--since` needs a value."),
    "health": (["now"], "Unexpected argument `now`."),
    "incidents": (["closed"], "`STATUS`: invalid choice: 'closed'"),
    "logs": (["--since"], "`--since` needs a value."),
    "metrics": (["--window", "5m"], "Unknown option `--window`."),
    "models": (["gemma"], "Unexpected argument `gemma`."),
    "postmortem": (["a", "b"], "Unexpected argument `b`."),
    "query": ([], "Nothing to ask."),
    "quota": (["nvidia-l4", "2"], "Unexpected argument `2`."),
    "tpu": (["zones", "v6e-4", "extra"], "Unexpected argument `extra`."),
    "revisions": (["a", "b"], "Unexpected argument `b`."),
    "rollback": (["r1", "r2"], "Unexpected argument `r2`."),
    "runbook": ([], "Missing KIND."),
    "sandbox": (["a", "b"], "Unexpected argument `b`."),
    "scale": (["x", "2"], "`MIN` must be a whole number, not `x`."),
    "status": (["svc", "--stale"], "Unknown option `--stale`."),
}


def _ctx(args: list[str]) -> CommandContext:
    return CommandContext(deps=None, responder=RecordingResponder(), user_id="U1", channel_id="C1", args=args)  # type: ignore[arg-type]


def test_every_command_has_a_bad_arguments_case() -> None:
    assert set(BAD) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(BAD))
async def test_bad_arguments_answer_with_the_commands_usage(name: str) -> None:
    args, words = BAD[name]
    reply = await run_command(_ctx(args), name)
    assert reply is not None and reply.ephemeral
    assert words in reply.title, reply.title
    hint = reply.sections[0].text or ""
    assert hint.startswith(f"Usage: `/gemma {COMMANDS[name].parser.usage_line()}`"), hint


def test_deploy_errors_name_the_profiles_and_scale_gives_an_example() -> None:
    with pytest.raises(InvalidInput) as deploy:
        COMMANDS["deploy"].parser.parse([])
    hint = deploy.value.hint
    assert "Profiles: `gemma4-12b-qat-aca-a100`" in hint and "`gemma4-12b-qat-l4`" in hint  # sorted by name
    with pytest.raises(InvalidInput) as scale:
        COMMANDS["scale"].parser.parse(["1"])
    assert scale.value.message == "Missing MAX." and scale.value.hint.endswith("e.g. `/gemma scale 0 2`.")


def test_help_lines_are_the_declared_parsers() -> None:
    reply = help_reply()
    lines = (reply.sections[0].text or "").splitlines()
    expected = [
        f"`/gemma {c.parser.short_usage()}` — {c.summary}" for c in sorted(COMMANDS.values(), key=lambda c: c.name)
    ]
    assert lines == expected
    body = "\n".join(lines)
    # Short forms where the option list is long; the full list is one `help CMD` away.
    assert "`/gemma deploy PROFILE [options]`" in body and "`/gemma fit MODEL [options]`" in body
    assert "`/gemma status [SERVICE] [--fresh]`" in body and "`/gemma scale MIN MAX [--service SERVICE]`" in body


@pytest.mark.parametrize(("name", "args"), [("help", ["deploy"]), ("deploy", ["--help"]), ("deploy", ["p", "-h"])])
async def test_command_help_is_the_parsers_help(name: str, args: list[str]) -> None:
    reply = await run_command(_ctx(args), name)
    assert reply is not None and reply.ephemeral
    code = reply.sections[0].code or ""
    assert code == COMMANDS["deploy"].parser.format_help()
    assert code.startswith("usage: /gemma deploy PROFILE [--gpu GPU]")
    for field in DeployParams.model_fields:
        if field != "profile":
            assert f"--{field.replace('_', '-')}" in code, field


def test_help_for_unknown_topics_and_free_text() -> None:
    unknown = help_for("help", ["nope"])
    assert unknown is not None and unknown.title.startswith("Unknown command `nope`")
    assert help_for("nope", []) is not None
    assert help_for("status", ["svc"]) is None  # a real command runs
    # A question may mention -h; only a leading --help asks for help.
    assert help_for("ask", ["what", "does", "-h", "do?"]) is None
    assert help_for("ask", ["--help"]) is not None


def test_the_words_people_type_still_parse() -> None:
    deploy = COMMANDS["deploy"].parser
    o = deploy.parse(["gemma4-12b-qat-l4", "--max-model-len", "16384", "gpu_count=2", "--gpu=nvidia-l4"])
    assert (o.profile, o.max_model_len, o.gpu_count, o.gpu) == ("gemma4-12b-qat-l4", "16384", "2", "nvidia-l4")
    assert deploy.parse(["--enforce-eager", "p"]).enforce_eager is True  # a boolean never eats the profile
    assert deploy.parse(["p", "--no-enforce-eager"]).enforce_eager is False
    assert deploy.parse(["p", "enforce_eager=false"]).enforce_eager is False
    assert deploy.parse(["p", "--enforce-eager=true"]).enforce_eager is True
    with pytest.raises(InvalidInput, match="takes true or false"):
        deploy.parse(["p", "--enforce-eager=maybe"])
    logs = COMMANDS["logs"].parser.parse(["--since=2h", "svc", "--severity", "warning"])
    assert (logs.service, logs.since, logs.severity) == ("svc", "2h", "warning")
    assert COMMANDS["diagnose"].parser.parse([]).since == "1h"
    status = COMMANDS["status"].parser.parse(["--fresh", "svc"])
    assert (status.service, status.fresh) == ("svc", True)
    scale = COMMANDS["scale"].parser.parse(["0", "2", "--service", "other"])
    assert (scale.min_instances, scale.max_instances, scale.service) == (0, 2, "other")
    bench = COMMANDS["bench"].parser.parse(["--concurrency=1,8", "--context", "128, 2048", "--output", "64"])
    assert (bench.concurrency, bench.contexts, bench.output_tokens, bench.compare) == ([1, 8], [128, 2048], 64, None)
    assert COMMANDS["bench"].parser.parse(["compare"]).compare == "compare"
    ask = COMMANDS["ask"].parser.parse(["why", "does", "--max-model-len", "8192", "fail?"])
    assert ask.question == ["why", "does", "--max-model-len", "8192", "fail?"]
    assert COMMANDS["query"].parser.parse(["--verbose", "hi"]).prompt == ["--verbose", "hi"]
    assert COMMANDS["audit"].parser.parse([]).n == 10 and COMMANDS["quota"].parser.parse([]).gpu == "nvidia-l4"


async def test_a_value_the_model_refuses_still_answers_with_the_usage() -> None:
    """fit's limits live in FitRequest: a value argparse accepts but the model refuses gets the same usage."""
    reply = await run_command(_ctx(["26b-qat", "--util", "7"]), "fit")
    assert reply is not None and "--gpu-memory-utilization" in reply.title
    assert (reply.sections[0].text or "").startswith(f"Usage: `/gemma {COMMANDS['fit'].parser.usage_line()}`")
