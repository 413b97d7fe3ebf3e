"""Which JSON members a Microsoft.App request body may carry, read from azure-mgmt-appcontainers' own models
(models/_models.py, generated from the Microsoft.App REST specification): every model's rest fields with their
REST names, and the model, list or map each one holds. The ACA stand-in refuses a member no model defines."""

from __future__ import annotations

import functools
from typing import Any

from azure.mgmt.appcontainers import models as _models

# (kind, model class or None): kind is "model", "list", "map" or "value"
Shape = tuple[str, Any]


def _model_in(deserializer: Any) -> Shape:
    """The shape a rest field's deserializer (a functools.partial chain in _utils/model_base.py) builds."""
    if not isinstance(deserializer, functools.partial):
        return ("value", None)
    name = getattr(deserializer.func, "__name__", "")
    args = deserializer.args
    if name == "_deserialize_model":
        return ("model", args[0])
    if name == "_deserialize_with_optional":
        return _model_in(args[0])
    if name == "_deserialize_sequence":
        inner = _model_in(args[0])
        return ("list", inner[1]) if inner[0] == "model" else ("value", None)
    if name == "_deserialize_dict":
        inner = _model_in(args[0])
        return ("map", inner[1]) if inner[0] == "model" else ("value", None)
    if name == "_deserialize_with_union":
        for d in args[0]:
            found = _model_in(d)
            if found[0] != "value":
                return found
    return ("value", None)


@functools.cache
def fields_of(model: Any) -> dict[str, tuple[Shape, bool]]:
    """REST name -> (shape, read-only) for a model class."""
    try:
        model()  # the generated base class fills _attr_to_rest_field on first use
    except TypeError:
        pass
    out: dict[str, tuple[Shape, bool]] = {}
    for rf in model._attr_to_rest_field.values():
        visibility = rf._visibility or []
        out[rf._rest_name] = (_model_in(rf._type), visibility == ["read"])
    return out


def unknown_member(body: Any, model: Any, path: str = "$") -> str | None:
    """The JSON path of the first member `model` does not define (read-only ones are known: ARM ignores them)."""
    if not isinstance(body, dict):
        return None
    known = fields_of(model)
    for key, value in body.items():
        if key not in known:
            return f"{path}.{key}"
        (kind, sub), _ = known[key]
        if kind == "model":
            bad = unknown_member(value, sub, f"{path}.{key}")
        elif kind == "list" and isinstance(value, list):
            bad = next(
                (b for i, v in enumerate(value) if (b := unknown_member(v, sub, f"{path}.{key}[{i}]")) is not None),
                None,
            )
        elif kind == "map" and isinstance(value, dict):
            bad = next(
                (b for k, v in value.items() if (b := unknown_member(v, sub, f"{path}.{key}.{k}")) is not None), None
            )
        else:
            bad = None
        if bad is not None:
            return bad
    return None


CONTAINER_APP = _models.ContainerApp
