"""Where a source file's top-level definitions start and end, for chunks a reader can cite.

Python is parsed with :mod:`ast` (exact, decorators included).  Other
languages get a heuristic that is right for most real code: a line at
indentation 0 that starts a definition (``def``, ``function``, ``class``,
``fn``, ``func``, ``struct``, ``impl`` ...), together with the comment,
attribute or decorator lines directly above it.  A file where neither finds
anything is one segment, which the chunker cuts into line windows.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_MODIFIERS = (
    r"(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|internal|static|async"
    r"|abstract|final|sealed|open|override|inline|extern|unsafe|const|data|case|partial)\s+)*"
)
_KEYWORDS = (
    r"(?:def|function\*?|class|fn|func|interface|struct|enum|impl|trait|type|module|sub|proc"
    r"|procedure|package|object|namespace|record|union|macro_rules!|defmodule|defn|defun"
    r"|local\s+function|template)\b"
)
_DEFINITION = re.compile(_MODIFIERS + _KEYWORDS)
_C_SIGNATURE = re.compile(r"[A-Za-z_][\w\s\*&:<>,]*?[\s\*&]\**([A-Za-z_][\w:~]*)\s*\([^;]*$")
_C_LANGUAGES = frozenset({"c", "cpp", "objc"})
_NOT_SIGNATURE = re.compile(r"(?:if|for|while|switch|return|else|do|case|typedef)\b")
_LEAD_IN = re.compile(r"(?://|/\*|\*|#|@|--|;|\[|'''|\"\"\")")


@dataclass(frozen=True, slots=True)
class Segment:
    """Lines ``start``..``end`` (1-based, inclusive); ``title`` names a definition ("" if none)."""

    start: int
    end: int
    title: str = ""


def code_segments(lines: tuple[str, ...], language: str) -> list[Segment]:
    """Consecutive segments covering every line of a source file."""
    if not lines:
        return []
    starts: list[tuple[int, str]] | None = None
    if language == "python":
        starts = _python_starts(lines)
    if starts is None:
        starts = _heuristic_starts(lines, language)
    return _partition(len(lines), starts)


def _partition(total: int, starts: list[tuple[int, str]]) -> list[Segment]:
    """Segments from (first line, title) marks; a title "" marks plain module code."""
    marks = sorted({line: title for line, title in starts if 1 <= line <= total}.items())
    if not marks or marks[0][0] != 1:
        marks.insert(0, (1, ""))
    segments = []
    for index, (line, title) in enumerate(marks):
        end = marks[index + 1][0] - 1 if index + 1 < len(marks) else total
        segments.append(Segment(line, end, title))
    return segments


def _python_starts(lines: tuple[str, ...]) -> list[tuple[int, str]] | None:
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    starts: list[tuple[int, str]] = []
    previous_end = 0
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            kind = {ast.ClassDef: "class", ast.AsyncFunctionDef: "async def"}.get(type(node), "def")
            starts.append((_lead_in(lines, first, previous_end), f"{kind} {node.name}"))
        elif starts and starts[-1][1]:
            starts.append((previous_end + 1, ""))
        previous_end = node.end_lineno or node.lineno
    return starts


def _heuristic_starts(lines: tuple[str, ...], language: str) -> list[tuple[int, str]]:
    starts: list[tuple[int, str]] = []
    previous_end = 0
    for number, line in enumerate(lines, 1):
        if not line or line[0].isspace() or not _starts_definition(line, language):
            continue
        starts.append((_lead_in(lines, number, previous_end), _title(line)))
        previous_end = number
    return starts


def _starts_definition(line: str, language: str) -> bool:
    if _DEFINITION.match(line):
        return True
    return (
        language in _C_LANGUAGES
        and _NOT_SIGNATURE.match(line) is None
        and _C_SIGNATURE.match(line) is not None
    )


def _lead_in(lines: tuple[str, ...], first: int, floor: int) -> int:
    """*first* moved up over the comment/decorator lines directly above it (not past *floor*)."""
    while first - 1 > floor:
        above = lines[first - 2]
        if not above.strip() or above[0].isspace() or not _LEAD_IN.match(above):
            break
        first -= 1
    return first


def _title(line: str) -> str:
    title = " ".join(line.split()).rstrip("{:= ").strip()
    return title if len(title) <= 80 else title[:77] + "..."
