"""PDF, Word and mail readers: the text they extract, and the reasons they give up."""

from __future__ import annotations

import pytest

from agenvoy_desktop.rag.chunking import chunk_document
from agenvoy_desktop.rag.errors import UnreadableFileError
from agenvoy_desktop.rag.readers import read_bytes
from agenvoy_desktop.rag.readers.html_text import html_to_text
from tests.rag.builders import encrypt_pdf, make_docx, make_mbox, make_message, make_pdf


def test_pdf_text_layer_per_page() -> None:
    doc = read_bytes(make_pdf([["Hello world.", "Second line"], ["Page two (x)"]]), "p/a.pdf")
    assert doc.format == "pdf"
    assert [(b.page, b.text) for b in doc.blocks] == [
        (1, "Hello world.\nSecond line"),
        (2, "Page two (x)"),
    ]
    chunks = chunk_document(doc)
    assert [(c.page, c.citation()) for c in chunks] == [(1, "p/a.pdf p. 1"), (2, "p/a.pdf p. 2")]


def test_pdf_with_an_empty_user_password_opens() -> None:
    doc = read_bytes(encrypt_pdf(make_pdf([["Open to all"]]), ""), "a.pdf")
    assert doc.blocks[0].text == "Open to all"


def test_encrypted_pdf_gives_a_reason() -> None:
    data = encrypt_pdf(make_pdf([["Secret"]]), "hunter2")
    with pytest.raises(UnreadableFileError, match="encrypted"):
        read_bytes(data, "a.pdf")


@pytest.mark.parametrize(
    "data", [b"%PDF-1.4\ngarbage", b"not a pdf at all", make_pdf([["x"]])[:150], b""]
)
def test_broken_pdf_gives_a_reason(data: bytes) -> None:
    with pytest.raises(UnreadableFileError, match="PDF"):
        read_bytes(data, "a.pdf")


def test_pdf_without_text_says_so() -> None:
    with pytest.raises(UnreadableFileError, match="no text layer"):
        read_bytes(make_pdf([[]]), "scan.pdf")


def test_docx_headings_paragraphs_and_tables() -> None:
    data = make_docx(
        [("title", "Report"), ("h1", "One"), ("p", "first para"), ("h2", "Deeper"), ("p", "x")],
        table=[["name", "value"], ["a", "1"]],
    )
    doc = read_bytes(data, "w/r.docx")
    assert [(b.kind, b.level, b.text) for b in doc.blocks] == [
        ("heading", 0, "Report"),
        ("heading", 1, "One"),
        ("paragraph", 0, "first para"),
        ("heading", 2, "Deeper"),
        ("paragraph", 0, "x"),
        ("paragraph", 0, "name | value"),
        ("paragraph", 0, "a | 1"),
    ]
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["Report > One", "Report > One > Deeper"]
    assert chunks[0].text == "Report\n\nOne\n\nfirst para"


@pytest.mark.parametrize("data", [b"PK\x03\x04broken zip", b"plain text", b""])
def test_broken_docx_gives_a_reason(data: bytes) -> None:
    with pytest.raises(UnreadableFileError, match=r"\.docx"):
        read_bytes(data, "w.docx")


def test_eml_plain_message() -> None:
    message = make_message("Quarterly plan", "Numbers attached.\n\nSee you.")
    message.add_attachment(b"%PDF", maintype="application", subtype="pdf", filename="plan.pdf")
    doc = read_bytes(message.as_bytes(), "mail/q.eml")
    (block,) = doc.blocks
    assert block.kind == "message"
    assert block.title == "Quarterly plan"
    assert block.start_line == 1
    assert "From: ann@example.org" in block.text
    assert "Numbers attached." in block.text
    assert "Attachments: plan.pdf" in block.text


def test_encoded_subject_and_html_only_body() -> None:
    message = make_message("Héllo wörld", "", html="<style>p{}</style><p>Only <b>HTML</b></p>")
    (block,) = read_bytes(message.as_bytes(), "x.eml").blocks
    assert block.title == "Héllo wörld"
    assert block.text.endswith("Only HTML")
    assert "<" not in block.text
    assert "p{}" not in block.text


def test_multipart_alternative_prefers_plain_text() -> None:
    message = make_message("Alt", "plain body", html="<p>html body</p>")
    (block,) = read_bytes(message.as_bytes(), "x.eml").blocks
    assert "plain body" in block.text
    assert "html body" not in block.text


def test_mbox_messages_keep_their_line_spans() -> None:
    data = make_mbox([make_message("First", "one"), make_message("Second", "two\n>From here")])
    doc = read_bytes(data, "mail/box.mbox")
    assert [b.title for b in doc.blocks] == ["First", "Second"]
    lines = data.decode().split("\n")
    for block in doc.blocks:
        assert block.start_line is not None
        assert block.end_line is not None
        span = lines[block.start_line - 1 : block.end_line]
        assert span[0].startswith("Subject:")
        assert span[-1].strip()
        assert not any(line.startswith("From ") for line in span)
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["First", "Second"]
    assert chunks[1].citation().startswith("mail/box.mbox:")


def test_empty_mbox_has_no_messages() -> None:
    assert read_bytes(b"", "x.mbox").blocks == ()


def test_message_without_subject() -> None:
    (block,) = read_bytes(b"From: a@b.c\n\nhello\n", "x.eml").blocks
    assert block.title == "(no subject)"


@pytest.mark.parametrize("data", [b"\x00\x01binary", b"just some words, no headers\n\nat all"])
def test_not_mail_gives_a_reason(data: bytes) -> None:
    with pytest.raises(UnreadableFileError, match="not a mail"):
        read_bytes(data, "x.eml")


def test_long_mail_is_split_and_keeps_the_subject() -> None:
    body = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(10))
    doc = read_bytes(make_message("Long one", body).as_bytes(), "x.eml")
    chunks = chunk_document(doc, max_chars=500)
    assert len(chunks) > 3
    assert all(c.heading == "Long one" and len(c.text) <= 500 for c in chunks)


def test_html_to_text() -> None:
    html = "<html><head><title>T</title></head><body><h1>A</h1><p>b &amp; c</p><br>d</body>"
    assert html_to_text(html) == "A\n\nb & c\n\nd"
