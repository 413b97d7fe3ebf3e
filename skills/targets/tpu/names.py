"""Cloud TPU names, checked before any client call: a TPU service's name is both its queued resource id and its
node id (skills/targets/tpu/target.py), and each is spliced into API paths.

The rule: a Compute Engine resource name (RFC 1035): a lower-case letter, then lower-case letters, digits or '-',
not ending in '-', 1 to 63 characters: `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`. Sources: a TPU VM is a Compute Engine
VM, and Compute Engine answers a name outside that pattern with "Invalid value for field 'resource.name': ... Must
be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"; Google's own TPU tool ctpu checks TPU names against
`^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$` for that reason (tensorflow/tpu issue #90, 2018); the format is stated at
https://cloud.google.com/compute/docs/naming-resources#resource-name-format ("1-63 characters ... first character
must be a lowercase letter ... last character cannot be a hyphen", as hashicorp/terraform-provider-google commit
e911480 quotes it). The Cloud TPU API reference states only a looser pattern for NodeSpec.node_id
(google-cloud-tpu tpu_v2alpha1 docs: "Should follow the ^[A-Za-z0-9_.+%-]+$ regex format"); none of the docs read
here states a TPU-specific rule, so the stricter Compute Engine one is checked (the sandbox's stand-in,
bot/sandbox/tpu_api.py, refuses the same).
"""

from __future__ import annotations

import re

from skills.errors import InvalidInput

MAX_LEN = 63
_NODE_ID = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


def valid_node_id(name: str) -> bool:
    return bool(_NODE_ID.fullmatch(name or ""))


def check_node_id(name: str) -> str:
    """`name` when it is a valid Cloud TPU node (and queued resource) id, else InvalidInput saying what is wrong."""
    if valid_node_id(name):
        return name
    shown = repr(name[:70]) + ("…" if len(name) > 70 else "")
    if len(name) > MAX_LEN:
        why = f"longer than {MAX_LEN} characters"
    elif not name or not ("a" <= name[0] <= "z"):
        why = "it must start with a lower-case letter"
    elif name.endswith("-"):
        why = "it cannot end with '-'"
    else:
        why = "only lower-case letters, digits and '-' are allowed"
    raise InvalidInput(
        f"{shown} is not a Cloud TPU node id ({why}).",
        "Pick another `--service` name, like `vllm-gemma4-tpu`: lower-case letters, digits and '-', starting with "
        f"a letter, at most {MAX_LEN}.",
    )
