"""Small files of each format, made in the test (no fixtures on disk, no network)."""

from __future__ import annotations

import io
from email.message import EmailMessage


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF, one text line per entry ("" leaves a blank line)."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, lines in enumerate(pages):
        shown = " ".join(f"({_pdf_escape(line)}) Tj T*" for line in lines)
        content = f"BT /F1 12 Tf 72 720 Td 14 TL {shown} ET"
        objects.append(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            f" /Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * index} 0 R >>"
        )
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    out.write(trailer.encode())
    return out.getvalue()


def encrypt_pdf(data: bytes, user_password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(items: list[tuple[str, str]], table: list[list[str]] | None = None) -> bytes:
    """A .docx of ("h1".."h9" | "title" | "p", text) items, then an optional table."""
    import docx

    document = docx.Document()
    for kind, text in items:
        if kind == "p":
            document.add_paragraph(text)
        elif kind == "title":
            document.add_heading(text, 0)
        else:
            document.add_heading(text, int(kind[1:]))
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_message(
    subject: str, body: str, *, html: str | None = None, sender: str = "ann@example.org"
) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = "bob@example.org"
    message["Date"] = "Mon, 01 Jan 2024 10:00:00 +0000"
    if body:
        message.set_content(body)
        if html is not None:
            message.add_alternative(html, subtype="html")
    elif html is not None:
        message.set_content(html, subtype="html")
    return message


def make_mbox(messages: list[EmailMessage]) -> bytes:
    parts = []
    for message in messages:
        raw = message.as_bytes(unixfrom=False)
        parts.append(
            b"From ann@example.org Mon Jan  1 10:00:00 2024\n" + raw.rstrip(b"\n") + b"\n\n"
        )
    return b"".join(parts)
