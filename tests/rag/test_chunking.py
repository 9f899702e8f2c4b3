"""Chunks follow structure, keep exact line ranges and heading trails, and have stable ids."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenvoy_desktop.rag.chunking import Chunk, chunk_document
from agenvoy_desktop.rag.documents import Document
from agenvoy_desktop.rag.readers import read_bytes
from agenvoy_desktop.rag.readers.textdecode import split_lines

_LINE = st.one_of(
    st.just(""),
    st.just("   "),
    st.sampled_from(["# A", "## B", "### C", "#", "```", "~~~", "---", "===", "def f():", "}"]),
    st.sampled_from(["class K:", "    return 1", "fn main() {", "@decorator", "// note"]),
    st.text(alphabet="abc xyz.!?#-=`\t", min_size=1, max_size=40),
    st.text(alphabet="lorem ipsum. dolor sit! amet?", min_size=200, max_size=700),
)
_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_exact_ranges(source: str, chunks: list[Chunk], max_chars: int) -> None:
    """Every chunk is its source range verbatim (or a slice of one over-long line)."""
    lines = split_lines(source)
    covered: set[int] = set()
    for chunk in chunks:
        assert chunk.start_line is not None
        assert chunk.end_line is not None
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert len(chunk.text) <= max_chars
        exact = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        if chunk.text != exact:
            assert chunk.start_line == chunk.end_line
            assert len(exact) > max_chars
            assert chunk.text in exact
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    assert {n for n, line in enumerate(lines, 1) if line.strip()} <= covered
    starts = [(c.start_line or 0) for c in chunks]
    assert starts == sorted(starts)


@_SETTINGS
@given(
    lines=st.lists(_LINE, max_size=60),
    name=st.sampled_from(["a.md", "a.txt", "a.py", "a.rs", "a.js", "a.c", "a.json"]),
    max_chars=st.sampled_from([60, 300, 1200]),
)
def test_chunks_are_their_source_lines(lines: list[str], name: str, max_chars: int) -> None:
    source = "\n".join(lines)
    doc = read_bytes(source.encode(), f"dir/{name}")
    _check_exact_ranges(source, chunk_document(doc, max_chars), max_chars)


def _md(text: str) -> Document:
    return read_bytes(text.encode(), "notes/n.md")


def test_markdown_heading_trails() -> None:
    source = "intro\n\n# A\n\ntext a\n\n## B\n### C\n\ntext c\n\n## D\ntext d\n\n# E\ntext e\n"
    chunks = chunk_document(_md(source))
    assert [(c.heading, c.start_line, c.end_line) for c in chunks] == [
        ("", 1, 1),
        ("A", 3, 5),
        ("A > B > C", 7, 10),  # B has no text of its own: it leads into C
        ("A > D", 12, 13),
        ("E", 15, 16),
    ]


def test_markdown_sections_never_mix_even_when_small() -> None:
    chunks = chunk_document(_md("# A\none\n# B\ntwo\n"))
    assert [c.text for c in chunks] == ["# A\none", "# B\ntwo"]


def test_markdown_paragraphs_pack_up_to_the_limit() -> None:
    paragraphs = [f"Paragraph {i}. " + "words " * 40 for i in range(12)]
    source = "# Title\n\n" + "\n\n".join(paragraphs) + "\n"
    chunks = chunk_document(_md(source), max_chars=1200)
    assert len(chunks) >= 3
    assert all(len(c.text) <= 1200 for c in chunks)
    assert all(c.heading == "Title" for c in chunks)
    assert all(len(c.text) >= 600 for c in chunks[:-1])  # packed, not one per paragraph
    _check_exact_ranges(source, chunks, 1200)


def test_a_heading_before_a_long_list_starts_its_first_chunk() -> None:
    items = [f"- item {i}: " + "words " * 12 for i in range(40)]
    source = "# Title\n\n## Where to make changes\n\n" + "\n".join(items) + "\n"
    chunks = chunk_document(_md(source), max_chars=1200)
    assert chunks[0].text.startswith("# Title")
    assert "- item 0" in chunks[0].text  # never a chunk of headings alone
    assert all("- item" in c.text for c in chunks)
    _check_exact_ranges(source, chunks, 1200)


def test_a_soft_wrapped_paragraph_is_cut_between_sentences() -> None:
    line = " ".join(f"Sentence number {i} is here." for i in range(80))
    chunks = chunk_document(_md(f"# T\n\n{line}\n"), max_chars=300)
    body = [c for c in chunks if c.start_line == 3]
    assert len(body) > 3
    assert all(c.text.endswith(".") and c.text.startswith("Sentence") for c in body)
    assert " ".join(c.text for c in body) == line


def test_ids_are_stable_and_local() -> None:
    source = "# A\none\n\n# B\ntwo\n"
    first = chunk_document(_md(source))
    assert [c.id for c in first] == [c.id for c in chunk_document(_md(source))]
    edited = chunk_document(_md(source.replace("two", "TWO")))
    assert edited[0].id == first[0].id
    assert edited[1].id != first[1].id
    moved = chunk_document(read_bytes(source.encode(), "other/n.md"))
    assert moved[0].id != first[0].id
    assert len({c.id for c in first}) == len(first)


PYTHON = '''\
"""Module doc."""

import os

CONSTANT = 1


# Helper comment
@decorator
def helper(x):
    return x


class Thing:
    """A thing."""

    def method(self):
        return os.sep


async def run():
    pass
'''


def test_python_chunks_by_top_level_definition() -> None:
    doc = read_bytes(PYTHON.encode(), "src/m.py")
    chunks = chunk_document(doc, max_chars=60)
    got = [(c.heading, c.start_line, c.end_line) for c in chunks]
    assert got[0] == ("", 1, 5)
    assert ("def helper", 8, 11) in got
    assert [h for h, _, _ in got if h.startswith("class")] == ["class Thing"] * sum(
        1 for h, _, _ in got if h == "class Thing"
    )
    assert got[-1] == ("async def run", 21, 22)
    _check_exact_ranges(PYTHON, chunks, 60)


def test_small_definitions_are_packed_together() -> None:
    chunks = chunk_document(read_bytes(PYTHON.encode(), "src/m.py"))
    assert len(chunks) == 1
    assert chunks[0].heading == "def helper, class Thing, async def run"
    assert chunks[0].text == PYTHON.rstrip("\n")


def test_python_with_a_syntax_error_falls_back_to_the_heuristic() -> None:
    source = "def ok():\n    pass\n\ndef broken(:\n    pass\n"
    chunks = chunk_document(read_bytes(source.encode(), "x.py"), max_chars=25)
    assert [c.heading for c in chunks] == ["def ok()", "def broken("]


@pytest.mark.parametrize(
    ("name", "source", "headings"),
    [
        (
            "lib.rs",
            "use std::io;\n\n/// Docs.\n#[inline]\npub fn main() {\n    run();\n}\n\n"
            "impl Foo {\n    fn x() {}\n}\n",
            ["", "pub fn main()", "impl Foo"],
        ),
        (
            "app.js",
            "const a = 1;\n\nexport function go() {\n  return a;\n}\n\n"
            "class Box {\n  open() {}\n}\n",
            ["", "export function go()", "class Box"],
        ),
        (
            "main.go",
            "package main\n\nfunc main() {\n\tfmt.Println()\n}\n\ntype T struct {\n\tA int\n}\n",
            ["package main", "func main()", "type T struct"],
        ),
        (
            "m.c",
            "#include <stdio.h>\n\nstatic int add(int a, int b)\n{\n  return a + b;\n}\n\n"
            "int main(void) {\n  if (x) {\n  }\n  return 0;\n}\n",
            ["", "static int add(int a, int b)", "int main(void)"],
        ),
    ],
)
def test_other_languages_by_top_level_blocks(name: str, source: str, headings: list[str]) -> None:
    chunks = chunk_document(read_bytes(source.encode(), name), max_chars=40)
    assert list(dict.fromkeys(c.heading for c in chunks)) == headings
    _check_exact_ranges(source, chunks, 40)


def test_code_without_definitions_is_cut_in_line_windows() -> None:
    source = "\n".join(f'  "key{i}": {i},' for i in range(200))
    chunks = chunk_document(read_bytes(source.encode(), "data.json"), max_chars=300)
    assert len(chunks) > 10
    assert all(c.heading == "" for c in chunks)
    _check_exact_ranges(source, chunks, 300)


def test_citations() -> None:
    chunks = chunk_document(_md("# A\none\ntwo\n\n# B\nthree"))
    assert [c.citation() for c in chunks] == ["notes/n.md:1-3", "notes/n.md:5-6"]
    single = chunk_document(_md("solo"))
    assert single[0].citation() == "notes/n.md:1"


def test_max_chars_must_be_sensible() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        chunk_document(_md("x"), max_chars=5)


def test_an_empty_heading_leads_only_into_its_own_subsections() -> None:
    chunks = chunk_document(_md("# A\n# B\ntext b\n## C\n# D\n"))
    assert [(c.heading, c.text) for c in chunks] == [
        ("A", "# A"),
        ("B", "# B\ntext b"),
        ("B > C", "## C"),
        ("D", "# D"),
    ]


def test_repeated_text_without_a_place_still_gets_unique_ids() -> None:
    from tests.rag.builders import make_docx

    data = make_docx([("h1", "A"), ("p", "TBD"), ("h1", "A"), ("p", "TBD")])
    chunks = chunk_document(read_bytes(data, "w.docx"))
    assert [c.text for c in chunks] == ["A\n\nTBD", "A\n\nTBD"]
    assert len({c.id for c in chunks}) == 2
    line = "Same again. " * 40
    pieces = chunk_document(read_bytes(line.encode(), "t.txt"), max_chars=30)
    assert len({c.id for c in pieces}) == len(pieces)
