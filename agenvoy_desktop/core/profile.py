"""The profile's format stamp: refuse a profile from a newer app, back up before upgrading.

Every file of a profile has its own format (the archive's and the error
memory's SQLite schema versions, ``settings.json``, the model catalogue, the
collections file, summaries, session settings), and each refuses or keeps
what a newer version wrote.  One stamp for the whole profile,
``config/profile.json`` (``{"format": N, "written_by": "0.1.0"}``), turns
that into one decision made before anything is opened:

- a profile stamped with a *newer* format than this app knows is refused
  with one line that names both versions, and nothing in it is touched —
  not even a settings file rewritten with defaults;
- a profile stamped with an *older* format (or none: profiles from before
  the stamp) is about to be migrated by the stores as they open, so the
  files a migration may change are first copied to
  ``config/backups/<UTC time>-format-<old>-to-<new>/``; only the newest
  :data:`KEEP_BACKUPS` such folders are kept;
- then the stamp is written, so each upgrade is backed up once.

:data:`PROFILE_FORMAT` moves whenever any file's format moves;
``tests/upgrade/test_profile_format.py`` pins the file versions it stands for,
so a schema change without a new profile format fails there.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from agenvoy_desktop import __version__
from agenvoy_desktop.core.atomic import atomic_write_text
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.paths import AppPaths

log = logging.getLogger(__name__)

PROFILE_FORMAT = 4
"""1: profiles before the stamp existed (0.1.0); 2: archive schema 4 (earlier answer
versions), per-session settings, watched collections, appearance and sampling settings;
3: summaries keep facts (summary.json version 3; version 2 files load as they are);
4: archive schema 5 (indexes of the stored search results that quote messages)."""
STAMP_FILE = "profile.json"
BACKUPS_DIR = "backups"
KEEP_BACKUPS = 3
UNSTAMPED_FORMAT = 1
"""What a profile without a stamp is: written before the stamp existed."""


class ProfileTooNewError(KnownError, RuntimeError):
    """The profile was written by a newer version of the app; nothing in it was changed."""


@dataclass(frozen=True, slots=True)
class ProfileStamp:
    format: int
    written_by: str


def stamp_path(paths: AppPaths) -> Path:
    return paths.config_dir / STAMP_FILE


def read_stamp(paths: AppPaths) -> ProfileStamp | None:
    """The stamp, or None for a profile without one (new, or from before the stamp).

    An unreadable stamp counts as missing: the files themselves still check
    their own versions, and the next successful open writes a good stamp.
    """
    try:
        data = json.loads(stamp_path(paths).read_text("utf-8"))
        return _stamp_from_json(data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        log.warning(
            "unreadable profile stamp %s; the files' own versions decide", stamp_path(paths)
        )
        return None


def _stamp_from_json(data: object) -> ProfileStamp:
    """The stamp's fields; TypeError unless ``format`` is a whole number and the writer text.

    ``"2"`` or ``true`` as a format is damage, not a version to compare.
    """
    if not isinstance(data, dict):
        raise TypeError(f"not a JSON object but {type(data).__name__}")
    number, writer = data.get("format"), data.get("written_by", "?")
    if type(number) is not int or not isinstance(writer, str):
        raise TypeError(f"format {number!r} / written_by {writer!r}")
    return ProfileStamp(number, writer)


def migrated_files(paths: AppPaths) -> list[Path]:
    """The files a format upgrade may rewrite (SQLite databases with their journals)."""
    names = [
        paths.archive_db,
        paths.memory_dir / "errors.sqlite3",
        paths.settings_file,
        paths.models_dir / "catalogue.json",
        paths.config_dir / "documents" / "collections.json",
    ]
    found: list[Path] = []
    for path in names:
        found += [p for p in (path, path.with_name(path.name + "-wal")) if p.is_file()]
    return found


def has_memory(paths: AppPaths) -> bool:
    """Whether the profile already holds anything an upgrade could change."""
    return bool(migrated_files(paths)) or any(paths.sessions_dir.glob("*/history.json"))


def check_profile(paths: AppPaths) -> ProfileStamp | None:
    """Refuse a profile from a newer app; reads one small file and creates nothing.

    Call before anything of the profile is opened or written (models prepared,
    settings read): a refused profile must stay exactly as it was.
    """
    stamp = read_stamp(paths)
    if stamp is not None and stamp.format > PROFILE_FORMAT:
        raise ProfileTooNewError(
            f"this profile ({paths.config_dir}) was written by Agenvoy Desktop "
            f"{stamp.written_by} (profile format {stamp.format}); this is version {__version__} "
            f"(format {PROFILE_FORMAT}). Install {stamp.written_by} or newer to open it; "
            "nothing in it was changed."
        )
    return stamp


def prepare_profile(paths: AppPaths) -> Path | None:
    """Check, then back up and stamp an older profile.  Returns the backup folder, if any.

    Called where the memory stores open (they migrate their files as they
    do), so a command that fails before that leaves no profile behind.
    """
    stamp = check_profile(paths)
    if stamp is not None and stamp.format == PROFILE_FORMAT:
        return None
    backup = None
    if has_memory(paths):
        old = stamp.format if stamp is not None else UNSTAMPED_FORMAT
        backup = back_up(paths, f"format-{old}-to-{PROFILE_FORMAT}")
    write_stamp(paths)
    return backup


def write_stamp(paths: AppPaths) -> None:
    body = {"format": PROFILE_FORMAT, "written_by": __version__}
    stamp_path(paths).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stamp_path(paths), json.dumps(body) + "\n")


def back_up(paths: AppPaths, label: str) -> Path:
    """Copy :func:`migrated_files` into a new dated backup folder; keep the newest few."""
    root = paths.config_dir / BACKUPS_DIR
    when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = root / f"{when}-{label}"
    suffix = 1
    while folder.exists():  # two upgrades in one second (tests)
        suffix += 1
        folder = root / f"{when}-{label}-{suffix}"
    folder.mkdir(parents=True)
    for path in migrated_files(paths):
        target = folder / backup_name(paths, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    log.info("backed up the profile's files before upgrading them: %s", folder)
    prune_backups(root)
    return folder


def backup_name(paths: AppPaths, path: Path) -> Path:
    """Where *path* goes inside a backup folder: ``config/…`` or ``data/…``.

    The two folders need not share a parent (the default layout puts the
    settings under ``~/.config`` and the models under ``~/.local/share``), so
    each file is named from its own folder, as a profile folder names them.
    """
    for label, root in (("config", paths.config_dir), ("data", paths.data_dir)):
        if path.is_relative_to(root):
            return Path(label) / path.relative_to(root)
    raise ValueError(f"{path} is in neither of the profile's folders")


def prune_backups(root: Path, keep: int = KEEP_BACKUPS) -> list[Path]:
    """Delete all but the newest *keep* backup folders (names sort by time); returns those gone."""
    folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.name)
    gone = folders[:-keep] if len(folders) > keep else []
    for folder in gone:
        shutil.rmtree(folder, ignore_errors=True)
    return gone


def copies_kept_aside(paths: AppPaths) -> list[Path]:
    """The copies of the conversation archive the app set aside earlier: format-upgrade
    backups (``config/backups/…``) and archives set aside as damaged
    (``archive.sqlite3.damaged-…``).

    They exist so that nothing is lost to an upgrade or a damaged file; a
    reset or remove takes its session out of the archives among them
    (:mod:`~agenvoy_desktop.core.set_aside_copies`), and names those it
    could not read, for the person to delete.
    """
    backups = paths.config_dir / BACKUPS_DIR
    kept = sorted(p for p in backups.iterdir() if p.is_dir()) if backups.is_dir() else []
    archive = paths.archive_db
    if archive.parent.is_dir():
        kept += sorted(archive.parent.glob(f"{archive.name}.damaged-*"))
    return kept
