"""Memory sizes as Kubernetes-style quantities (`32Gi`, `16384Mi`), the form Cloud Run and the profiles use."""

from __future__ import annotations

import re

from skills.errors import InvalidInput


def gib(memory: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Gi|Mi|G|M)", memory.strip())
    if not m:
        raise InvalidInput(f"Memory `{memory}` is not a Cloud Run size.", "Use e.g. `32Gi` or `16384Mi`.")
    n, unit = float(m.group(1)), m.group(2)
    return n if unit in ("Gi", "G") else n / 1024
