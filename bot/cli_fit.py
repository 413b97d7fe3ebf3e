"""`gemma-sre fit MODEL --gpu GPU [...] [--format json|text]`: the capacity planner offline.

Exit codes: 0 fits (or fits with changes), 1 does not fit, 2 bad input (unknown model/GPU, bad flags).
"""

from __future__ import annotations

import argparse
import json
import sys

from bot.settings import SettingsError, load_settings
from handlers.commands.fit import render_fit
from handlers.fit_args import add_fit_arguments, namespace_to_request
from handlers.render_text import to_text
from handlers.tpu_fit_render import render_tpu_fit, tpu_request
from skills.capacity.fit import FitReport, check_fit
from skills.capacity.tpu_fit import TpuFitRequest, check_tpu_fit
from skills.errors import InvalidInput


def report_json(r: FitReport) -> dict:
    out = r.model_dump(mode="json", exclude={"model", "gpu", "requested"})
    out["model"], out["gpu"] = r.model.name, r.gpu.name
    out["hf_repo"] = r.model.hf_repo
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="will a model fit a GPU: memory, KV cache, cold start, cost")
    add_fit_arguments(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        tpu = tpu_request(args)
        if tpu is not None:
            return _run_tpu(tpu, getattr(args, "format", "text"))
        # MODEL_BUCKET decides how much memory loading takes, as it does for the bot's deploys.
        report = check_fit(namespace_to_request(args, weights_from_hub=not load_settings().model_bucket))
    except InvalidInput as exc:
        print(f"gemma-sre fit: {exc.message}\n{exc.hint}".rstrip(), file=sys.stderr)
        return 2
    except SettingsError as exc:
        print(f"gemma-sre fit: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "format", "text") == "json":
        print(json.dumps(report_json(report), indent=2))
    else:
        print(to_text(render_fit(report)))
    return 1 if report.verdict == "does_not_fit" else 0


def _run_tpu(req: TpuFitRequest, fmt: str) -> int:
    """Exit 0 when it fits, 1 otherwise (more chips, does not fit, unsupported on TPU)."""
    report = check_tpu_fit(req)
    if fmt == "json":
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(to_text(render_tpu_fit(report)))
    return 0 if report.ok else 1
