"""Session ids that differ only in case: one folder on Windows and macOS, so never two sessions.

A new id whose spelling differs from an existing session's only in case is
refused wherever a session comes to be (created, imported into, branched);
a profile that already holds such a pair (made before the refusal) still
opens and lists both, and ``doctor`` names the pair.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import common
from agenvoy_desktop.core.locks import StoreBusyError
from agenvoy_desktop.core.reconcile import doctor
from agenvoy_desktop.core.store import MemoryStore, SessionIdCaseError, case_twins
from agenvoy_desktop.paths import app_paths
from tests.conftest import T0, StoreFactory, conversation
from tests.fakes import HashingEmbedder


def _listing(store: MemoryStore) -> tuple[list[str], list[str]]:
    """(folders, archive sessions), to show a refusal changed nothing."""
    folders = sorted(p.name for p in store.paths.sessions_dir.iterdir())
    return folders, sorted(m.session_id for m in store.archive.sessions())


def test_create_refuses_an_id_differing_only_in_case(store: MemoryStore) -> None:
    store.create_session("first", "victim")
    before = _listing(store)
    with pytest.raises(SessionIdCaseError) as caught:
        store.create_session("second", "Victim")
    message = str(caught.value)
    assert "a session 'victim' already exists" in message
    assert "ids differ only in case" in message
    assert "\n" not in message
    assert _listing(store) == before


def test_create_of_the_same_id_still_works(store: MemoryStore) -> None:
    """Creating an existing session again is not a case clash (the chat does it)."""
    store.create_session(None, "victim")
    assert store.create_session(None, "victim") == "victim"


def test_import_refuses_an_id_differing_only_in_case(store: MemoryStore) -> None:
    store.create_session(None, "victim")
    store.append("victim", conversation(["kept"], start=T0))
    before = _listing(store)
    with pytest.raises(SessionIdCaseError, match="a session 'victim' already exists"):
        store.import_messages(conversation(["new", "text"], start=T0), "VICTIM")
    assert _listing(store) == before
    assert [m.content for m in store.history("victim").messages] == ["kept"]


def test_import_into_the_exact_id_appends(store: MemoryStore) -> None:
    store.create_session(None, "victim")
    store.import_messages(conversation(["a", "b"], start=T0), "victim")
    assert len(store.history("victim").messages) == 2


def test_an_archive_only_session_counts_too(store: MemoryStore) -> None:
    """A session the archive knows but whose folder is gone still owns its id."""
    store.archive.ensure_session("victim", T0)
    with pytest.raises(SessionIdCaseError):
        store.create_session(None, "Victim")


def _make_pair_as_before_the_fix(store: MemoryStore) -> None:
    """Both spellings on disk and in the archive, as an older version could leave them."""
    probe = store.paths.sessions_dir / "Case-Probe"
    probe.mkdir()
    folded = (store.paths.sessions_dir / "case-probe").exists()
    probe.rmdir()
    if folded:
        pytest.skip("this file system folds case: no such pair can exist here")
    for sid, text in (("victim", "lower"), ("Victim", "upper")):
        store.folder(sid).mkdir(parents=True)
        store.archive.ensure_session(sid, T0)
        store.append(sid, conversation([text], start=T0))


def test_an_existing_pair_still_opens_and_lists_both(
    open_store: StoreFactory, store: MemoryStore
) -> None:
    _make_pair_as_before_the_fix(store)
    store.close()
    reopened = open_store()
    assert {"victim", "Victim"} <= set(reopened.session_ids())
    assert [m.content for m in reopened.history("victim").messages] == ["lower"]
    assert [m.content for m in reopened.history("Victim").messages] == ["upper"]
    reopened.append("Victim", conversation(["more"], start=T0 + 5))  # still usable


def test_doctor_reports_the_pair(store: MemoryStore) -> None:
    _make_pair_as_before_the_fix(store)
    findings = [f for f in doctor(store, repair=False) if f.kind == "session ids"]
    assert len(findings) == 1
    assert "'Victim'" in findings[0].detail
    assert "'victim'" in findings[0].detail
    assert not findings[0].repaired
    repaired = [f for f in doctor(store, repair=True) if f.kind == "session ids"]
    assert len(repaired) == 1
    assert not repaired[0].repaired
    assert {"victim", "Victim"} <= set(store.session_ids())


def test_case_twins_groups_spellings() -> None:
    assert case_twins(["a", "B", "b", "c", "C", "cc"]) == [("B", "b"), ("C", "c")]
    assert case_twins(["a", "b"]) == []


def test_cli_import_refuses_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(common, "load_embedder", lambda paths: HashingEmbedder(dim=256))
    data_dir = tmp_path / "profile"
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "hello"}\n', "utf-8")
    args = ["--data-dir", str(data_dir)]
    assert cli.main(["import", str(chat), "--session", "victim", *args]) == 0
    capsys.readouterr()
    assert cli.main(["import", str(chat), "--session", "Victim", *args]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "a session 'victim' already exists" in err
    assert not (app_paths(data_dir).sessions_dir / "Victim").exists()


def test_both_spellings_share_one_lock_between_processes(open_store: StoreFactory) -> None:
    """Creating ``Victim`` waits while another store creates ``victim``, then sees it.

    With a lock per spelling, two processes could each find no twin and
    both create a session in what Windows and macOS keep as one folder.
    """
    first, second = open_store(), open_store()
    second.locks.wait_s = 0.1
    with first.locked("victim", "create"), pytest.raises(StoreBusyError, match="create"):
        second.create_session(None, "Victim")
    first.create_session(None, "victim")
    with pytest.raises(SessionIdCaseError):
        second.create_session(None, "Victim")
