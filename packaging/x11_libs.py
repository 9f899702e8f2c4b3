"""Libraries Qt's X11 plugin links to, fetched when the build machine lacks them.

PyInstaller bundles a plugin's libraries from the machine that builds; a build
machine without a screen often lacks some (libxcb-icccm4, libxcb-keysyms1), and
the bundle then opens no window on a desktop that lacks them too. This script
asks ``ldd`` what the plugin cannot find, downloads those Debian packages with
``apt-get download`` (no root needed, nothing installed on the system) and
unpacks their libraries into one folder. The Makefile puts that folder on
``LD_LIBRARY_PATH`` while PyInstaller runs, so the libraries travel in
``_internal/``; ``scripts/dist_smoke.py`` checks that they did.

    python packaging/x11_libs.py build/x11-libs   # prints the folder to add
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The Debian package that ships each library the plugin may lack. Libraries a
# desktop always has (libX11, libxcb, libGL, glib) are not listed: a machine
# without them has no X11 session to show a window in.
SONAME_PACKAGES = {
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
}


def qt_folder() -> Path:
    """PySide6's Qt folder in the environment this script runs in."""
    import PySide6

    return Path(PySide6.__file__).parent / "Qt"


def missing_libraries(qt: Path, extra: Path) -> list[str]:
    """The sonames the X11 platform plugin links to that the loader cannot find."""
    plugin = qt / "plugins" / "platforms" / "libqxcb.so"
    if not plugin.exists() or shutil.which("ldd") is None:
        return []
    env = {**os.environ, "LD_LIBRARY_PATH": f"{extra}:{qt / 'lib'}"}
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, env=env, check=False)
    found = {line.split()[0] for line in out.stdout.splitlines() if "not found" in line}
    return sorted(found)


def download(packages: list[str], into: Path) -> None:
    """``apt-get download`` the packages; refresh the package lists once if they are stale."""
    if shutil.which("apt-get") is None:
        raise SystemExit(
            f"x11-libs: the X11 plugin needs {packages}, and this machine has no apt-get "
            "to fetch them: install them with the system's package manager"
        )
    command = ["apt-get", "download", "-q", *packages]
    done = subprocess.run(command, cwd=into, capture_output=True, text=True, check=False)
    if done.returncode != 0 and os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
        done = subprocess.run(command, cwd=into, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"x11-libs: apt-get download {packages} failed:\n{done.stderr}")


def unpack(debs: Path, lib: Path) -> None:
    """Every shared library inside the downloaded packages, copied flat into ``lib``."""
    for deb in sorted(debs.glob("*.deb")):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
            for so in Path(tmp).rglob("*.so*"):
                shutil.copy2(so, lib / so.name, follow_symlinks=False)


def main() -> int:
    """Fetch what is missing into ``<folder>/lib``; print that folder."""
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "build/x11-libs").resolve()
    lib = folder / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    qt = qt_folder()
    missing = missing_libraries(qt, lib)
    if missing:
        unknown = [name for name in missing if name not in SONAME_PACKAGES]
        if unknown:
            raise SystemExit(f"x11-libs: no Debian package known for {unknown}")
        packages = sorted({SONAME_PACKAGES[name] for name in missing})
        sys.stderr.write(f"x11-libs: fetching {', '.join(packages)} for Qt's X11 plugin\n")
        debs = folder / "debs"
        shutil.rmtree(debs, ignore_errors=True)
        debs.mkdir()
        download(packages, debs)
        unpack(debs, lib)
        still = missing_libraries(qt, lib)
        if still:
            raise SystemExit(f"x11-libs: still missing after the download: {still}")
    sys.stdout.write(f"{lib}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
