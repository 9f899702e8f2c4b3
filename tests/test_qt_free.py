"""Only agenvoy_desktop/ui/ may import Qt (STYLE.md: a Qt-free core, enforced)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agenvoy_desktop"
QT_MODULES = ("PySide6", "qasync", "shiboken6")


def _non_ui_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "ui" not in p.relative_to(PACKAGE).parts[:1])


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _qt_imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        found += [n for n in names if n.split(".")[0] in QT_MODULES]
    return found


def test_there_are_modules_to_check() -> None:
    names = {_module_name(p) for p in _non_ui_files()}
    assert {"agenvoy_desktop.core.store", "agenvoy_desktop.cli"} <= names
    assert not any(n.startswith("agenvoy_desktop.ui") for n in names)


@pytest.mark.parametrize("path", _non_ui_files(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_source_does_not_import_qt(path: Path) -> None:
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    assert _qt_imports(tree) == [], f"{path} imports Qt; only agenvoy_desktop/ui/ may"


def test_detector_sees_every_import_form() -> None:
    source = (
        "import PySide6\nfrom PySide6.QtCore import QObject\nimport qasync as q\n"
        "def f():\n    import shiboken6\n    importlib.import_module('PySide6.QtWidgets')\n"
        "from . import PySide6\nimport numpy\n"
    )
    assert _qt_imports(ast.parse(source)) == [
        "PySide6",
        "PySide6.QtCore",
        "qasync",
        "shiboken6",
        "PySide6.QtWidgets",
    ]


def test_importing_every_non_ui_module_loads_no_qt() -> None:
    # __main__ runs the CLI on import; it is a two-line shim over cli.main.
    modules = [_module_name(p) for p in _non_ui_files() if p.name != "__main__.py"]
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {QT_MODULES!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
