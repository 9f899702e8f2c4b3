"""Chunks that follow a document's structure and can be cited.

A chunk is what search returns and the model reads: about a paragraph or a
function (``max_chars``, 1200 by default, is a ceiling, and consecutive small
pieces are packed up to it).  Chunks never mix two Markdown sections, two
code definitions that together are too long, two PDF pages or two mail
messages, so each keeps an honest heading trail ("A > B > C", a function's
signature, a mail subject) and a place: a line range, or a page.

For Markdown, plain text and code the chunk's text is exactly the source
lines of its range — except when one line alone is longer than
``max_chars``; then it is cut between sentences and each piece is a slice of
that line, with that line as its range.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, replace

from agenvoy_desktop.rag.codesplit import code_segments
from agenvoy_desktop.rag.documents import Block, Document
from agenvoy_desktop.rag.textsplit import pack_texts, split_line

MAX_CHARS = 1200
TRAIL_SEP = " > "
Range = tuple[int, int]


def citation_of(path: str, start: int | None, end: int | None, page: int | None) -> str:
    """Where a chunk is, as a person would write it: ``notes/a.md:12-30``, ``x.pdf p. 3``."""
    if page is not None:
        return f"{path} p. {page}"
    if start is None:
        return path
    if start == end:
        return f"{path}:{start}"
    return f"{path}:{start}-{end}"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One searchable, citable piece of a document.

    ``start_line``/``end_line`` (1-based, inclusive) for text formats and for
    a mail message's span in its file; ``page`` (1-based) for PDF.  ``id`` is
    stable: the same text at the same place in the same file hashes the same.
    """

    path: str
    start_line: int | None
    end_line: int | None
    page: int | None
    heading: str
    text: str
    id: str

    def citation(self) -> str:
        """Where the chunk is, as a person would write it (:func:`citation_of`)."""
        return citation_of(self.path, self.start_line, self.end_line, self.page)


def chunk_id(path: str, start: int | None, end: int | None, page: int | None, text: str) -> str:
    """The stable id: a hash of where the chunk is and what it says."""
    key = "\x00".join((path, str(start), str(end), str(page), text))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def make_chunk(
    path: str, text: str, heading: str = "", *, lines: Range | None = None, page: int | None = None
) -> Chunk:
    start, end = lines if lines is not None else (None, None)
    return Chunk(path, start, end, page, heading, text, chunk_id(path, start, end, page, text))


def chunk_document(document: Document, max_chars: int = MAX_CHARS) -> list[Chunk]:
    """*document* cut into chunks by its format's structure (see the module docstring)."""
    if max_chars < 20:
        raise ValueError("max_chars must be at least 20")
    if document.format in ("markdown", "text"):
        chunks = _markdown_chunks(document, max_chars)
    elif document.format == "code":
        chunks = _code_chunks(document, max_chars)
    elif document.format == "pdf":
        chunks = _page_chunks(document, max_chars)
    elif document.format == "mail":
        chunks = _mail_chunks(document, max_chars)
    else:
        chunks = _outline_chunks(document, max_chars)
    return _unique_ids(chunks)


def _unique_ids(chunks: Iterator[Chunk]) -> list[Chunk]:
    """Give a repeat of an earlier chunk (same place, same text) an id of its own.

    It happens: a Word document has no line numbers, and a sentence can
    repeat within one long line; an index keyed by id must not merge them.
    """
    out: list[Chunk] = []
    seen: dict[str, int] = {}
    for chunk in chunks:
        repeat = seen.get(chunk.id, 0)
        seen[chunk.id] = repeat + 1
        if not repeat:
            out.append(chunk)
            continue
        where = f"{chunk.path}#{repeat}"
        unique = chunk_id(where, chunk.start_line, chunk.end_line, chunk.page, chunk.text)
        out.append(replace(chunk, id=unique))
    return out


# -- line-based: Markdown and plain text ---------------------------------------------------


@dataclass
class _Section:
    trail: str
    ranges: list[Range]
    level: int = 0
    has_body: bool = False


def _sections(blocks: tuple[Block, ...]) -> list[_Section]:
    """Heading sections; a heading with no text of its own leads into its first subsection."""
    stack: list[tuple[int, str]] = []
    sections: list[_Section] = [_Section("", [])]
    for block in blocks:
        span = (block.start_line or 1, block.end_line or block.start_line or 1)
        last = sections[-1]
        if block.kind != "heading":
            last.ranges.append(span)
            last.has_body = True
            continue
        while stack and stack[-1][0] >= block.level:
            stack.pop()
        stack.append((block.level, block.text))
        carried: list[Range] = []
        if not last.has_body and (not last.ranges or last.level < block.level):
            carried = last.ranges
            sections.pop()
        trail = TRAIL_SEP.join(title for _, title in stack if title)
        sections.append(_Section(trail, [*carried, span], block.level))
    return [s for s in sections if s.ranges]


def _markdown_chunks(document: Document, max_chars: int) -> Iterator[Chunk]:
    for section in _sections(document.blocks):
        yield from _line_chunks(document, section.ranges, section.trail, max_chars)


# -- code -----------------------------------------------------------------------------------


def _code_chunks(document: Document, max_chars: int) -> Iterator[Chunk]:
    lines = document.lines
    group: list[Range] = []
    titles: list[str] = []
    for segment in code_segments(lines, document.language):
        span = _trim(lines, (segment.start, segment.end))
        if span is None:
            continue
        if group and _size(lines, (group[0][0], span[1])) > max_chars:
            yield from _line_chunks(document, group, _code_heading(titles), max_chars)
            group, titles = [], []
        group.append(span)
        if segment.title:
            titles.append(segment.title)
    if group:
        yield from _line_chunks(document, group, _code_heading(titles), max_chars)


def _code_heading(titles: list[str]) -> str:
    return ", ".join(titles[:3]) + (", ..." if len(titles) > 3 else "")


# -- the line packer shared by Markdown, text and code -------------------------------------


LEAD_IN_SHARE = 4
"""A piece under this share of a chunk joins the cut of the too-big range after it."""


def _line_chunks(
    document: Document, ranges: list[Range], heading: str, max_chars: int
) -> Iterator[Chunk]:
    """Pack consecutive *ranges* into chunks of at most *max_chars* (ranges too big are cut).

    A short piece (a heading, a lead-in line) right before a range that has
    to be cut anyway starts the cut instead of standing alone: a chunk that
    is only "## Setup" matches searches for the heading and says nothing.
    """
    lines = document.lines
    current: Range | None = None
    for next_span in ranges:
        span = next_span
        if current is not None and _size(lines, (current[0], span[1])) <= max_chars:
            current = (current[0], span[1])
            continue
        if (
            current is not None
            and _size(lines, span) > max_chars
            and _size(lines, current) < max_chars // LEAD_IN_SHARE
        ):
            span, current = (current[0], span[1]), None
        if current is not None:
            yield _line_chunk(document, current, heading)
            current = None
        if _size(lines, span) <= max_chars:
            current = span
            continue
        for window in _windows(lines, span, max_chars):
            if _size(lines, window) <= max_chars:
                yield _line_chunk(document, window, heading)
            else:
                for piece in split_line(lines[window[0] - 1], max_chars):
                    yield make_chunk(document.path, piece, heading, lines=window)
    if current is not None:
        yield _line_chunk(document, current, heading)


def _windows(lines: tuple[str, ...], span: Range, max_chars: int) -> Iterator[Range]:
    """*span* as line windows of at most *max_chars*, preferring to break after a blank line."""
    start = span[0]
    while start <= span[1]:
        end = start
        best_break: int | None = None
        while end < span[1] and _size(lines, (start, end + 1)) <= max_chars:
            end += 1
            if not lines[end - 1].strip() and _size(lines, (start, end)) >= max_chars // 2:
                best_break = end
        if end < span[1] and best_break is not None:
            end = best_break
        trimmed = _trim(lines, (start, end))
        if trimmed is not None:
            yield trimmed
        start = end + 1


def _trim(lines: tuple[str, ...], span: Range) -> Range | None:
    """*span* without its leading and trailing blank lines (``None`` if nothing is left)."""
    start, end = span
    while start <= end and not lines[start - 1].strip():
        start += 1
    while end >= start and not lines[end - 1].strip():
        end -= 1
    return (start, end) if start <= end else None


def _size(lines: tuple[str, ...], span: Range) -> int:
    return sum(len(line) for line in lines[span[0] - 1 : span[1]]) + span[1] - span[0]


def _line_chunk(document: Document, span: Range, heading: str) -> Chunk:
    text = "\n".join(document.lines[span[0] - 1 : span[1]])
    return make_chunk(document.path, text, heading, lines=span)


# -- extracted text: PDF, Word, mail ----------------------------------------------------------


def _page_chunks(document: Document, max_chars: int) -> Iterator[Chunk]:
    pages: dict[int, list[str]] = {}
    for block in document.blocks:
        pages.setdefault(block.page or 1, []).append(block.text)
    for page, texts in pages.items():
        for text in pack_texts(texts, max_chars):
            yield make_chunk(document.path, text, page=page)


def _mail_chunks(document: Document, max_chars: int) -> Iterator[Chunk]:
    for block in document.blocks:
        where = None
        if block.start_line is not None and block.end_line is not None:
            where = (block.start_line, block.end_line)
        paragraphs = [p for p in block.text.split("\n\n") if p.strip()]
        for text in pack_texts(paragraphs, max_chars):
            yield make_chunk(document.path, text, block.title, lines=where)


def _outline_chunks(document: Document, max_chars: int) -> Iterator[Chunk]:
    """Word documents: heading sections, paragraphs packed within each."""
    stack: list[tuple[int, str]] = []
    texts: list[str] = []
    has_body = False
    trail = ""
    for block in document.blocks:
        if block.kind != "heading":
            texts.append(block.text)
            has_body = True
            continue
        if has_body:
            for text in pack_texts(texts, max_chars):
                yield make_chunk(document.path, text, trail)
            texts, has_body = [], False
        while stack and stack[-1][0] >= block.level:
            stack.pop()
        stack.append((block.level, block.text))
        trail = TRAIL_SEP.join(title for _, title in stack)
        texts.append(block.text)
    for text in pack_texts(texts, max_chars):
        yield make_chunk(document.path, text, trail)
