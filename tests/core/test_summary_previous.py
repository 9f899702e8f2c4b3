"""The summary before the last pass or edit, kept next to it for the Summary tab's comparison."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agenvoy_desktop.core.summary import (
    PREVIOUS_FILE,
    SUMMARY_FILE,
    KeyDecision,
    Summary,
    load_previous_summary,
    load_summary,
    save_summary,
)

FIRST = Summary(key_decisions=(KeyDecision("Take the train"),), current_discussion="Trains.")
SECOND = Summary(key_decisions=(KeyDecision("Take the bus"),), current_discussion="Buses.")


def test_the_first_save_has_nothing_before_it(tmp_path: Path) -> None:
    save_summary(tmp_path, FIRST)
    assert load_previous_summary(tmp_path) is None
    assert not (tmp_path / PREVIOUS_FILE).exists()


def test_each_save_keeps_the_summary_it_replaces_byte_for_byte(tmp_path: Path) -> None:
    save_summary(tmp_path, FIRST)
    first_bytes = (tmp_path / SUMMARY_FILE).read_bytes()
    save_summary(tmp_path, SECOND)
    assert (tmp_path / PREVIOUS_FILE).read_bytes() == first_bytes
    assert load_previous_summary(tmp_path) == FIRST
    assert load_summary(tmp_path) == SECOND
    save_summary(tmp_path, FIRST)
    assert load_previous_summary(tmp_path) == SECOND


def test_a_stale_copy_goes_when_the_summary_starts_over(tmp_path: Path) -> None:
    """After a repair set the summary aside, the next one replaced nothing: no comparison."""
    save_summary(tmp_path, FIRST)
    save_summary(tmp_path, SECOND)
    (tmp_path / SUMMARY_FILE).unlink()
    save_summary(tmp_path, FIRST)
    assert load_previous_summary(tmp_path) is None


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        json.dumps({"version": 99, **FIRST.to_json()}),
        json.dumps({"key_decisions": "many", "past_discussions": [], "current_discussion": ""}),
    ],
)
def test_a_damaged_copy_is_ignored_with_a_log_line(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    save_summary(tmp_path, FIRST)
    (tmp_path / PREVIOUS_FILE).write_text(text, "utf-8")
    with caplog.at_level(logging.WARNING, logger="agenvoy_desktop.core.summary"):
        assert load_previous_summary(tmp_path) is None
    assert any(PREVIOUS_FILE in r.getMessage() for r in caplog.records)
    assert load_summary(tmp_path) == FIRST  # the summary itself is untouched
