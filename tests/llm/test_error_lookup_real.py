"""The error-memory lookup with the real embedding model and raw tool errors.

The lookup embeds a shortened form of the error (:func:`lookup_query`: no
tool prefix, paths cut to their last component, clipped).  These tests check
that the shortened query still finds the record a person would pick, for the
messages our own file tools produce, and that it costs fewer tokens.

Cosines are compared with a tolerance: llama.cpp sums in a different order on
a different CPU (or kernel set), and two records can sit closer than that
noise ("not found: the file does not exist" and "the path is a folder, not a
file" are 0.001 apart for a missing file).  Such a pair is a tie, and either
may come first; what must hold everywhere is that the right record is
returned as similar and is not beaten by more than the noise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop.core.error_memory import ErrorMemory
from agenvoy_desktop.core.error_types import lookup_query
from agenvoy_desktop.llm.embedder import Embedder

pytestmark = pytest.mark.slow

NOISE = 0.01
"""Largest cosine difference that still counts as a tie (see the module docstring)."""

DEEP = "/home/someone/Documents/projects/2026/agenvoy-notes/archive/old"
ALLOWED = "/home/someone/Documents/projects/2026/agenvoy-notes, /media/usb-stick/backup/notes"

RECORDS = {
    "outside": "permission denied: the file is outside the allowed folders",
    "missing": "not found: the file does not exist",
    "folder": "the path is a folder, not a file",
    "binary": "the file is a binary file, not text",
    "timeout": "the tool timed out after 10 s",
}

RAW_ERRORS = {
    "outside": f"read_text_file failed: PermissionError: permission denied: /etc/ssh/"
    f"sshd_config is outside the allowed folders ({ALLOWED})",
    "missing": f"read_text_file failed: FileNotFoundError: not found: {DEEP}/todo-2025.md",
    "folder": f"read_text_file failed: IsADirectoryError: {DEEP} is a folder (use list_files)",
    "binary": f"read_text_file failed: ValueError: {DEEP}/scan-0042.pdf is a binary file, not text",
    "timeout": f"read_text_file failed: TimeoutError: reading {DEEP}/huge.log timed out after 10 s",
}


@pytest.fixture
def memory(tmp_path: Path, minilm_embedder: Embedder) -> ErrorMemory:
    mem = ErrorMemory(tmp_path / "errors.sqlite3", minilm_embedder)
    for symptom in RECORDS.values():
        mem.add("read_text_file", symptom, outcome="resolved")
    # the same symptoms under another tool must never be returned
    mem.add("list_files", RECORDS["outside"], outcome="failed")
    return mem


@pytest.mark.parametrize("kind", sorted(RAW_ERRORS))
def test_raw_tool_errors_find_their_record_first(memory: ErrorMemory, kind: str) -> None:
    hints = memory.lookup_for_failure("read_text_file", RAW_ERRORS[kind])
    assert hints, kind
    assert all(h.record.tool == "read_text_file" for h in hints)
    ours = [h for h in hints if h.record.symptom == RECORDS[kind]]
    assert ours, [(h.record.symptom, h.score) for h in hints]
    assert ours[0].reason == "similar"
    assert ours[0].score >= hints[0].score - NOISE, [(h.record.symptom, h.score) for h in hints]


def test_the_query_is_much_shorter_than_the_error(minilm_embedder: Embedder) -> None:
    raw = list(RAW_ERRORS.values())
    short = [lookup_query("read_text_file", text) for text in raw]
    raw_tokens = sum(len(ids) for ids in minilm_embedder.tokenize(raw))
    short_tokens = sum(len(ids) for ids in minilm_embedder.tokenize(short))
    assert short_tokens < 0.6 * raw_tokens, (short_tokens, raw_tokens)
