"""One changed field of a plan, as shown to people: every target's diff speaks it (the Cloud Run target's is
skills/targets/cloud_run/diff.py)."""

from __future__ import annotations

from pydantic import BaseModel


class FieldChange(BaseModel):
    path: str
    old: str | None = None  # None: absent
    new: str | None = None

    def line(self) -> str:
        if self.old is None:
            return f"+ {self.path}: {self.new}"
        if self.new is None:
            return f"- {self.path}: {self.old}"
        return f"~ {self.path}: {self.old} -> {self.new}"
