"""Text, Markdown and code readers: decoding, binary detection, structure and line ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop.rag.errors import UnreadableFileError
from agenvoy_desktop.rag.readers import read_bytes, read_document
from agenvoy_desktop.rag.readers.formats import format_of, language_of
from agenvoy_desktop.rag.readers.textdecode import decode_text, split_lines


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.md", "markdown"),
        ("a.MD", "markdown"),
        ("a.txt", "text"),
        ("README", "text"),
        ("x.py", "code"),
        ("Makefile", "code"),
        ("x.rs", "code"),
        ("x.pdf", "pdf"),
        ("x.docx", "docx"),
        ("x.eml", "mail"),
        ("x.mbox", "mail"),
        ("x.png", None),
        ("noext", None),
    ],
)
def test_format_by_name(name: str, fmt: str | None) -> None:
    assert format_of(name) == fmt


def test_language_tags() -> None:
    assert language_of("a/b.py") == "python"
    assert language_of("main.go") == "go"
    assert language_of("notes.md") == ""


def test_utf8_bom_utf16_and_cp1252_fallback() -> None:
    assert decode_text("héllo".encode("utf-8-sig"), "a") == "héllo"
    assert decode_text("héllo\n".encode("utf-16"), "a") == "héllo\n"
    assert decode_text("café – ok".encode("cp1252"), "a") == "café – ok"


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        b"text then a NUL \x00 byte",
        bytes([0x81, 0x8D, 0x8F, 0x90]) * 10,  # neither UTF-8 nor cp1252
        bytes(range(1, 9)) * 50,  # control characters only
    ],
)
def test_binary_content_is_not_a_text_file(data: bytes) -> None:
    with pytest.raises(UnreadableFileError, match="not a text file") as caught:
        read_bytes(data, "notes/x.txt")
    assert caught.value.path == "notes/x.txt"
    assert "\n" not in str(caught.value)


def test_split_lines_matches_an_editor() -> None:
    assert split_lines("a\r\nb\rc\nd\n") == ("a", "b", "c", "d")
    assert split_lines("a\x0cb\u2028c") == ("a\x0cb\u2028c",)  # not line breaks in an editor
    assert split_lines("") == ()
    assert split_lines("\n") == ("",)


def test_plain_text_paragraphs_have_their_line_ranges() -> None:
    doc = read_bytes(b"one\ntwo\n\n\nthree\n", "t.txt")
    assert [(b.kind, b.start_line, b.end_line, b.text) for b in doc.blocks] == [
        ("paragraph", 1, 2, "one\ntwo"),
        ("paragraph", 5, 5, "three"),
    ]


MARKDOWN = """\
---
title: front
---
# Top

Intro
more intro

## Sub
### Deep
Deep text.

```sh
# a comment, not a heading
echo hi
```

Setext title
============

Closing #hashtag line.
"""


def test_markdown_structure() -> None:
    doc = read_bytes(MARKDOWN.encode(), "n/a.md")
    shape = [(b.kind, b.level, b.start_line, b.end_line) for b in doc.blocks]
    assert shape == [
        ("paragraph", 0, 1, 3),
        ("heading", 1, 4, 4),
        ("paragraph", 0, 6, 7),
        ("heading", 2, 9, 9),
        ("heading", 3, 10, 10),
        ("paragraph", 0, 11, 11),
        ("code", 0, 13, 16),
        ("heading", 1, 18, 19),
        ("paragraph", 0, 21, 21),
    ]
    assert [b.text for b in doc.blocks if b.kind == "heading"] == [
        "Top",
        "Sub",
        "Deep",
        "Setext title",
    ]


def test_unclosed_fence_runs_to_the_end() -> None:
    doc = read_bytes(b"# A\n```\n# not heading\n", "a.md")
    assert [(b.kind, b.start_line, b.end_line) for b in doc.blocks] == [
        ("heading", 1, 1),
        ("code", 2, 3),
    ]


def test_code_reader_keeps_lines_and_language() -> None:
    doc = read_bytes(b"def f():\n    return 1\n", "src/m.py")
    assert doc.format == "code"
    assert doc.language == "python"
    assert doc.lines == ("def f():", "    return 1")


def test_unknown_extension_is_tried_as_text() -> None:
    assert read_bytes(b"plain words", "notes/WEIRD.xyz").format == "text"


def test_read_document_reports_os_errors(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFileError, match="No such file"):
        read_document(tmp_path / "gone.md", "gone.md")


def test_empty_files_have_no_blocks() -> None:
    for name in ("a.md", "a.txt", "a.py"):
        assert read_bytes(b"", name).blocks == ()
