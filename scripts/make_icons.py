"""Render the app icon (resources/icons/agenvoy-desktop.svg) to PNG, ICO and ICNS.

The SVG is the source; the raster files are generated and committed (they are
small) because the desktop entry, the Windows installer and the macOS bundle
each want their own format.  Run after editing the SVG:

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/make_icons.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"
SOURCE = ICONS / "agenvoy-desktop.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def render(renderer: QSvgRenderer, size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    return image


def main() -> int:
    _app = QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        sys.stderr.write(f"cannot read {SOURCE}\n")
        return 1
    for size in PNG_SIZES:
        target = ICONS / f"agenvoy-desktop-{size}.png"
        if not render(renderer, size).save(str(target), "PNG"):
            sys.stderr.write(f"cannot write {target}\n")
            return 1
    ok = render(renderer, 256).save(str(ICONS / "agenvoy-desktop.ico"), "ICO")
    ok = render(renderer, 512).save(str(ICONS / "agenvoy-desktop.icns"), "ICNS") and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
