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
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from handlers.args import ArgsFn


@dataclass(frozen=True)
class Arg:
    """How a person types a field: no flags for a positional; `nargs` "?" / "*" as argparse's."""

    flags: tuple[str, ...] = ()
    metavar: str | None = None
    nargs: str | None = None
    parse: Callable[[str], Any] | None = None  # argparse's `type`: its error wording is the one users get
    switch: bool = False  # a flag that takes no value (store_true)
    choices: tuple[str, ...] | None = None
    help: str | None = None  # the field's description when it has none (a model from skills/ says no help)


# How a person types the fields of a model that lives elsewhere (skills/actions/params.py: the plan builder's own
# models), by field name; models declared here carry their `Arg` in the field's metadata instead.
Typed = Mapping[str, Arg]


def _arg(name: str, field: Any, typed: Typed | None) -> Arg:
    if typed and name in typed:
        return typed[name]
    for meta in field.metadata:
        if isinstance(meta, Arg):
            return meta
    return Arg()


def _help(name: str, field: Any, typed: Typed | None) -> str | None:
    return field.description or _arg(name, field, typed).help


def field_help(model: type[BaseModel], name: str, typed: Typed | None = None) -> str | None:
    """A field's help: its description (the model's own words, which the MCP schema shows too)."""
    return _help(name, model.model_fields[name], typed)


def field_metavar(model: type[BaseModel], name: str, typed: Typed | None = None) -> str | None:
    """What a field's value is, as help shows it after its flag: the declared `Arg` metavar, else from its type:
    a Literal's choices (`on-demand|spot|reserved`), `N` for a number, the field's name for text (`ZONE`); None
    for a boolean (a switch takes no value)."""
    field = model.model_fields[name]
    declared = _arg(name, field, typed).metavar
    if declared:
        return declared
    kinds = [a for a in (get_args(field.annotation) or (field.annotation,)) if a is not type(None)]
    if get_origin(field.annotation) is Literal:
        kinds = [field.annotation]
    literal = [a for a in kinds if get_origin(a) is Literal]
    if literal:
        return "|".join(str(v) for v in get_args(literal[0]))
    if bool in kinds:
        return None
    if kinds and all(k in (int, float) for k in kinds):
        return "N"
    return name.upper()


def arguments(model: type[BaseModel], typed: Typed | None = None) -> ArgsFn:
    """The parser declaration for `model`, field by field in order."""

    def declare(p: argparse.ArgumentParser) -> None:
        for name, field in model.model_fields.items():
            a = _arg(name, field, typed)
            kwargs: dict[str, Any] = {"help": _help(name, field, typed)}
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


def to_argv(args: BaseModel, *, free_text: bool = False, typed: Typed | None = None) -> list[str]:
    """Checked arguments as the words a person would type (defaults left out). A free-text command's parser
    reads every word as text already."""
    words: list[str] = []
    options: list[str] = []
    for name, field in type(args).model_fields.items():
        value = getattr(args, name)
        if value is None or (not field.is_required() and value == field.get_default(call_default_factory=True)):
            continue
        a = _arg(name, field, typed)
        if a.switch:
            options.extend(a.flags[:1] if value else [])
        elif a.flags:
            # number_list's form for lists; JSON for a mapping (vLLM's --limit-mm-per-prompt)
            shown = ",".join(map(str, value)) if isinstance(value, list) else value
            shown = json.dumps(value, separators=(",", ":")) if isinstance(value, dict) else shown
            options.append(f"{a.flags[0]}={shown}")
        elif isinstance(value, list):
            words.extend(str(v) for v in value)
        else:
            words.append(str(value))
    # Positionals may start with '-' only as values: keep them after the options, behind '--'.
    if free_text:
        return [*options, *words]
    return [*options, "--", *words] if words else options


def tool_schema(model: type[BaseModel], typed: Typed | None = None) -> dict[str, Any]:
    """The MCP tool input schema: the model's JSON schema (an object; no fields: an empty object), each property
    described by its help."""
    schema = _sorted_enums(model.model_json_schema())
    props = schema.setdefault("properties", {})
    for name, field in model.model_fields.items():
        text = _help(name, field, typed)
        if name in props and text and "description" not in props[name]:
            props[name]["description"] = text
    return schema


def _sorted_enums(node: Any) -> Any:
    """Enums in sorted order: typing caches equal Literals, so a Literal's order is whichever one was written
    first in the process; sorted, the schema is the same in every process."""
    if isinstance(node, dict):
        out = {k: _sorted_enums(v) for k, v in node.items()}
        if isinstance(out.get("enum"), list) and all(isinstance(v, str) for v in out["enum"]):
            out["enum"] = sorted(out["enum"])
        return out
    if isinstance(node, list):
        return [_sorted_enums(v) for v in node]
    return node
