"""One error taxonomy: what the user can act on is a KnownError, anything else is a bug."""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.agent.builtin_tools import NotTextFileError, _read_text
from agenvoy_desktop.agent.tools import Tool, ToolArgumentError, ToolRegistry
from agenvoy_desktop.core.archive import ArchiveDamagedError, ArchiveError
from agenvoy_desktop.core.error_memory import (
    ErrorMemoryDamagedError,
    ErrorMemoryError,
    ErrorRecordNotFound,
)
from agenvoy_desktop.core.errors import KnownError, is_known, one_line
from agenvoy_desktop.core.importers import ImportFormatError
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.messages import InvalidMessageError
from agenvoy_desktop.core.search import SearchError
from agenvoy_desktop.core.sqlite_db import StoreDamagedError
from agenvoy_desktop.core.store import InvalidSessionIdError, UnknownSessionError
from agenvoy_desktop.core.summary import SummaryFileError, SummaryFormatError
from agenvoy_desktop.core.timeutil import TimeFormatError, TimeRangeError, parse_iso
from agenvoy_desktop.llm.catalogue import CatalogueError, _parse_records
from agenvoy_desktop.llm.gguf_info import ModelFileError
from agenvoy_desktop.llm.llama_model import ModelLoadError, ModelRunError, _decode_failure
from agenvoy_desktop.llm.minilm_convert import ModelSourceError, _load_json
from agenvoy_desktop.llm.model_prep import ModelUnavailableError
from agenvoy_desktop.llm.worker import ModelClosedError, ModelWorker

KNOWN: list[tuple[type[BaseException], type[BaseException]]] = [
    (ArchiveError, RuntimeError),
    (ArchiveDamagedError, StoreDamagedError),
    (ErrorMemoryError, RuntimeError),
    (ErrorMemoryDamagedError, StoreDamagedError),
    (ErrorRecordNotFound, KeyError),
    (SummaryFileError, RuntimeError),
    (SummaryFormatError, ValueError),
    (ModelUnavailableError, RuntimeError),
    (ModelFileError, ValueError),
    (ModelLoadError, RuntimeError),
    (ModelRunError, RuntimeError),
    (ModelClosedError, RuntimeError),
    (ModelSourceError, ValueError),
    (CatalogueError, ValueError),
    (ImportFormatError, ValueError),
    (SearchError, ValueError),
    (StoreBusyError, RuntimeError),
    (InvalidMessageError, ValueError),
    (TimeRangeError, ValueError),
    (TimeFormatError, ValueError),
    (UnknownSessionError, KeyError),
    (InvalidSessionIdError, ValueError),
    (ToolArgumentError, ValueError),
    (NotTextFileError, ValueError),
]


@pytest.mark.parametrize(("kind", "builtin"), KNOWN)
def test_expected_failures_are_known_and_keep_their_old_base(
    kind: type[BaseException], builtin: type[BaseException]
) -> None:
    """``except ValueError`` written before the taxonomy still catches what it caught."""
    assert issubclass(kind, KnownError)
    assert issubclass(kind, builtin)


@pytest.mark.parametrize(
    "exc",
    [
        KeyError("session"),
        RuntimeError("boom"),
        ValueError("bad"),
        TypeError("wrong"),
        AttributeError("missing"),
        sqlite3.OperationalError("no such column: nope"),
        sqlite3.ProgrammingError("Cannot operate on a closed database."),
    ],
)
def test_plain_exceptions_are_bugs(exc: BaseException) -> None:
    assert not is_known(exc)


def test_the_environment_is_known() -> None:
    assert is_known(ArchiveError("archive x: the disk is full"))
    assert is_known(PermissionError(errno.EACCES, "Permission denied", "/tmp/x"))
    assert is_known(FileNotFoundError("gone"))


def test_one_line() -> None:
    assert one_line(SearchError("empty\n   query")) == "empty query"
    assert one_line(KnownError()) == "KnownError"
    denied = PermissionError(errno.EACCES, "Permission denied", "/data/x")
    assert one_line(denied) == "Permission denied (/data/x)"
    assert one_line(ErrorRecordNotFound("no error record #3")) == "no error record #3"


# -- the raises a user can trigger ---------------------------------------------------------
def test_a_time_that_does_not_parse() -> None:
    with pytest.raises(TimeFormatError, match="not an ISO 8601 time: 'yesterday'") as info:
        parse_iso("yesterday")
    assert is_known(info.value)


def test_a_closed_model_worker() -> None:
    class Model:
        def close(self) -> None:
            pass

    worker: ModelWorker[Model] = ModelWorker(
        Model, thread_name="test-worker", closed_message="test model is closed"
    )
    worker.close()
    with pytest.raises(ModelClosedError, match="test model is closed"):
        worker.submit(lambda model: None)


def test_llama_decode_failures(tmp_path: Path) -> None:
    """Below -1 the machine failed (memory, backend); 1 and -1 mean the batch was built wrong."""
    assert isinstance(_decode_failure(tmp_path / "m.gguf", -3), ModelRunError)
    assert "out of memory" in str(_decode_failure(tmp_path / "m.gguf", -2))
    for rc in (1, -1):
        failure = _decode_failure(tmp_path / "m.gguf", rc)
        assert not is_known(failure)
        assert f"code {rc}" in str(failure)


def test_model_source_files_in_the_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ModelSourceError, match="expected a JSON object"):
        _load_json(path)


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"version": 1, "entries": "x"},
        {"version": 1, "entries": [1]},
    ],
)
def test_a_damaged_catalogue_is_a_catalogue_error(data: Any) -> None:
    with pytest.raises(CatalogueError):
        _parse_records(data)


def test_a_binary_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(NotTextFileError, match="binary file"):
        _read_text(path, [tmp_path.resolve()], 100)


# -- tool failures in the log --------------------------------------------------------------
def _tool(exc: BaseException) -> Tool:
    async def handler(_args: dict[str, Any]) -> str:
        raise exc

    return Tool("probe", "fails", {"type": "object", "properties": {}}, handler)


def test_a_tool_bug_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry([_tool(KeyError("slot"))])
    with caplog.at_level(logging.INFO, logger="agenvoy_desktop.agent.tools"):
        outcome = asyncio.run(registry.call("probe", {}))
    assert outcome.is_error
    assert "KeyError" in outcome.content
    [record] = [r for r in caplog.records if r.name == "agenvoy_desktop.agent.tools"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None


def test_a_known_tool_failure_is_one_line_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry([_tool(NotTextFileError("blob.bin is a binary file, not text"))])
    with caplog.at_level(logging.INFO, logger="agenvoy_desktop.agent.tools"):
        outcome = asyncio.run(registry.call("probe", {}))
    assert "blob.bin is a binary file, not text" in outcome.content
    [record] = [r for r in caplog.records if r.name == "agenvoy_desktop.agent.tools"]
    assert record.levelno == logging.INFO
    assert record.exc_info is None
