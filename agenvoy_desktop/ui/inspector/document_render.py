"""The Documents tab's text: collection lines, search hits and chunks as HTML, prose reflowed.

Pure functions of what the operations return, so the tab stays about
widgets and the look of a hit can be tested without a window.
"""

from __future__ import annotations

import re

from agenvoy_desktop.operations import documents as ops
from agenvoy_desktop.rag.search import DocumentHit
from agenvoy_desktop.ui.inspector.common import esc, local_time, plural
from agenvoy_desktop.ui.inspector.recall_tab import clip_around, highlight, query_terms
from agenvoy_desktop.ui.markdown_view import CITE_SCHEME

HIT_CHARS = 700
SCORE_NAMES = {"semantic": "similarity", "keyword": "relevance", "hybrid": "fused"}
PROSE_SUFFIXES = (".md", ".markdown", ".txt", ".rst", ".pdf", ".docx", ".eml", ".mbox")
_BLOCK_START = re.compile(r" {4}|\t| {0,3}(?:[-*+>|#]|\d+[.)]\s|```)")
"""A line that starts its own block: indented code, a list item, a quote, a table, a fence."""


def collection_line(view: ops.CollectionView, *, watching: bool = False) -> str:
    """One line for the list: name, counts, when it was indexed (or why not), and watching."""
    watched = " · watching" if watching else ""
    if view.problem:
        return f"{view.name} — {view.problem}{watched}"
    if not view.indexed:
        return f"{view.name} — not indexed yet: choose Re-index{watched}"
    parts = [plural(view.files, "file"), plural(view.chunks, "chunk")]
    if view.failed:
        parts.append(f"{view.failed:,} failed")
    parts.append(f"indexed {local_time(view.last_indexed_ns)}")
    return f"{view.name} — " + " · ".join(parts) + watched


def marked_terms(query: str) -> list[str]:
    """The query's words worth marking: short ones (to, of) would light up inside other words."""
    return [t for t in query_terms(query) if len(t) > 2 or not t.isascii()]


def reflow(text: str, path: str) -> str:
    """Prose with its source line breaks joined (paragraphs, lists and code keep theirs)."""
    if not path.lower().endswith(PROSE_SUFFIXES):
        return text
    out: list[str] = []
    for line in text.split("\n"):
        joinable = out and out[-1].strip() and line.strip() and not _BLOCK_START.match(line)
        after_block = out and (
            out[-1].startswith(("    ", "\t")) or out[-1].lstrip().startswith(("#", "|", "```"))
        )
        if joinable and not after_block:
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


def render_hits(hits: list[DocumentHit], query: str, mode: str) -> str:
    """Search results as HTML: rank and score, a clickable citation, the excerpt marked."""
    terms = marked_terms(query)
    label = SCORE_NAMES.get(mode, "score")
    blocks = []
    for rank, hit in enumerate(hits, start=1):
        badge = (
            f"<span style='background:#1565c0; color:white;'>&nbsp;#{rank} · "
            f"{label} {hit.score:.3f}&nbsp;</span>"
        )
        where = f"<a href='{CITE_SCHEME}{esc(hit.citation)}'>{esc(hit.citation)}</a>"
        trail = f"<br><span style='color: gray;'>{esc(hit.heading)}</span>" if hit.heading else ""
        text = reflow(hit.text, hit.path)
        body = highlight(clip_around(text, terms, HIT_CHARS), terms)
        blocks.append(
            "<table width='100%' cellspacing='0' cellpadding='5' style='border-left: 3px solid"
            " #1565c0; background: rgba(21,101,192,0.06); margin-bottom: 8px;'><tr><td>"
            f"{badge} {where}{trail}<br><span style='white-space: pre-wrap;'>{body}</span>"
            "</td></tr></table>"
        )
    return "".join(blocks)


def render_chunks(chunks: list[ops.ChunkView]) -> str:
    """A file's chunks as HTML: heading trail, place, text."""
    out = []
    for chunk in chunks:
        trail = f"<b>{esc(chunk.heading)}</b> · " if chunk.heading else ""
        out.append(
            f"<p style='margin: 10px 0 2px 0;'>{trail}<span style='color: gray;'>"
            f"{esc(chunk.place)}</span></p>"
            f"<div style='white-space: pre-wrap; margin-left: 8px; font-family: monospace;'>"
            f"{esc(chunk.text)}</div>"
        )
    return "".join(out)


def collection_tip(view: ops.CollectionView) -> str:
    """The list row's tooltip: folders, patterns, and how much can be searched by meaning."""
    lines = ["Folders and files:", *(f"  {root}" for root in view.roots)]
    if view.include:
        lines.append(f"Only: {' '.join(view.include)}")
    if view.exclude:
        lines.append(f"Leaving out: {' '.join(view.exclude)}")
    if view.indexed:
        lines.append(f"{plural(view.vectors, 'vector')} for search by meaning")
    return "\n".join(lines)
