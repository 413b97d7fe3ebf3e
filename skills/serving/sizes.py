"""Memory sizes: the one reader of a memory quantity, for plans, prices, the sandbox and diagnosis alike.

Cloud Run's memory limit is a Kubernetes resource quantity (the Admin API v2's `resources.limits["memory"]`;
Cloud Run's "Configure memory limits" page, cloud.google.com/run/docs/configuring/services/memory-limits, writes
its maximum as "32 gibibyte (32 Gi)"). Kubernetes' meaning of memory units ("Resource Management for Pods and
Containers", kubernetes.io/docs/concepts/configuration/manage-resources-containers/#meaning-of-memory): the
suffixes k, M, G, T are powers of 1000 and Ki, Mi, Gi, Ti powers of 1024; a plain number is bytes; suffixes are
case-sensitive (a lower-case `m` is milli, not mega). So `32G` is 29.8 GiB, not 32: two readers that disagreed
on this priced and planned one service differently (issue 44).
"""

from __future__ import annotations

import re

from skills.errors import InvalidInput

_BYTES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_QUANTITY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|k|M|G|T)?\s*")


def gib(memory: str) -> float:
    """A memory quantity (`32Gi`, `16384Mi`, `32G`) in GiB; InvalidInput for anything else."""
    m = _QUANTITY.fullmatch(memory)
    if not m:
        raise InvalidInput(
            f"Memory `{memory}` is not a Cloud Run memory size.",
            "Use a number with a unit: `32Gi` or `16384Mi` (binary), or `32G` (decimal: 10^9 bytes).",
        )
    return float(m.group(1)) * _BYTES[m.group(2) or ""] / 2**30
