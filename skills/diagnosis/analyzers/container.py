# ruff: noqa: E501  (remediation prose and log wordings read better unbroken)
"""The container never came up: it exited at start, or Cloud Run probed a port the app does not listen on.

Both are followed by Cloud Run's "failed to start and listen on the port" / startup-probe lines, which are
their consequence (causes.py): a longer probe budget cannot help either.
"""

from __future__ import annotations

import re

from skills.diagnosis.analyzers.base import Line, LogView, analyzer, first_seen
from skills.diagnosis.analyzers.cuda import compatible_image
from skills.diagnosis.analyzers.lines import READY
from skills.diagnosis.analyzers.startup import _PROBE_FAIL
from skills.diagnosis.findings import Finding, ProposedAction, Remediation
from skills.serving.vllm_flags import BY_FIELD

# Classes of the first decisive line of a process that exits before it listens. Wordings by shape:
# argparse prints "<prog>: error: <message>" (vllm serve / api_server.py / any prog); Transformers and vLLM
# name an architecture they do not know; Python's import errors; the container runtime's exec errors.
_CLI = re.compile(
    r"(?:^|[\s\"'])([\w./-]+(?: [\w-]+)?): error: ((?:argument [^:]+|unrecognized arguments|the following arguments are required|invalid choice)\b.*)"
)
_PARSER = re.compile(r"invalid (tool call|reasoning) parser:? '?([\w.-]+)")
# Transformers: models/auto/configuration_auto.py (AutoConfig.from_pretrained: "The checkpoint you are trying to load
# has model type `X` but Transformers does not recognize this architecture"); vLLM's model registry
# (vllm/model_executor/models/registry.py: "Model architectures ['X'] are not supported for now").
_ARCH = re.compile(
    r"Transformers does not recognize this architecture|"
    r"Model architectures? \[?'?([\w]+)'?\]? (?:is|are) not supported|"
    r"unknown model architecture:? '?([\w-]+)"
)
_MODEL_TYPE = re.compile(r"model type [`'\"]?([\w.-]+)")
# At the start of the line, or inside the interpreter's own "python -m" failure (the entrypoint module itself
# does not import): "Error while finding module specification for 'x' (ModuleNotFoundError: ...)".
# Also inside another line: vllm/_custom_ops.py warns "Failed to import from vllm._C with ImportError('...')"
# and goes on until the first kernel call fails; fatal only when the server never becomes ready after it.
_IMPORT = re.compile(
    r"^(?:ModuleNotFoundError|ImportError): (.+)|"
    r"Error while finding module specification for '[^']+' \((?:ModuleNotFoundError|ImportError): (.+)\)|"
    r"Failed to import from [\w.]+ with (?:ImportError|ModuleNotFoundError)\((.+)\)"
)
# The container runtime failing to start the entrypoint: runc's "exec format error" (an image for another CPU
# architecture), Go's os/exec ErrNotFound "executable file not found in $PATH" as runc reports it
# ('exec: "python": executable file not found in $PATH').
_EXEC = re.compile(
    r"exec format error|executable file not found in \$PATH|exec: \"[^\"]+\": (?:stat|permission denied)"
)
_CHOICE_FLAG = re.compile(r"argument (--[\w-]+)")
_BAD_CHOICE = re.compile(r"invalid choice: '?([\w.-]+)")

NEWER_IMAGE = (
    "Deploy a newer vllm/vllm-openai image: Gemma 4 and its `gemma4` tool/reasoning parsers need a release that "
    "ships them (pin the tag; `latest` moves)."
)
NO_PROBE = "A longer startup probe cannot help: the process exits before it ever listens."


def _first_exit(view: LogView) -> tuple[Line, str, str, list[str]] | None:
    """(line, class, title, steps) of the earliest decisive line, if any."""
    for line in view.lines:
        t = line.text
        if m := _CLI.search(t):
            flag = _CHOICE_FLAG.search(m.group(2))
            bad = _BAD_CHOICE.search(m.group(2))
            name = flag.group(1) if flag else ""
            if bad and name in (BY_FIELD["tool_call_parser"].flag, BY_FIELD["reasoning_parser"].flag):
                return (
                    line,
                    "cli",
                    f"vLLM does not know {name} {bad.group(1)!r}: the image is too old for it",
                    [NEWER_IMAGE, f"Or choose one of the {name} values this image lists."],
                )
            what = f"{m.group(1)} rejected {name}" if name else f"{m.group(1)} rejected its arguments"
            return (
                line,
                "cli",
                what,
                [
                    f"Fix the argument the log quotes{f' ({name})' if name else ''}: flag names and value syntax change between vLLM releases, so check `vllm serve --help` in this image.",
                ],
            )
        if m := _PARSER.search(t):
            return (
                line,
                "parser",
                f"vLLM does not know the {m.group(1)} parser {m.group(2)!r}: the image is too old for it",
                [NEWER_IMAGE],
            )
        if m := _ARCH.search(t):
            around = " ".join(x.text for x in view.lines[max(0, line.idx - 1) : line.idx + 1])
            mt = _MODEL_TYPE.search(around)
            arch = mt.group(1) if mt else (m.group(1) or m.group(2) or "")
            return (
                line,
                "arch",
                f"The image does not know the model architecture{f' {arch!r}' if arch else ''}: it is too old",
                [
                    NEWER_IMAGE,
                    "The Transformers version inside the image is what decides: `--trust-remote-code` does not help for Google's Gemma repos.",
                ],
            )
        if (m := _IMPORT.search(t)) and not (m.group(3) and view.after(line.idx, READY)):
            return (
                line,
                "import",
                f"A Python import failed at start ({(m.group(1) or m.group(2) or m.group(3))[:80]})",
                [
                    "The image's Python packages are broken or mismatched: rebuild it, or use the official vllm/vllm-openai image."
                ],
            )
        if _EXEC.search(t):
            return (
                line,
                "exec",
                "The container's entrypoint could not be executed",
                ["Check the image's entrypoint and its CPU architecture (Cloud Run runs linux/amd64)."],
            )
    return None


@analyzer("container_exited_at_start")
def exited_at_start(view: LogView) -> Finding | None:
    hit = _first_exit(view)
    if hit is None:
        return None
    line, cls, title, steps = hit
    actions = []
    if cls in ("arch", "parser") or (cls == "cli" and "too old" in title):
        # The image is too old for the model or its parsers: the compatibility data names one that is not.
        image, why = compatible_image(view)
        if image:
            actions.append(
                ProposedAction(action="redeploy", params={"image": image}, reason="a vLLM that knows the model")
            )
            steps = [*steps, f"Redeploy with {why}"]
    evidence = [line.evidence()]
    if line.idx > 0 and _MODEL_TYPE.search(view.lines[line.idx - 1].text) and not _MODEL_TYPE.search(line.text):
        evidence.insert(0, view.lines[line.idx - 1].evidence())
    return Finding(
        kind="container_exited_at_start",
        title=f"Container exited at start: {title}",
        severity="critical",
        evidence=evidence,
        remediation=Remediation(
            summary=f"The first decisive error: {line.text[:300]}",
            steps=[*steps, NO_PROBE],
            actions=actions,
        ),
        first_seen=first_seen([(line, None)]),
        count=1,
    )


# Where the app says it listens: uvicorn / vLLM's "on http://host:port", "listening on port N", an app's own
# port field, vLLM's --port in its args (non-default args dict, argparse Namespace, command line).
_LISTEN = [
    re.compile(
        r"(?:running|server(?: \d+)?|[Ll]istening|[Ss]erving) on (?:https?://)?(?:[\w.-]+|\[[\w:]*\]):(\d{2,5})\b"
    ),
    re.compile(r"[Ll]istening on (?:port |:)(\d{2,5})\b"),
    re.compile(r"\b(?:api_|http_|server_)?port: (\d{2,5})\b"),
    re.compile(r"['\"]port['\"]: (\d{2,5})\b|Namespace\(.*?\bport=(\d{2,5})\b|--port[ =](\d{2,5})\b"),
]
_PROBE_PORT = re.compile(r"\bon port (\d{2,5})\b|\bPORT=(\d{2,5})\b")


@analyzer("container_port_mismatch")
def port_mismatch(view: LogView) -> Finding | None:
    probe: tuple[Line, int] | None = None
    for line, _ in view.grep(*_PROBE_FAIL):
        joined = " ".join(x.text for x in view.lines[line.idx : line.idx + 2])
        if m := _PROBE_PORT.search(joined):
            probe = (line, int(m.group(1) or m.group(2)))
            break
    if probe is None:
        return None
    listen: tuple[Line, int] | None = None
    for line in view.lines:
        for rx_ in _LISTEN:
            if m := rx_.search(line.text):
                listen = (line, int(next(g for g in m.groups() if g)))
                break
        if listen:
            break
    if listen is None or listen[1] == probe[1]:
        return None
    (pline, pport), (lline, lport) = probe, listen
    return Finding(
        kind="container_port_mismatch",
        title=f"Cloud Run probes port {pport}; the app listens on {lport}",
        severity="critical",
        evidence=[lline.evidence(), pline.evidence()],
        remediation=Remediation(
            summary="The startup probe knocks on a port nothing listens on: this is not slow loading.",
            steps=[
                f"Make them agree: set the container port to {lport} (`gcloud run deploy --port {lport}`), or start the server on Cloud Run's $PORT (vLLM: `--port {pport}`).",
                NO_PROBE.replace("the process exits before it ever listens", "nothing listens on the probed port"),
            ],
        ),
        first_seen=first_seen([(lline, None), (pline, None)]),
        count=2,
    )
