"""Word documents (.docx) via python-docx: paragraphs, heading styles and tables in order."""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING

from agenvoy_desktop.rag.documents import Block, Document
from agenvoy_desktop.rag.errors import UnreadableFileError

if TYPE_CHECKING:
    from docx.table import Table

MAX_INFLATED_BYTES = 200 * 1024 * 1024
"""What a .docx may unpack to: a small file that inflates to gigabytes is an attack, not a memo."""
_HEADING_STYLE = re.compile(r"Heading\s*(\d)", re.IGNORECASE)


def read_docx(data: bytes, path: str) -> Document:
    """The document body as heading and paragraph blocks (a table row is one paragraph)."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table as TableType

    try:
        _check_inflated_size(data, path)
        document = docx.Document(io.BytesIO(data))
        blocks: list[Block] = []
        for item in document.iter_inner_content():
            if isinstance(item, TableType):
                blocks.extend(_table_blocks(item))
            elif text := item.text.strip():
                level = _heading_level(item.style.name if item.style is not None else "")
                if level is None:
                    blocks.append(Block("paragraph", text))
                else:
                    blocks.append(Block("heading", text, level=level))
    except UnreadableFileError:
        raise
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UnreadableFileError(
            path, f"not a readable .docx file ({type(exc).__name__})"
        ) from None
    return Document(path, "docx", tuple(blocks))


def _check_inflated_size(data: bytes, path: str) -> None:
    """Refuse a zip whose parts declare more than :data:`MAX_INFLATED_BYTES` in all.

    The declared sizes are what :mod:`zipfile` stops reading at, so a file
    cannot lie its way past this check.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if sum(item.file_size for item in archive.infolist()) > MAX_INFLATED_BYTES:
            raise UnreadableFileError(path, "too large once unpacked (a zip bomb?)")


def _heading_level(style: str | None) -> int | None:
    """1-9 for "Heading N" styles, 0 for "Title" (above them all), ``None`` for a paragraph."""
    if not style:
        return None
    if style.strip().lower() == "title":
        return 0
    match = _HEADING_STYLE.fullmatch(style.strip())
    return int(match.group(1)) if match else None


def _table_blocks(table: Table) -> list[Block]:
    blocks: list[Block] = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if text and (not cells or cells[-1] != text):  # merged cells repeat their text
                cells.append(text)
        if cells:
            blocks.append(Block("paragraph", " | ".join(cells)))
    return blocks
