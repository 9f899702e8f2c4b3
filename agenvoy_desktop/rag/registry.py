"""The profile's list of document collections: one small, versioned JSON file.

It lives beside the memory, not inside it (``documents/collections.json``),
and nothing about it can stop the app: a damaged file is renamed aside
(``collections.json.damaged-<time>``), what could be read of it is kept, and
the problem is reported as a notice for the user.  A file written by a newer
version is read but never overwritten.  Every call re-reads the file, so
the window, the CLI and the indexer process never act on a stale list, and
changes hold a lock file, so two processes adding at once both get theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.locks import FileLock, program_name
from agenvoy_desktop.core.timeutil import Clock, now_ns
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import (
    Collection,
    check_collection_name,
    check_roots,
)
from agenvoy_desktop.rag.errors import (
    DuplicateCollectionError,
    RegistryTooNewError,
    UnknownCollectionError,
)
from agenvoy_desktop.rag.globs import check_patterns

log = logging.getLogger(__name__)
REGISTRY_VERSION = 1
LOCK_WAIT_S = 5.0
_Collections = list[Collection]
"""(``list`` is also a method name inside the registry class.)"""


def documents_dir(paths: AppPaths) -> Path:
    """Where the collections file and each collection's index live."""
    return paths.config_dir / "documents"


def registry_file(paths: AppPaths) -> Path:
    return documents_dir(paths) / "collections.json"


class CollectionRegistry:
    """Add, remove, get and list collections (see the module docstring).

    ``notices`` collects one-line messages about problems met while reading
    the file (set aside, too new), for the window or the CLI to show.
    """

    def __init__(self, paths: AppPaths, clock: Clock = now_ns) -> None:
        self.file = registry_file(paths)
        self._lock = FileLock(
            self.file.with_name("collections.lock"), "the document collections list", program_name()
        )
        self._clock = clock
        self.notices: list[str] = []
        self._too_new = False

    def list(self) -> _Collections:
        """Every collection, in the order they were added."""
        return self._load()

    def get(self, name: str) -> Collection:
        for collection in self._load():
            if collection.name == name:
                return collection
        raise UnknownCollectionError(name)

    def add(
        self,
        name: str,
        roots: Sequence[str | Path],
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        *,
        watch: bool = False,
    ) -> Collection:
        """Create a collection; raises a ``CollectionError`` with the reason when it cannot."""
        collection = Collection(
            name=check_collection_name(name),
            roots=check_roots(roots),
            include=check_patterns(include),
            exclude=check_patterns(exclude),
            created_ns=self._clock(),
            watch=watch,
        )
        with self._locked("add a document collection"):
            existing = self._load()
            if any(c.name.lower() == name.lower() for c in existing):
                raise DuplicateCollectionError(
                    f"a document collection named {name!r} exists already: choose another name"
                )
            self._save([*existing, collection])
        return collection

    def update(
        self,
        name: str,
        *,
        roots: Sequence[str | Path] | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        watch: bool | None = None,
    ) -> tuple[Collection, Collection]:
        """Change what a collection covers (None leaves a part as it is); ``(before, after)``.

        New roots are checked as :meth:`add` checks them; the ones it has
        already are not looked for on disk again.  Its index is the
        indexer's to bring in line (the next run forgets what is no longer
        covered).
        """
        include = None if include is None else check_patterns(include)
        exclude = None if exclude is None else check_patterns(exclude)
        with self._locked("change a document collection"):
            existing = self._load()
            before = next((c for c in existing if c.name == name), None)
            if before is None:
                raise UnknownCollectionError(name)
            after = dataclasses.replace(
                before,
                roots=before.roots if roots is None else check_roots(roots, known=before.roots),
                include=before.include if include is None else include,
                exclude=before.exclude if exclude is None else exclude,
                watch=before.watch if watch is None else watch,
            )
            if after != before:
                self._save([after if c.name == name else c for c in existing])
        return before, after

    def remove(self, name: str) -> Collection:
        """Forget a collection (its index folder is the indexer's to delete)."""
        with self._locked("remove a document collection"):
            existing = self._load()
            kept = [c for c in existing if c.name != name]
            if len(kept) == len(existing):
                raise UnknownCollectionError(name)
            self._save(kept)
        return next(c for c in existing if c.name == name)

    @contextlib.contextmanager
    def _locked(self, operation: str) -> Iterator[None]:
        """Hold the registry's lock file for a read-modify-write (``StoreBusyError`` if stuck)."""
        self._lock.acquire(operation, shared=False, wait_s=LOCK_WAIT_S)
        try:
            yield
        finally:
            self._lock.release()

    # -- the file ---------------------------------------------------------------------------

    def _load(self) -> _Collections:
        self._too_new = False
        try:
            text = self.file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            if isinstance(exc, OSError):
                self._notice(f"cannot read the document collections file ({exc.strerror})")
                self._too_new = True  # unreadable: never overwrite what we could not read
                return []
            return self._set_aside([], "it is not text")
        try:
            data = json.loads(text)
        except ValueError:
            return self._set_aside([], "it is not valid JSON")
        if not isinstance(data, dict) or not isinstance(data.get("version"), int):
            return self._set_aside([], "it has no version")
        if data["version"] > REGISTRY_VERSION:
            self._too_new = True
            self._notice(
                "the document collections file was written by a newer version of the app:"
                " it is shown as it is and left unchanged"
            )
        return self._entries(data.get("collections"))

    def _entries(self, raw: Any) -> _Collections:
        if not isinstance(raw, list):
            return self._set_aside([], "it has no list of collections")
        good: _Collections = []
        bad = 0
        for entry in raw:
            try:
                if not isinstance(entry, dict):
                    raise TypeError
                collection = Collection.from_json(entry)
            except (KnownError, TypeError):
                bad += 1
                continue
            if all(c.name.lower() != collection.name.lower() for c in good):
                good.append(collection)
            else:
                bad += 1
        if bad and not self._too_new:
            return self._set_aside(good, f"{bad} of its entries could not be read")
        return good

    def _set_aside(self, kept: _Collections, why: str) -> _Collections:
        """Rename the damaged file aside, rewrite what was kept, and say so."""
        aside = self.file.with_name(f"{self.file.name}.damaged-{self._clock()}")
        try:
            os.replace(self.file, aside)
        except OSError as exc:
            self._notice(f"the document collections file is damaged ({why}): {exc.strerror}")
            self._too_new = True
            return kept
        lost = "the readable collections were kept" if kept else "collections must be added again"
        self._notice(
            f"the document collections file was damaged ({why}) and was set aside as"
            f" {aside.name}; {lost}"
        )
        if kept:
            self._save(kept)
        return kept

    def _save(self, collections: _Collections) -> None:
        if self._too_new:
            raise RegistryTooNewError(
                "the document collections file was written by a newer version or cannot be"
                " read: update the app to change collections"
            )
        body = {"version": REGISTRY_VERSION, "collections": [c.to_json() for c in collections]}
        atomic_write_text(self.file, json.dumps(body, indent=2, ensure_ascii=False) + "\n")

    def _notice(self, message: str) -> None:
        if message not in self.notices:
            log.warning("%s", message)
            self.notices.append(message)
