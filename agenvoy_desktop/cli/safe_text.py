"""Stored text made safe to print on a terminal.

Titles, messages, tool results, file names and model metadata come from
conversations, documents and downloads: any of them can hold terminal
escapes (``ESC [2J`` clears the screen, ``ESC ]0;…BEL`` retitles the
window, an 8-bit CSI does the same on some terminals) or bidi overrides
that make a line read differently from what it holds.  The CLI prints such
text only through these functions, which show each control character as
its escape (``\\x1b``, ``\\u202e``); the stored data is never changed.

:func:`shown` keeps newlines and tabs (multi-line output such as an answer
or a system prompt); :func:`shown_line` escapes them too, for a field of a
one-line listing; :func:`json_shown` escapes, as JSON ``\\uXXXX``, what JSON
itself leaves raw, so the parsed value stays exactly the stored one.
"""

from __future__ import annotations

import re

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Marks and overrides that reorder how a line is displayed (Trojan Source)."""
LINE_BREAKS = "\u0085\u2028\u2029"
"""Unicode line breaks some terminals act on; NEL is also a C1 control."""

_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}{LINE_BREAKS}]")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}{LINE_BREAKS}]")
_RAW_IN_JSON = re.compile(f"[\x7f-\x9f{BIDI_CONTROLS}{LINE_BREAKS}]")
"""What ``json.dumps(..., ensure_ascii=False)`` writes raw although a terminal acts on it."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """*text* with every control character escaped except newline and tab (a CRLF line end
    is a line end: a model's or a Windows file's "\\r\\n" is shown as a newline)."""
    return _UNSAFE.sub(_escaped, text.replace("\r\n", "\n"))


def shown_line(text: str) -> str:
    """*text* as one field of a line: newlines and tabs escaped as well."""
    return _UNSAFE_IN_LINE.sub(_escaped, text)


def json_shown(dumped: str) -> str:
    """JSON text (``ensure_ascii=False``) with the controls JSON leaves raw as ``\\uXXXX``.

    They can only occur inside JSON strings, where the escape means the
    same character: a reader gets the stored value back unchanged.
    """
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
