"""Screenshots of every inspector tab and the settings dialog on the prepared profile.

Run under Xvfb from the project folder::

    xvfb-run -a .venv/bin/python -m tests.ui.inspector_screenshots OUT_DIR [--dark]

Not a test: a helper to look at the tabs the way a person sees them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import qasync
from PySide6.QtWidgets import QApplication, QWidget

from agenvoy_desktop.core.summary import prompt_text
from agenvoy_desktop.llm.discovery import DiscoveredModel
from agenvoy_desktop.llm.gguf_info import read_gguf_info
from agenvoy_desktop.paths import HOME_ENV, app_paths
from agenvoy_desktop.ui.async_runner import AsyncRunner
from agenvoy_desktop.ui.inspector import InspectorPanel
from agenvoy_desktop.ui.settings_dialog import SettingsDialog
from agenvoy_desktop.ui.theme import _dark_palette, apply_theme
from tests.tiny_gguf import write_tiny_llama
from tests.ui.inspector_profile import close_profile, open_profile


def pump(app: QApplication, condition: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the tab did not load")
        app.processEvents()
        time.sleep(0.005)
    for _ in range(20):
        app.processEvents()


def grab(widget: QWidget, out: Path, name: str) -> None:
    widget.grab().save(str(out / f"{name}.png"))
    print(out / f"{name}.png")


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/inspector-shots")
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="agenvoy-shots-"))
    os.environ[HOME_ENV] = str(home)
    app = QApplication(sys.argv[:1])
    apply_theme(app)
    if "--dark" in sys.argv:
        app.setStyle("Fusion")
        app.setPalette(_dark_palette())
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    asyncio.events._set_running_loop(loop)
    profile = open_profile(app_paths(home))
    services = profile.services
    assert services.agent is not None
    services.agent.summary_text = partial(prompt_text, services.store)
    models = home / "downloads"
    models.mkdir()
    tiny = write_tiny_llama(models / "tinyllama-test.gguf")
    runner = AsyncRunner()
    panel = InspectorPanel(services, runner)
    panel.resize(1100, 720)
    panel.show()
    panel.set_session(profile.main)
    pump(app, lambda: panel.summary_tab.snapshot is not None)
    grab(panel, out, "inspector-summary")
    summary_tab = panel.summary_tab
    summary_tab._scroll.ensureWidgetVisible(summary_tab.changed, 0, 0)  # what the last pass did
    pump(app, lambda: True)
    grab(panel, out, "inspector-summary-changes")

    panel.show_tab("context")
    pump(app, lambda: panel.context_tab.view is not None)
    grab(panel, out, "inspector-context")

    panel.show_tab("recall")
    recall = panel.recall_tab
    recall.mode_combo.setCurrentIndex(recall.mode_combo.findData("hybrid"))
    recall.query_edit.setText("vegetarian restaurant")
    recall.search()
    pump(app, lambda: recall.answer is not None and "vectors" in recall.stats_label.text())
    grab(panel, out, "inspector-recall")

    panel.show_tab("errors")
    errors = panel.errors_tab
    pump(app, lambda: errors.model.rowCount() == 4)
    errors.select_record(errors.visible_records()[1].id)
    pump(app, lambda: errors.selected() is not None)
    grab(panel, out, "inspector-errors")

    panel.show_tab("models")
    tab = panel.models_tab
    pump(app, lambda: tab.view is not None)
    tab.add_file(tiny)
    pump(app, lambda: tab.catalogue_table.rowCount() == 1)
    found = DiscoveredModel(
        tiny, "LM Studio", "tinyllama-test", tiny.stat().st_size, read_gguf_info(tiny), None
    )
    other = models / "qwen2.5-7b-instruct-q4_k_m.gguf"
    other.write_bytes(b"GGUF")
    broken = DiscoveredModel(other, "Ollama", "qwen2.5:7b", 4_683_073_184, None, "truncated header")
    tab.discover = lambda: [found, broken]
    tab.look_for_models()
    pump(app, lambda: tab.found_table.rowCount() == 1)
    grab(panel, out, "inspector-models")

    dialog = SettingsDialog(services)
    dialog.show()
    pump(app, dialog.isVisible)
    grab(dialog, out, "settings-memory")
    dialog.tabs.setCurrentIndex(1)
    pump(app, lambda: True)
    grab(dialog, out, "settings-models")
    dialog.tabs.setCurrentIndex(2)
    dialog.add_folder(str(home))
    dialog.folder_list.addItem(str(home / "vanished"))
    dialog.window_spin.setValue(1000)
    dialog.accept()
    pump(app, lambda: True)
    grab(dialog, out, "settings-folders-invalid")
    dialog.close()

    panel.close()
    close_profile(profile)
    asyncio.events._set_running_loop(None)
    loop.close()


if __name__ == "__main__":
    main()
