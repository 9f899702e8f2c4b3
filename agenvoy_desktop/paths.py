"""Where Agenvoy Desktop keeps its files.

One process-wide decision: memory and settings live under the platformdirs
user config dir, model files under the user data dir.  A single override —
the ``AGENVOY_DESKTOP_HOME`` environment variable, or ``--data-dir`` on the
command line (which sets it) — moves *everything* under one folder, so tests
and benchmarks never touch a real profile.

Conversations are private: on POSIX the profile's folders are 0700 and its
files 0600, for new profiles and (fixed on start) for profiles an older
version left readable by other local users.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import platformdirs

log = logging.getLogger(__name__)

APP_NAME = "AgenvoyDesktop"
HOME_ENV = "AGENVOY_DESKTOP_HOME"
MACHINE_CACHE_ENV = "AGENVOY_MACHINE_CACHE"
PRIVATE_UMASK = 0o077
"""Group and other bits: never set on anything in a profile (folders 0700, files 0600)."""
_secured: set[Path] = set()


@dataclass(frozen=True)
class AppPaths:
    """The folders one running app uses; built once by :func:`app_paths`."""

    config_dir: Path
    data_dir: Path

    @property
    def memory_dir(self) -> Path:
        """Sessions (history.json, summary, vector index files) and the archive."""
        return self.config_dir / "memory"

    @property
    def sessions_dir(self) -> Path:
        return self.memory_dir / "sessions"

    @property
    def archive_db(self) -> Path:
        return self.memory_dir / "archive.sqlite3"

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def log_file(self) -> Path:
        """The app's log (window and CLI): where a bug's traceback is written."""
        return self.config_dir / "logs" / "agenvoy-desktop.log"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    def ensure(self) -> AppPaths:
        """Create the folders (idempotent), make the profile private, return self."""
        private_umask()
        for folder in (self.sessions_dir, self.models_dir):
            folder.mkdir(parents=True, exist_ok=True)
        for folder in (self.config_dir, self.data_dir):
            if folder not in _secured:
                secure_tree(folder)
                _secured.add(folder)
        return self


def private_umask() -> None:
    """Set the process umask so everything the app writes from now on is private.

    One process-wide setting is the only way that also covers files other
    libraries create on their own schedule: SQLite's -wal and -shm files,
    hnswlib's index files, summaries, exports.  A no-op off POSIX.
    """
    if os.name == "posix":
        os.umask(PRIVATE_UMASK)


def secure_tree(root: Path) -> int:
    """Make *root* and everything under it owner-only (0700 / 0600); returns the count fixed.

    For profiles created before the app set its umask.  Symbolic links are
    neither followed nor changed (their targets are not ours), and a file that
    cannot be changed (not ours, read-only medium) is logged and skipped.
    """
    if os.name != "posix" or not root.is_dir() or root.is_symlink():
        return 0
    fixed = _make_private(root)
    for folder, dirs, files in os.walk(root):
        fixed += sum(_make_private(Path(folder, name)) for name in [*dirs, *files])
    if fixed:
        log.info("made %d files and folders under %s private", fixed, root)
    return fixed


def _make_private(path: Path) -> int:
    """Clear the group and other bits of *path* (1 if it changed, else 0)."""
    try:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode) or not mode & PRIVATE_UMASK:
            return 0
        path.chmod(mode & ~PRIVATE_UMASK)
    except OSError as exc:
        log.warning("cannot make %s private: %s", path, exc)
        return 0
    return 1


def app_paths(override: str | os.PathLike[str] | None = None) -> AppPaths:
    """Resolve the app's folders: explicit override, then env var, then platformdirs."""
    home = override if override is not None else os.environ.get(HOME_ENV)
    if home:
        root = Path(home).expanduser().resolve()
        return AppPaths(config_dir=root / "config", data_dir=root / "data")
    return AppPaths(
        config_dir=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        data_dir=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
    )


def machine_cache_dir() -> Path:
    """Facts about this machine, shared by every profile on it (platformdirs' cache folder).

    What is stored here depends on the hardware and the installed libraries,
    never on a person's memory: a profile override does not move it, so a
    test profile or a second profile does not repeat a one-time probe.
    ``AGENVOY_MACHINE_CACHE`` moves it (the test suite uses a folder of its own).
    """
    override = os.environ.get(MACHINE_CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
