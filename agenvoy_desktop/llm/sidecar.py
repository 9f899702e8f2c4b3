"""The ``<model>.sha256`` sidecar: what a prepared model file was when it was made.

A small JSON file next to the model records its name, sha256, size and
mtime (plus whatever the preparer adds: converter version, source).  A start
whose file still has the recorded size and mtime costs one ``stat`` instead
of hashing hundreds of megabytes; a file with the same size but another
mtime (touched, copied) is worth hashing again; any other file is not the
one recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from agenvoy_desktop.core.atomic import atomic_write_text

FileState = Literal["unchanged", "touched", "changed"]


def sidecar_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def read_sidecar(sidecar: Path) -> dict[str, Any] | None:
    """The record, or None when it is missing or unreadable (the file is then re-checked)."""
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def file_state(target: Path, record: Mapping[str, Any]) -> FileState:
    """*target* against its record: "unchanged" (size and mtime as recorded),
    "touched" (same size, another mtime: hash it to know) or "changed"
    (another size, or gone)."""
    try:
        st = target.stat()
    except OSError:
        return "changed"
    if st.st_size != record.get("size"):
        return "changed"
    return "unchanged" if st.st_mtime_ns == record.get("mtime_ns") else "touched"


def write_sidecar(sidecar: Path, target: Path, **fields: object) -> None:
    """Record *target*'s name, size and mtime now, plus *fields* (sha256 among them)."""
    st = target.stat()
    record = {"file": target.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, **fields}
    atomic_write_text(sidecar, json.dumps(record, indent=1, sort_keys=True) + "\n")
