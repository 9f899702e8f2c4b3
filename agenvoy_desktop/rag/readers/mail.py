"""Mail: one ``.eml`` message, or every message of an ``.mbox`` file.

Each message becomes one block: a short header (subject, from, date) and its
text body — the text/plain part, else the HTML part stripped to text.
Attachments are named, not read.  The mbox file is split here, on its
``From `` separator lines, rather than by :mod:`mailbox`, so each message
keeps the line range it occupies in the file for citations.
"""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage, Message

from agenvoy_desktop.rag.documents import Block, Document
from agenvoy_desktop.rag.errors import UnreadableFileError
from agenvoy_desktop.rag.readers.html_text import html_to_text
from agenvoy_desktop.rag.readers.textdecode import looks_binary

NO_SUBJECT = "(no subject)"


def read_mail(data: bytes, path: str) -> Document:
    """An .eml or .mbox file as one message block per message."""
    if looks_binary(data):
        raise UnreadableFileError(path, "not a mail file (binary content)")
    if path.lower().endswith(".mbox"):
        spans = _mbox_spans(data)
    elif _has_headers(data):
        spans = [(1, max(1, len(data.splitlines())), data)]
    else:
        raise UnreadableFileError(path, "not a mail message (no headers)")
    blocks = [_message_block(raw, start, end) for start, end, raw in spans]
    return Document(path, "mail", tuple(b for b in blocks if b.text))


def _mbox_spans(data: bytes) -> list[tuple[int, int, bytes]]:
    """(first line, last line, raw message) for each message, separator lines excluded."""
    spans: list[tuple[int, int, bytes]] = []
    current: list[bytes] = []
    start = 1
    for number, line in enumerate(data.splitlines(keepends=True), 1):
        if line.startswith(b"From "):
            if current:
                spans.append((start, number - 1, b"".join(current)))
            current, start = [], number + 1
        else:
            current.append(line)
    if current:
        spans.append((start, start + len(current) - 1, b"".join(current)))
    return [_trimmed(s) for s in spans if s[2].strip()]


def _trimmed(span: tuple[int, int, bytes]) -> tuple[int, int, bytes]:
    """*span* without the blank lines that end it (the separator's lead-in)."""
    start, end, raw = span
    lines = raw.splitlines(keepends=True)
    while lines and not lines[-1].strip():
        lines.pop()
        end -= 1
    return start, end, b"".join(lines)


def _has_headers(raw: bytes) -> bool:
    """Whether *raw* starts like a mail message (the parser itself accepts anything)."""
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    return bool(message.keys()) and not message.defects


def _message_block(raw: bytes, start: int, end: int) -> Block:
    message = email.message_from_bytes(raw, policy=email.policy.default)
    subject = _header(message, "subject") or NO_SUBJECT
    head = [f"Subject: {subject}"]
    head += [f"{name}: {v}" for name in ("From", "To", "Date") if (v := _header(message, name))]
    body = _body(message)
    attachments = _attachment_names(message)
    if attachments:
        body = f"{body}\n\nAttachments: {', '.join(attachments)}".strip()
    text = "\n".join(head) + (f"\n\n{body}" if body else "")
    return Block("message", text, start, max(start, end), title=subject)


def _header(message: Message, name: str) -> str:
    """A header's text; one the parser chokes on is given as it was written.

    The standard library's structured header parsing raises more than
    ValueError on hostile input (an address group without a local part
    raises AttributeError), so any failure falls back to the raw text.
    """
    try:
        value = message.get(name)
    except Exception:  # noqa: BLE001 - the stdlib header parser's failures are not one type
        value = next((v for k, v in message.raw_items() if k.lower() == name.lower()), None)
    return " ".join(str(value).split()) if value is not None else ""


def _body(message: Message) -> str:
    if not isinstance(message, EmailMessage):
        return ""
    for preference, as_text in ((("plain",), False), (("html",), True)):
        try:
            part = message.get_body(preferencelist=preference)
        except (KeyError, ValueError, TypeError):
            part = None
        if part is None:
            continue
        content = _content(part)
        return html_to_text(content) if as_text else content.strip()
    return ""


def _content(part: Message) -> str:
    """A part's text, however wrong its declared charset is."""
    try:
        content = part.get_content() if isinstance(part, EmailMessage) else None
        if isinstance(content, str):
            return content
    except (LookupError, ValueError, KeyError, AssertionError):
        pass
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload.decode("utf-8", errors="replace")
    return ""


def _attachment_names(message: Message) -> list[str]:
    if not isinstance(message, EmailMessage):
        return []
    try:
        return [name for part in message.iter_attachments() if (name := part.get_filename())]
    except (KeyError, ValueError, TypeError):
        return []
