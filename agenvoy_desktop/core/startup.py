"""Opening a profile's memory the way the app does: repaired and reconciled.

:class:`MemoryStore` is a plain store over the files as they are.  Before
the window or a CLI command uses one, :func:`open_memory`

1. opens the archive, setting a damaged one aside and rebuilding it
   (:mod:`recovery`);
2. finishes reset/remove operations a crash interrupted (:mod:`lifecycle`),
   then reconciles history.json, archive and vectors (:mod:`reconcile`) and
   checks the summary files;
3. counts the messages still lacking a vector, for the caller to embed in
   the background.

What the user should hear of is in ``store.notices`` (one line each).  Damage
that only a query deeper in the archive reaches is repaired once and the
checks run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenvoy_desktop.core import reconcile as reconciliation
from agenvoy_desktop.core import recovery
from agenvoy_desktop.core.archive import Archive, ArchiveDamagedError
from agenvoy_desktop.core.locks import StoreLocks
from agenvoy_desktop.core.model_name import embedding_model_name
from agenvoy_desktop.core.profile import prepare_profile
from agenvoy_desktop.core.store import DEFAULT_MAX_HISTORY_BYTES, MemoryStore
from agenvoy_desktop.core.timeutil import Clock, now_ns
from agenvoy_desktop.paths import AppPaths

if TYPE_CHECKING:  # numpy loads with the first embedder, not with every command
    from agenvoy_desktop.core.embedding import TextEmbedder


def open_memory(
    paths: AppPaths,
    embedder: TextEmbedder | None = None,
    *,
    model_name: str | None = None,
    max_history_bytes: int = DEFAULT_MAX_HISTORY_BYTES,
    clock: Clock = now_ns,
    reconcile: bool = True,
    repair_damage: bool = True,
) -> MemoryStore:
    """The profile's memory, repaired and reconciled (see the module docstring).

    *repair_damage* False (``doctor`` without ``--repair``) raises
    :class:`ArchiveDamagedError` instead of rebuilding a damaged archive.
    *reconcile* False opens without the checks of step 2 and 3 (``doctor``
    runs its own, deeper ones).  *model_name* defaults to the embedder's own
    (:func:`embedding_model_name`).
    """
    name = model_name or embedding_model_name(embedder)
    paths = paths.ensure()
    backup = prepare_profile(paths)  # newer: refused; older: backed up before anything migrates
    archive, notices = _sound_archive(paths, clock, repair=repair_damage)
    if backup is not None:
        notices.append(f"This profile was upgraded; its earlier files are kept in {backup}.")

    def store_on(archive: Archive) -> MemoryStore:
        return MemoryStore(
            paths,
            embedder,
            model_name=name,
            max_history_bytes=max_history_bytes,
            clock=clock,
            archive=archive,
        )

    try:
        store = store_on(archive)
    except ArchiveDamagedError as exc:  # the store closed it; the model check hit a bad page
        if not repair_damage:
            raise
        archive, report = _rebuild(paths, clock, recovery.damage_reason(exc))
        notices.append(report.notice())
        store = store_on(archive)
    store.notices[:0] = notices
    if reconcile:
        _reconcile(store, repair_damage=repair_damage)
    return store


def _sound_archive(paths: AppPaths, clock: Clock, *, repair: bool) -> tuple[Archive, list[str]]:
    """The archive, rebuilt first if the check at open finds it damaged; the notices of that."""
    locks = StoreLocks(paths.memory_dir)
    archive, recovered = recovery.open_archive(
        paths.archive_db,
        paths.sessions_dir,
        clock,
        repair=repair,
        exclusive=lambda: locks.profile("archive repair"),
    )
    return archive, [recovered.notice()] if recovered is not None else []


def _rebuild(
    paths: AppPaths, clock: Clock, reason: str
) -> tuple[Archive, recovery.ArchiveRecovery]:
    """Rebuild the archive under the profile lock (no other process writes meanwhile)."""
    with StoreLocks(paths.memory_dir).profile("archive repair"):
        return recovery.rebuild_archive(paths.archive_db, paths.sessions_dir, clock, reason)


def _reconcile(store: MemoryStore, *, repair_damage: bool) -> None:
    """Steps 2 and 3 of the module docstring; a bad page they reach is repaired once."""
    for attempt in (1, 2):
        try:
            _check_layers(store)
            return
        except ArchiveDamagedError as exc:  # a bad page the check at open did not reach
            if attempt == 2 or not repair_damage:
                store.archive.close()
                raise
            reconciliation.repair_archive(store, recovery.damage_reason(exc))


def _check_layers(store: MemoryStore) -> None:
    findings = reconciliation.reconcile(
        store, repair=True, deep=False, embed_limit=reconciliation.START_EMBED_LIMIT
    )
    findings += reconciliation.check_summaries(store, repair=True)
    store.findings = findings
    store.notices += [str(f).removeprefix("repaired: ") for f in findings if f.notice]
    if store.embedder is not None:  # only a store that can embed needs the count
        store.missing_vectors = reconciliation.count_missing_vectors(store)
