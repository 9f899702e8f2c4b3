"""The window's runner: a known failure is its one line; a bug is "internal error" and the log."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from agenvoy_desktop.core.archive import ArchiveError
from agenvoy_desktop.ui.async_runner import AsyncRunner, readable_error

LOGGER = "agenvoy_desktop.ui.async_runner"


def _reported(runner: AsyncRunner) -> list[str]:
    """What the runner's error strip receives from now on."""
    errors: list[str] = []
    runner.error_reported.connect(errors.append)
    return errors


def _fail(qtbot: QtBot, runner: AsyncRunner, exc: BaseException) -> str:
    """Run work that raises *exc*; the one message the window shows."""

    async def work() -> None:
        raise exc

    shown = _reported(runner)
    op = runner.run(work(), what="save the note")
    qtbot.waitUntil(lambda: op.done)
    [message] = shown
    return message


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_a_known_failure_is_its_message_and_a_warning(
    qtbot: QtBot, runner: AsyncRunner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner.log_path = tmp_path / "agenvoy-desktop.log"
    with caplog.at_level(logging.INFO, logger=LOGGER):
        message = _fail(qtbot, runner, ArchiveError("archive /x/archive.sqlite3: the disk is full"))
    assert message == "Could not save the note: archive /x/archive.sqlite3: the disk is full"
    [record] = _records(caplog)
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert "the disk is full" in record.getMessage()


def test_a_bug_is_an_internal_error_with_the_log_path(
    qtbot: QtBot, runner: AsyncRunner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_path = tmp_path / "agenvoy-desktop.log"
    runner.log_path = log_path
    with caplog.at_level(logging.INFO, logger=LOGGER):
        message = _fail(qtbot, runner, KeyError("session"))
    assert message == (
        f"Could not save the note: internal error: KeyError: 'session' (details in {log_path})"
    )
    [record] = _records(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


def test_a_failing_view_update_is_a_bug_too(
    qtbot: QtBot, runner: AsyncRunner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner.log_path = tmp_path / "agenvoy-desktop.log"

    async def work() -> int:
        return 1

    def update(_value: int) -> None:
        raise RuntimeError("the list went away")

    shown = _reported(runner)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        op = runner.run(work(), what="show the list", on_success=update)
        qtbot.waitUntil(lambda: op.done)
    [message] = shown
    assert message.startswith("Could not show the list: internal error: RuntimeError: ")
    assert str(runner.log_path) in message
    assert [r.levelno for r in _records(caplog)] == [logging.ERROR]


def test_readable_error_without_a_runner() -> None:
    """Other views call readable_error directly: the same split, the log named when known."""
    denied = PermissionError(errno.EACCES, "Permission denied", "/data/notes.md")
    assert readable_error(denied) == "Permission denied (/data/notes.md)"
    assert readable_error(ArchiveError("archive a: the file is read-only")) == (
        "archive a: the file is read-only"
    )
    assert readable_error(ValueError("")) == "internal error: ValueError (details are in the log)"
    assert readable_error(ValueError("x"), Path("/l.log")) == (
        "internal error: ValueError: x (details in /l.log)"
    )
