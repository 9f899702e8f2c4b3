"""One reader per format; :func:`read_document` picks by file name and never lets a file crash it.

A reader takes the file's bytes and its collection-relative path and returns
a :class:`~agenvoy_desktop.rag.documents.Document`, or raises
:class:`~agenvoy_desktop.rag.errors.UnreadableFileError` with the reason
(binary, encrypted, damaged...), which the indexer lists and moves past.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agenvoy_desktop.rag.documents import Document, Format
from agenvoy_desktop.rag.errors import UnreadableFileError
from agenvoy_desktop.rag.readers.formats import format_of, language_of
from agenvoy_desktop.rag.readers.mail import read_mail
from agenvoy_desktop.rag.readers.markdown import read_markdown
from agenvoy_desktop.rag.readers.pdf import read_pdf
from agenvoy_desktop.rag.readers.plaintext import read_code, read_text
from agenvoy_desktop.rag.readers.word import read_docx

Reader = Callable[[bytes, str], Document]
READERS: dict[Format, Reader] = {
    "markdown": read_markdown,
    "text": read_text,
    "code": read_code,
    "pdf": read_pdf,
    "docx": read_docx,
    "mail": read_mail,
}

__all__ = ["READERS", "format_of", "language_of", "read_bytes", "read_document"]


def read_bytes(data: bytes, path: str, fmt: Format | None = None) -> Document:
    """Parse *data* as the file *path* (collection-relative); unknown names are tried as text."""
    reader = READERS[fmt or format_of(path) or "text"]
    try:
        return reader(data, path)
    except UnreadableFileError:
        raise
    except RecursionError:
        raise UnreadableFileError(path, "its structure is nested too deeply") from None
    except (ValueError, LookupError, UnicodeError, EOFError) as exc:
        raise UnreadableFileError(path, f"could not be parsed ({type(exc).__name__})") from None


def read_document(file: Path, path: str, fmt: Format | None = None) -> Document:
    """Read *file* from disk and parse it; a file the OS will not open is a reason too."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UnreadableFileError(path, exc.strerror or type(exc).__name__) from None
    return read_bytes(data, path, fmt)
