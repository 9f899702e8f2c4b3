"""Frozen-app runtime hook: tell Qt where its plugins are, without importing Qt.

It replaces PyInstaller's own PySide6 hook, which also imports PySide6.QtCore
at every start to register a ``qt.conf`` — about half a second before the
first line of the app runs, even for a CLI command that never opens a window.
PySide6 registers that ``qt.conf`` itself when the app imports QtCore, so the
plugin path (an environment variable) is all that must be set this early.
"""

import os
import sys


def _point_qt_at_bundle() -> None:
    base = getattr(sys, "_MEIPASS", os.path.dirname(sys.executable))
    windows = sys.platform.startswith("win")
    qt_root = os.path.join(base, "PySide6") if windows else os.path.join(base, "PySide6", "Qt")
    os.environ["QT_PLUGIN_PATH"] = os.path.join(qt_root, "plugins")
    if windows:  # Qt's DLLs and any OpenSSL DLLs sit at the bundle's root
        os.environ["PATH"] = base + os.pathsep + os.environ.get("PATH", "")


_point_qt_at_bundle()
