"""Core tests: an archive on a throw-away file, and the helpers that fill and read it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenvoy_desktop.core.archive import Archive, ArchivedMessage
from agenvoy_desktop.core.messages import Message
from tests.conftest import T0, conversation


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    arc = Archive(tmp_path / "archive.sqlite3")
    arc.ensure_session("s1", T0)
    yield arc
    arc.close()


def add_texts(
    arc: Archive, texts: list[str], session: str = "s1", start: int = T0
) -> list[Message]:
    """One message per text, alternating user/assistant, written to *session*."""
    arc.ensure_session(session, start)
    messages = conversation(texts, start=start)
    arc.add_messages(session, messages, start)
    return messages


def hit_ids(hits: list[tuple[ArchivedMessage, float]]) -> list[str]:
    return [h.message.id for h, _ in hits]
