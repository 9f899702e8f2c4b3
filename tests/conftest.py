"""Shared fixtures: every test runs against a throw-away profile."""

from __future__ import annotations

import itertools
import json
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agenvoy_desktop.core.messages import Message, new_message_id
from agenvoy_desktop.core.startup import open_memory
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.paths import HOME_ENV, MACHINE_CACHE_ENV, AppPaths, app_paths
from tests.fakes import HashingEmbedder
from tests.reliability.torture import network_use

T0 = 1_700_000_000_000_000_000
"""A fixed epoch for tests (2023-11-14T22:13:20Z), in UTC ns."""
SECOND = 1_000_000_000


@pytest.fixture(scope="session")
def _machine_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One machine-facts folder for the whole run: a one-time probe runs once per run."""
    return tmp_path_factory.mktemp("machine-cache")


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    _machine_cache: Path,
) -> Path:
    """No test can ever touch a real profile: the env override points at a tmp dir.

    The machine cache (``paths.machine_cache_dir``) is moved too, so a test
    that opens a model never writes the user's stored probe verdict.
    """
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv(HOME_ENV, str(home))
    monkeypatch.setenv(MACHINE_CACHE_ENV, str(_machine_cache))
    return home


# -- network audit: no test may reach beyond this machine --------------------------------
NETWORK_EVENTS: list[str] = []
"""Sockets other than AF_UNIX, and host-name look-ups, seen since the current test began.

Only what goes through Python's ``socket`` module is seen; C libraries
(llama.cpp, SQLite) are watched from outside in ``tests/reliability/test_network_audit.py``.
"""


def _network_audit(event: str, args: tuple[object, ...]) -> None:
    if event.startswith("socket.") and (use := network_use(event, args)) is not None:
        NETWORK_EVENTS.append(use)


# Audit hooks stay for the life of the process.  Without AF_UNIX (Windows) asyncio's own
# socketpair() is loopback TCP, which no hook can tell from the network: nothing to watch.
if hasattr(socket, "AF_UNIX"):
    sys.addaudithook(_network_audit)


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    """Fail the test during which anything opened a network socket."""
    NETWORK_EVENTS.clear()
    yield
    found, NETWORK_EVENTS[:] = list(NETWORK_EVENTS), []
    if found:
        pytest.fail(f"the app must never reach the network, but this test did: {found[:3]}")


class FakeClock:
    """A clock that advances one second per call."""

    def __init__(self, start: int = T0 + 1000 * SECOND, step: int = SECOND) -> None:
        self._counter = itertools.count()
        self.start = start
        self.step = step

    def __call__(self) -> int:
        return self.start + next(self._counter) * self.step


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return app_paths(tmp_path / "profile")


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(dim=256)


StoreFactory = Callable[..., MemoryStore]


@pytest.fixture
def open_store(paths: AppPaths, embedder: HashingEmbedder) -> Iterator[StoreFactory]:
    """Open the test profile's memory as the app does (:func:`open_memory`); closed at teardown."""
    opened: list[MemoryStore] = []

    def factory(**kwargs: object) -> MemoryStore:
        kwargs.setdefault("clock", FakeClock())
        store = open_memory(paths, kwargs.pop("embedder", embedder), **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: StoreFactory) -> MemoryStore:
    return open_store()


def msg(role: str, content: str, time_ns: int, **extra: object) -> Message:
    """A message with a fresh id."""
    return Message(new_message_id(), role, content, time_ns, extra=extra)


def conversation(texts: list[str], start: int = T0, step: int = SECOND) -> list[Message]:
    """Alternate user/assistant messages, one per text, *step* apart."""
    roles = itertools.cycle(("user", "assistant"))
    return [msg(next(roles), text, start + i * step) for i, text in enumerate(texts)]


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), "utf-8")


def archive_counts(paths: AppPaths) -> dict[str, int]:
    """Row counts of the archive tables, read without the app's code."""
    import sqlite3

    db = sqlite3.connect(paths.archive_db)
    try:
        return {
            table: int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("messages", "sessions", "vectors", "events")
        }
    finally:
        db.close()


@pytest.fixture(scope="session")
def starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real starter chat model, assembled once per test run (skips if not installed)."""
    from agenvoy_desktop.llm.model_prep import ModelUnavailableError
    from agenvoy_desktop.llm.starter import prepare_starter_model

    try:
        return prepare_starter_model(tmp_path_factory.mktemp("starter"))
    except ModelUnavailableError as exc:
        pytest.skip(f"starter model packages not installed: {exc}")
