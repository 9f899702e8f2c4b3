"""Hostile or damaged files: every reader either reads them or gives a reason, never crashes."""

from __future__ import annotations

import io
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenvoy_desktop.rag.chunking import chunk_document
from agenvoy_desktop.rag.errors import UnreadableFileError
from agenvoy_desktop.rag.readers import read_bytes, word
from tests.rag.builders import make_docx, make_mbox, make_message, make_pdf

NAMES = ["a.md", "a.txt", "a.py", "a.rs", "a.pdf", "a.docx", "a.eml", "a.mbox", "a.xyz"]
_PDF = make_pdf([["Some text here.", "More"], ["Page two"]])
_DOCX = make_docx([("h1", "Head"), ("p", "Body text")])
_MBOX = make_mbox([make_message("S", "body"), make_message("T", "", html="<p>x</p>")])
SEEDS = {"a.pdf": _PDF, "a.docx": _DOCX, "a.mbox": _MBOX, "a.eml": _MBOX.split(b"\n", 1)[1]}
_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_or_reason(data: bytes, name: str) -> None:
    reason = ""
    try:
        chunk_document(read_bytes(data, name))
    except UnreadableFileError as exc:
        reason = str(exc) if exc.reason else "no reason"
    assert reason != "no reason"
    assert "\n" not in reason


@_SETTINGS
@given(data=st.binary(max_size=3000), name=st.sampled_from(NAMES))
def test_random_bytes(data: bytes, name: str) -> None:
    _read_or_reason(data, name)


@_SETTINGS
@given(
    name=st.sampled_from(sorted(SEEDS)),
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=8)), max_size=6),
    truncate=st.integers(0, 10**6),
)
def test_damaged_real_files(name: str, cuts: list[tuple[int, bytes]], truncate: int) -> None:
    data = bytearray(SEEDS[name])
    for position, junk in cuts:
        at = position % len(data)
        data[at : at + len(junk)] = junk
    _read_or_reason(bytes(data[: max(1, truncate % (len(data) + 1))]), name)


def test_a_docx_that_inflates_too_far_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word, "MAX_INFLATED_BYTES", 1_000_000)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_DOCX)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename), compress_type=zipfile.ZIP_DEFLATED)
        target.writestr("word/media/huge.bin", b"\x00" * 2_000_000, zipfile.ZIP_DEFLATED)
    with pytest.raises(UnreadableFileError, match="too large"):
        read_bytes(out.getvalue(), "bomb.docx")
