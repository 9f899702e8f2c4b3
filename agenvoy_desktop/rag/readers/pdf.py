"""PDF text layers, page by page, via pypdf.

Only the text layer is read: a scanned PDF without one yields no blocks
(and is reported as such), never an OCR attempt.  pypdf raises many kinds
of errors on damaged files and warns on merely odd ones; every one of them
becomes a reason for the user, and its warnings are kept out of the app's.
"""

from __future__ import annotations

import io
import logging
import re
import struct
import warnings
import zlib
from typing import TYPE_CHECKING

from agenvoy_desktop.rag.documents import Block, Document
from agenvoy_desktop.rag.errors import UnreadableFileError

if TYPE_CHECKING:
    from pypdf import PdfReader

_BLANK_RUN = re.compile(r"\n[ \t]*\n\s*")
_DAMAGED = (
    ValueError, KeyError, TypeError, AttributeError, IndexError, ArithmeticError,
    zlib.error, struct.error, EOFError,
)  # fmt: skip
"""What pypdf lets escape on a damaged file besides its own errors (seen in fuzzing)."""
ENCRYPTED = "the PDF is encrypted (password protected)"


def read_pdf(data: bytes, path: str) -> Document:
    """The PDF's pages as paragraph blocks, each tagged with its page number."""
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, LimitReachedError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its complaints are ours to report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not _unlock(reader):
                raise UnreadableFileError(path, ENCRYPTED)
            pages = [page.extract_text() or "" for page in reader.pages]
        except UnreadableFileError:
            raise
        except FileNotDecryptedError:
            raise UnreadableFileError(path, ENCRYPTED) from None
        except LimitReachedError:
            raise UnreadableFileError(path, "the PDF is too large once unpacked") from None
        except (PyPdfError, *_DAMAGED) as exc:
            raise UnreadableFileError(path, f"damaged PDF ({_short(exc)})") from None
        except RecursionError:
            raise UnreadableFileError(path, "damaged PDF (its structure loops)") from None
    blocks = [b for number, text in enumerate(pages, 1) for b in _page_blocks(number, text)]
    if pages and not blocks:
        raise UnreadableFileError(path, "the PDF has no text layer (a scan?)")
    return Document(path, "pdf", tuple(blocks))


def _unlock(reader: PdfReader) -> bool:
    """Open a PDF encrypted with an empty user password (common: print restrictions only)."""
    from pypdf.errors import DependencyError

    try:
        return bool(reader.decrypt(""))
    except (DependencyError, NotImplementedError, ValueError, KeyError):
        return False


def _page_blocks(page: int, text: str) -> list[Block]:
    cleaned = "\n".join(line.rstrip() for line in text.replace("\r", "\n").split("\n"))
    paragraphs = (p.strip() for p in _BLANK_RUN.split(cleaned))
    return [Block("paragraph", p, page=page) for p in paragraphs if p]


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."
