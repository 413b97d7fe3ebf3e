"""Cloud Run service names, checked before any client call: a name is spliced into API paths and filters.

The rule, from Cloud Run Admin API v2 (`CreateServiceRequest.service_id` in google-cloud-run 0.16.2,
google/cloud/run_v2/types/service.py): "It must begin with letter, and cannot end with hyphen; must contain
fewer than 50 characters". The API's own error spells out the alphabet: "Service name must use only
letters, numbers and '-'" (gcloud INVALID_ARGUMENT, metadata.name), lower case as RFC 1035 labels are.
"""

from __future__ import annotations

import re

from skills.errors import InvalidInput

MAX_LEN = 49
_NAME = re.compile(r"[a-z](?:[a-z0-9-]{0,47}[a-z0-9])?", re.ASCII)


def check_service_name(name: str) -> str:
    """`name` when it is a valid Cloud Run service name, else InvalidInput saying what is wrong."""
    if _NAME.fullmatch(name or ""):
        return name
    shown = repr(name[:60]) + ("…" if len(name) > 60 else "")
    if len(name) > MAX_LEN:
        why = f"longer than {MAX_LEN} characters"
    elif not name or not name[0].isascii() or not name[0].isalpha() or not name[0].islower():
        why = "it must start with a lower-case letter"
    elif name.endswith("-"):
        why = "it cannot end with '-'"
    else:
        why = "only lower-case letters, digits and '-' are allowed"
    raise InvalidInput(
        f"{shown} is not a Cloud Run service name ({why}).",
        "Use a name like `vllm-gemma4`: lower-case letters, digits and '-', starting with a letter, at most 49.",
    )
