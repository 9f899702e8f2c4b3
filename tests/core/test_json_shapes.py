"""Every JSON file the app reads has its shape checked: anything else is damage.

One test per file kind, each fed the same four wrong shapes a disk or a
careless hand can leave (``null``, a list, a bare string, an object whose
values have the wrong types).  None may escape as an AttributeError or a
TypeError: each is set aside, rebuilt, skipped or ignored as that file's
damage already was.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agenvoy_desktop.core.journal import ops_dir
from agenvoy_desktop.core.locks import Holder
from agenvoy_desktop.core.profile import read_stamp, stamp_path
from agenvoy_desktop.core.summary import LOG_FILE, PassRecord, read_records
from agenvoy_desktop.core.vectors import META_FILE, meta_problem, read_meta
from agenvoy_desktop.llm.buffer_probe import VERDICT_FILE, read_verdict
from agenvoy_desktop.llm.minilm_convert import ModelSourceError, _load_json, _read_hparams
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import Settings, load_settings
from tests.conftest import StoreFactory, conversation

SHAPES = ["null", "[]", '"text"']
"""Whole-file shapes that are valid JSON but never an object."""


def wrong_types(*keys: str) -> str:
    """An object with *keys*, each holding a value of a type no reader wants."""
    values: list[object] = [[1], "12", None, {"a": 1}, True]
    return json.dumps({k: values[i % len(values)] for i, k in enumerate(keys)})


# -- settings.json ------------------------------------------------------------


@pytest.mark.parametrize("text", SHAPES)
def test_settings_of_another_shape_are_set_aside(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    assert load_settings(path) == Settings()
    assert not path.exists()
    assert [p.read_text() for p in tmp_path.glob("settings.json.corrupt-*")] == [text]


def test_settings_of_wrong_types_fall_back_field_by_field(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    sections = ("models", "memory", "documents", "appearance", "allowed_folders", "sampling")
    path.write_text(wrong_types(*sections))
    assert load_settings(path) == Settings()
    wrong = {"models": {"threads": "4", "context_size": [1], "load_at_start": 1}}
    path.write_text(json.dumps(wrong))
    assert load_settings(path).models == Settings().models


def test_settings_not_utf8_are_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b'{"x": "\xff"}')
    assert load_settings(path) == Settings()
    assert [p.read_bytes() for p in tmp_path.glob("settings.json.corrupt-*")] == [b'{"x": "\xff"}']


# -- vectors.meta.json --------------------------------------------------------


@pytest.mark.parametrize(
    "text", [*SHAPES, wrong_types("dim", "count", "capacity", "labels"), '{"dim": 4}']
)
def test_vector_meta_of_another_shape_is_damage(tmp_path: Path, text: str) -> None:
    (tmp_path / META_FILE).write_text(text)
    with pytest.raises(ValueError, match=r"not a JSON object|is "):
        read_meta(tmp_path / META_FILE)
    problem = meta_problem(tmp_path)
    assert problem is not None
    assert problem.startswith(f"{META_FILE} damaged (")


def test_vector_meta_as_written_is_fine(tmp_path: Path) -> None:
    assert meta_problem(tmp_path) is None  # no file yet: nothing wrong
    meta = {"dim": 4, "labels": "rowid<<6|part", "count": 2, "capacity": 64}
    (tmp_path / META_FILE).write_text(json.dumps(meta))
    assert meta_problem(tmp_path) is None
    assert read_meta(tmp_path / META_FILE) == meta
    del meta["labels"]  # an older index without it is stale (rebuilt quietly), not damaged
    (tmp_path / META_FILE).write_text(json.dumps(meta))
    assert meta_problem(tmp_path) is None


@pytest.mark.parametrize("text", [*SHAPES, wrong_types("dim", "count", "capacity")])
def test_a_damaged_vector_meta_is_rebuilt_from_the_archive(
    open_store: StoreFactory, text: str
) -> None:
    store = open_store()
    sid = store.create_session("trip", "trip")
    store.import_messages(conversation(["kyoto onsen", "ok", "osaka train", "noted"]), sid)
    store.close()
    meta = store.folder(sid) / META_FILE
    meta.write_text(text)
    again = open_store()
    vectors = again.vectors(sid)
    assert vectors.count == 4  # nothing stored was lost
    assert vectors.healed is not None
    assert vectors.healed.startswith(f"{META_FILE} damaged")
    vectors.flush()
    assert meta_problem(meta.parent) is None


# -- operation journals (memory/ops/*.json) -------------------------------------


@pytest.mark.parametrize("text", [*SHAPES, wrong_types("op", "session_id")])
def test_a_journal_of_another_shape_is_set_aside_not_a_crash(
    open_store: StoreFactory, paths: AppPaths, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store()
    folder = ops_dir(store)
    store.close()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "s1.json").write_text(text)
    with caplog.at_level(logging.WARNING):
        open_store().close()
    assert (folder / "s1.bad").read_text() == text
    assert any("unreadable operation journal" in r.getMessage() for r in caplog.records)


# -- summary.history.jsonl ----------------------------------------------------


def test_summary_log_lines_of_another_shape_are_skipped(tmp_path: Path) -> None:
    good = PassRecord(kind="pass", time_ns=5, messages=3)
    lines = [*SHAPES, wrong_types("kind", "time_ns", "messages"), '{"kind": "pass"', "7"]
    lines.append(json.dumps(good.to_json()))
    (tmp_path / LOG_FILE).write_text("\n".join(lines) + "\n")
    assert read_records(tmp_path) == [good]


@pytest.mark.parametrize(
    "data", [None, [], "text", {"kind": "pass", "time_ns": True}, {"kind": 1, "time_ns": 5}]
)
def test_a_pass_record_checks_its_types(data: object) -> None:
    with pytest.raises(TypeError):
        PassRecord.from_json(data)


# -- profile.json (the profile stamp) -----------------------------------------


@pytest.mark.parametrize(
    "text", [*SHAPES, wrong_types("format", "written_by"), '{"format": "2"}', '{"format": true}']
)
def test_a_profile_stamp_of_another_shape_counts_as_missing(paths: AppPaths, text: str) -> None:
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    stamp_path(paths).write_text(text)
    assert read_stamp(paths) is None


# -- lock holder files ---------------------------------------------------------


@pytest.mark.parametrize(
    "text", [*SHAPES, wrong_types("pid", "program", "operation", "host", "since_ns")]
)
def test_a_lock_holder_of_another_shape_is_not_ours(text: str) -> None:
    assert Holder.from_bytes(text.encode()) is None


def test_a_lock_holder_round_trips() -> None:
    holder = Holder(12, "agenvoy", "chat", "host", 34)
    assert Holder.from_bytes(holder.to_bytes()) == holder


# -- llama-extra-buffers.json (the buffer probe's verdict) ----------------------


@pytest.mark.parametrize(
    "text",
    [
        *SHAPES,
        wrong_types("enabled", "reason", "machine", "probed_at"),
        '{"enabled": "no", "reason": "r", "machine": "m"}',
    ],
)
def test_a_probe_verdict_of_another_shape_means_probe_again(tmp_path: Path, text: str) -> None:
    (tmp_path / VERDICT_FILE).write_text(text)
    assert read_verdict(tmp_path) is None


# -- a model source's config.json (MiniLM conversion) ---------------------------


@pytest.mark.parametrize("text", [*SHAPES, wrong_types("num_hidden_layers", "hidden_size")])
def test_a_model_config_of_another_shape_is_a_clear_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ModelSourceError, match=r"config\.json"):
        _read_hparams(tmp_path)


def test_a_model_config_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b'{"x": "\xff"}')
    with pytest.raises(ModelSourceError, match="not a readable JSON file"):
        _load_json(tmp_path / "config.json")
