"""Where Agenvoy Desktop keeps its files.

One process-wide decision: memory and settings live under the platformdirs
user config dir, model files under the user data dir.  A single override —
the ``AGENVOY_DESKTOP_HOME`` environment variable, or ``--data-dir`` on the
command line (which sets it) — moves *everything* under one folder, so tests
and benchmarks never touch a real profile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "AgenvoyDesktop"
HOME_ENV = "AGENVOY_DESKTOP_HOME"


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
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    def ensure(self) -> AppPaths:
        """Create the folders (idempotent) and return self."""
        for folder in (self.sessions_dir, self.models_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self


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
