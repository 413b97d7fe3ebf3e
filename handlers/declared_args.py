"""A command's arguments declared once, as a pydantic model: its argparse parser and its MCP tool schema both
derive from it.

Each field is one argument: its type, default and bounds are the schema an agent sees (`tool_schema`); an `Arg`
in its metadata says how a person types it (positional or `--flag`, metavar, argparse's converter, so usage,
help and every bad-argument wording stay those of handlers/args.py); the field's description is its help.
`arguments(Model)` is the `args` a `@command` declares; `to_argv(instance)` turns checked tool arguments back
into the words the same parser reads, so an MCP call runs the command exactly as a typed one.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from handlers.args import ArgsFn, CommandParser


@dataclass(frozen=True)
class Arg:
    """How a person types a field: no flags for a positional; `nargs` "?" / "*" as argparse's."""

    flags: tuple[str, ...] = ()
    metavar: str | None = None
    nargs: str | None = None
    parse: Callable[[str], Any] | None = None  # argparse's `type`: its error wording is the one users get
    switch: bool = False  # a flag that takes no value (store_true)
    choices: tuple[str, ...] | None = None


def _arg(field: Any) -> Arg:
    for meta in field.metadata:
        if isinstance(meta, Arg):
            return meta
    return Arg()


def arguments(model: type[BaseModel]) -> ArgsFn:
    """The parser declaration for `model`, field by field in order."""

    def declare(p: CommandParser) -> None:
        for name, field in model.model_fields.items():
            a = _arg(field)
            kwargs: dict[str, Any] = {"help": field.description}
            if not field.is_required():
                kwargs["default"] = field.get_default(call_default_factory=True)
            if a.switch:
                p.add_argument(*a.flags, dest=name, action="store_true", **kwargs)
                continue
            if a.metavar:
                kwargs["metavar"] = a.metavar
            if a.parse is not None:
                kwargs["type"] = a.parse
            if a.nargs:
                kwargs["nargs"] = a.nargs
            if a.choices:
                kwargs["choices"] = list(a.choices)
            if a.flags:
                p.add_argument(*a.flags, dest=name, **kwargs)
            else:
                p.add_argument(name, **kwargs)

    return declare


def to_argv(args: BaseModel, *, free_text: bool = False) -> list[str]:
    """Checked arguments as the words a person would type (defaults left out). A free-text command's parser
    reads every word as text already."""
    words: list[str] = []
    options: list[str] = []
    for name, field in type(args).model_fields.items():
        value = getattr(args, name)
        if value is None or (not field.is_required() and value == field.get_default(call_default_factory=True)):
            continue
        a = _arg(field)
        if a.switch:
            options.extend(a.flags[:1] if value else [])
        elif a.flags:
            shown = ",".join(map(str, value)) if isinstance(value, list) else value  # number_list's form
            options.append(f"{a.flags[0]}={shown}")
        elif isinstance(value, list):
            words.extend(str(v) for v in value)
        else:
            words.append(str(value))
    # Positionals may start with '-' only as values: keep them after the options, behind '--'.
    if free_text:
        return [*options, *words]
    return [*options, "--", *words] if words else options


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The MCP tool input schema: the model's JSON schema (an object; no fields: an empty object)."""
    schema = model.model_json_schema()
    schema.setdefault("properties", {})
    return schema


def namespace_of(args: BaseModel) -> argparse.Namespace:
    """The Namespace a handler reads (`ctx.opts`) for checked arguments."""
    return argparse.Namespace(**args.model_dump())
