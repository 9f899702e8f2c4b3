"""The loop's own error memory: a failed call is remembered, and found again."""

from __future__ import annotations

from pathlib import Path

from agenvoy_desktop.agent.error_tools import ErrorMemoryHints
from agenvoy_desktop.core.error_memory import ErrorMemory
from tests.conftest import FakeClock
from tests.fakes import HashingEmbedder

FAILURE = "read_text_file failed: PermissionError: /etc/secret.txt is outside the allowed folders"


def test_a_recorded_failure_is_renewed_not_repeated_and_hints_next_time(tmp_path: Path) -> None:
    with ErrorMemory(
        tmp_path / "errors.sqlite3", HashingEmbedder(dim=256), clock=FakeClock()
    ) as mem:
        hints = ErrorMemoryHints(mem)
        first = hints.record_failure("read_text_file", FAILURE, {"path": "/etc/secret.txt"}, "s1")
        again = hints.record_failure("read_text_file", FAILURE, {"path": "/etc/secret.txt"}, "s2")
        assert first is not None
        assert again == first
        assert mem.count() == 1
        record = mem.get(first)
        assert record is not None
        assert record.outcome == "failed"
        assert record.action == 'called read_text_file({"path": "/etc/secret.txt"})'
        text, ids = hints.hint_for_failure("read_text_file", FAILURE)
        assert ids == [first]
        assert text


def test_nothing_to_record_without_a_tool_or_a_text(tmp_path: Path) -> None:
    with ErrorMemory(tmp_path / "errors.sqlite3", None) as mem:
        hints = ErrorMemoryHints(mem)
        assert hints.record_failure("", FAILURE, {}, "s") is None
        assert hints.record_failure("read_text_file", "  ", {}, "s") is None
        assert mem.count() == 0
