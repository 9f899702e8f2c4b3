"""Nothing the user needs is clipped: every visible text fits, at three window and font sizes.

The main window opens on the screenshot script's demo profile (scripted
model), is resized to 900 × 600, 1400 × 900 and 1920 × 1080 with the app
font at 10, 13 and 16 pt, and every tab of the side panel and of the memory
inspector is brought to the front in turn; :func:`clipped_texts` then
measures every visible label, button, tab, header section and combo box,
and :func:`sideways` finds every scroll area that scrolls sideways (text
must wrap instead; :data:`NOT_YET_WRAPPING` lists the places not there yet).
The Settings, Sampling and Session settings dialogs get the same check at
10 and 16 pt.  Colours do not change sizes, so the theme is not a parameter.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractScrollArea,
    QApplication,
    QDialog,
    QScrollArea,
    QWidget,
)
from pytestqt.qtbot import QtBot

from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import AppearanceSettings
from agenvoy_desktop.ui.chat_widgets import reading_width
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.model_switcher import ModelSwitcher
from agenvoy_desktop.ui.sessions_panel import fit_subtitle
from agenvoy_desktop.ui.theme import apply_appearance
from tests.fakes import HashingEmbedder
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory
from tests.ui.text_fit import clipped_texts, report

SIZES = [(900, 600), (1400, 900), (1920, 1080)]
FONT_SIZES = [10, 13, 16]
DEMO_SESSION = "記憶系統"
NOT_YET_WRAPPING: dict[str, str] = {}
"""Places still known to scroll sideways, and why (none at present); every other one must
wrap instead.  Remove an entry once its place wraps (the test then holds it to that)."""


@pytest.fixture
def font_size(request: pytest.FixtureRequest, qapp: QApplication) -> Iterator[int]:
    """The app font at the parameter's size; the previous appearance afterwards."""
    style, palette, font = qapp.style().name(), qapp.palette(), QFont(qapp.font())
    size: int = request.param
    apply_appearance(qapp, AppearanceSettings(font_size=size))
    yield size
    apply_appearance(qapp, AppearanceSettings())
    qapp.setStyle(style)
    qapp.setPalette(palette)
    qapp.setFont(font)


@pytest.fixture
def demo_window(
    qtbot: QtBot, demo_profile: AppPaths, make_services: ServicesFactory, make_window: WindowFactory
) -> MainWindow:
    """The window on the demo profile with the demo's memory-design session open."""
    services = make_services(ScriptedChatModel([]), paths=demo_profile, embedder=HashingEmbedder())
    window = make_window(services)
    sessions = window.sessions
    sid = next(
        s for s in sessions.model.session_ids() if sessions.title_of(s).startswith(DEMO_SESSION)
    )
    window.select_session(sid)
    qtbot.waitUntil(lambda: not window.runner.operations())
    return window


def lay_out() -> None:
    """Deliver the posted layout requests, and those they post in turn (nested layouts)."""
    for _ in range(4):
        QApplication.sendPostedEvents()


def settle(qtbot: QtBot, window: MainWindow, width: int, height: int) -> None:
    """Resize and wait until the layout followed (the splitter balances on the resize)."""
    window.resize(width, height)
    qtbot.waitUntil(lambda: window.width() == width and window.height() == height)
    qtbot.waitUntil(lambda: window.splitter.width() >= width - 40)
    qtbot.waitUntil(lambda: not window.runner.operations())
    lay_out()


def show_everywhere(qtbot: QtBot, window: MainWindow) -> Iterator[str]:
    """Bring each side tab and each inspector tab to the front; yields where it is."""
    window.side.setCurrentWidget(window.timeline)
    yield "Timeline"
    window.side.setCurrentWidget(window.inspector)
    for name in window.inspector.tab_names():
        window.inspector.show_tab(name)
        qtbot.waitUntil(lambda: not window.runner.operations())
        lay_out()
        yield f"Memory / {name}"


@pytest.mark.parametrize("font_size", FONT_SIZES, indirect=True)
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_every_text_of_the_window_fits(
    qtbot: QtBot, demo_window: MainWindow, font_size: int, width: int, height: int
) -> None:
    settle(qtbot, demo_window, width, height)
    problems: list[str] = []
    for where in show_everywhere(qtbot, demo_window):
        clips = clipped_texts(demo_window)
        if clips:
            problems.append(report(clips, f"at {width}x{height}, {font_size} pt, {where}"))
        page = demo_window.side.currentWidget()
        if where in NOT_YET_WRAPPING:  # its page at 10 pt at least (held to that before)
            inner = demo_window.inspector.currentWidget() if where.startswith("Memory") else None
            page = inner if font_size <= 10 and isinstance(inner, QScrollArea) else None
        if page is not None:
            problems += [
                f"{where}: {name} scrolls sideways by {overflow} ({unit}) at {font_size} pt"
                for name, overflow, unit in sideways(page)
                if where not in NOT_YET_WRAPPING or name.startswith("QScrollArea")
            ]
    assert not problems, "\n".join(problems)


def sideways(root: QWidget) -> list[tuple[str, int, str]]:
    """Every visible scroll area in *root* (itself included) that scrolls sideways.

    A page or a table that scrolls sideways hides part of every line until
    the user scrolls; text that can wrap must wrap instead.  The scroll bar's
    range is the test, shown or not: a table scrolls by whole columns, so
    its range counts columns, not pixels.
    """
    areas = [root] if isinstance(root, QAbstractScrollArea) else []
    areas += root.findChildren(QAbstractScrollArea)
    found = []
    for area in areas:
        if not area.isVisible():
            continue
        overflow = area.horizontalScrollBar().maximum()
        if overflow > 0:
            per_item = (
                isinstance(area, QAbstractItemView)
                and area.horizontalScrollMode() == QAbstractItemView.ScrollMode.ScrollPerItem
            )
            found.append((describe(area), overflow, "columns" if per_item else "px"))
    return found


def describe(widget: QWidget) -> str:
    """The widget's class and those of the two widgets it sits in, for a failure message."""
    names = [widget.objectName() or type(widget).__name__]
    parent = widget.parentWidget()
    while parent is not None and len(names) < 3:
        names.append(parent.objectName() or type(parent).__name__)
        parent = parent.parentWidget()
    return " in ".join(names)


def dialog_clips(qtbot: QtBot, dialog: QDialog) -> list[str]:
    """Every page of the dialog's tabs (if it has them), checked."""
    qtbot.waitUntil(dialog.isVisible)
    lay_out()
    tabs = getattr(dialog, "tabs", None)
    pages = range(tabs.count()) if tabs is not None else [None]
    problems = []
    for index in pages:
        if tabs is not None and index is not None:
            tabs.setCurrentIndex(index)
            lay_out()
        clips = clipped_texts(dialog)
        if clips:
            page = tabs.tabText(index) if tabs is not None and index is not None else "-"
            problems.append(report(clips, f"in {type(dialog).__name__} page {page!r}"))
    return problems


def close(dialog: QWidget) -> None:
    if isinstance(dialog, QDialog):
        dialog.reject()
    dialog.deleteLater()


DIALOGS = [
    pytest.param("settings", 10, id="settings-10pt"),
    pytest.param("settings", 16, id="settings-16pt"),
    pytest.param("sampling", 10, id="sampling-10pt"),
    pytest.param("sampling", 16, id="sampling-16pt"),
    pytest.param("session", 10, id="session-settings-10pt"),
    pytest.param("session", 16, id="session-settings-16pt"),
]


def open_dialog(window: MainWindow, which: str) -> QDialog:
    """The Settings, Sampling or Session settings dialog over *window*, opened."""
    if which == "settings":
        return window.open_settings()
    if which == "sampling":
        switcher = window.findChild(ModelSwitcher)
        assert switcher is not None
        return switcher.open_sampling()
    dialog = window.session_actions.open_settings(window.session_id)
    assert dialog is not None
    return dialog


@pytest.mark.parametrize(("which", "font_size"), DIALOGS, indirect=["font_size"])
def test_every_text_of_the_dialogs_fits(
    qtbot: QtBot, demo_window: MainWindow, which: str, font_size: int
) -> None:
    settle(qtbot, demo_window, 1400, 900)
    dialog = open_dialog(demo_window, which)
    try:
        problems = dialog_clips(qtbot, dialog)
    finally:
        close(dialog)
    assert not problems, "\n".join(problems)


def test_a_narrow_session_row_drops_whole_parts_of_its_subtitle(qapp: QApplication) -> None:
    metrics = QFontMetrics(qapp.font())
    text = "13:20 · 6 messages · 1 KiB"
    assert fit_subtitle(metrics, text, metrics.horizontalAdvance(text)) == text
    shorter = metrics.horizontalAdvance("13:20 · 6 messages") + 2
    assert fit_subtitle(metrics, text, shorter) == "13:20 · 6 messages"
    tight = metrics.horizontalAdvance("13:20") + 2
    assert fit_subtitle(metrics, text, tight) == "13:20"


@pytest.mark.parametrize("font_size", [10, 16], indirect=True)
def test_chat_lines_keep_a_reading_width_and_follow_the_font(
    qtbot: QtBot, demo_window: MainWindow, font_size: int
) -> None:
    """At 1920 px the chat column stays about 80 characters wide, centred; its text scales."""
    settle(qtbot, demo_window, 1920, 1080)
    view = demo_window.chat.view
    bubbles = demo_window.chat.bubbles()
    assert bubbles
    assert all(b.font().pointSize() == font_size for b in bubbles)
    limit = reading_width(view)
    qtbot.waitUntil(lambda: all(b.width() <= limit for b in bubbles))
    assert limit < view.viewport().width() - 200  # the cap is what holds the width here
    left = bubbles[-1].x()
    right = view.viewport().width() - bubbles[-1].geometry().right()
    assert abs(left - right) <= 24  # centred (the scroll bar's side may differ a little)


@pytest.mark.parametrize("font_size", [10, 16], indirect=True)
@pytest.mark.parametrize(("width", "height"), [(900, 600), (1400, 900)])
def test_the_documents_tab_fits_once_turned_on(
    qtbot: QtBot, demo_window: MainWindow, font_size: int, width: int, height: int
) -> None:
    settle(qtbot, demo_window, width, height)
    demo_window.side.setCurrentWidget(demo_window.inspector)
    demo_window.inspector.show_tab("documents")
    tab = demo_window.inspector.documents_tab
    tab.enable_button.click()
    qtbot.waitUntil(lambda: tab.stack.currentIndex() == 1)
    qtbot.waitUntil(lambda: not demo_window.runner.operations())
    lay_out()
    clips = clipped_texts(demo_window)
    assert not clips, report(clips, f"on the Documents tab at {width}x{height}, {font_size} pt")
