"""Finding: one disagreement between the memory layers, as reconciliation reports it.

Its own module because the store keeps what start-up found
(``MemoryStore.findings``) while the checks that make findings
(:mod:`reconcile`) build on the store.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement between layers, and whether it was repaired."""

    session_id: str | None
    kind: str
    detail: str
    repaired: bool
    notice: bool = False
    """Tell the user even outside ``doctor``: a file was set aside, or messages restored."""

    def __str__(self) -> str:
        where = f"[{self.session_id}] " if self.session_id else ""
        state = "repaired" if self.repaired else "found"
        return f"{state}: {where}{self.kind}: {self.detail}"
