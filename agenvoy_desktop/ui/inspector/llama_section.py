"""The Models tab's "llama.cpp on this computer" section: the facts ``--version`` lists.

Kernel path (extra buffers on or off, and why), CPU features, GPU offload,
the thread plan and the prompt batch measured for each model come from
:func:`~agenvoy_desktop.llm.build_info.llama_build`, which imports llama.cpp
and reads the machine cache, so :func:`read_llama_build` runs in the tab's
worker thread with the other "in use" facts; the widget only formats them.

The side panel can be 240 px wide, where the full list is a dozen wrapped
lines, so the section folds: folded it is one line (extra buffers, threads,
CPU or GPU, the chat model's batch), open it is one fact per line and one
measured batch per model.  It opens by itself in a wide tab and folds in a
narrow one until the person clicks it; either way the text is selectable.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget

from agenvoy_desktop.llm.build_info import LlamaBuild, llama_build
from agenvoy_desktop.llm.calibration import Calibration
from agenvoy_desktop.ui.inspector.common import esc
from agenvoy_desktop.ui.theme import colors

TITLE = "llama.cpp on this computer"
ROW = "<p style='margin: 0 0 3px 0;'>{}</p>"
MODEL_ROW = "<p style='margin: 0 0 3px 12px;'>{}</p>"


def read_llama_build(threads_setting: int | None) -> tuple[LlamaBuild | None, str | None]:
    """The build facts, or None and why (worker thread: imports llama.cpp, reads the cache).

    A library that fails to load must not keep the rest of the tab from showing;
    the reason is shown in the section instead (not logged: a log record made
    on a worker QThread leaves a dummy ``threading`` object behind).
    """
    try:
        return llama_build(threads_setting), None
    except Exception as exc:  # noqa: BLE001 - shown in the section, the tab still loads
        return None, f"llama.cpp could not be asked about this build: {exc}"


def newest_per_model(calibrations: Iterable[Calibration]) -> list[Calibration]:
    """The first (newest) calibration of each model: one line per model, not per setting."""
    seen: dict[str, Calibration] = {}
    for calibration in calibrations:
        seen.setdefault(calibration.model, calibration)
    return list(seen.values())


def fact_rows(build: LlamaBuild) -> list[tuple[str, str]]:
    """``lines()`` as (label, value), the per-model batch lines left to :func:`details_html`."""
    summaries = [c.summary() for c in build.calibrations]
    rows: list[tuple[str, str]] = []
    for line in build.lines():
        if any(line.endswith(summary) for summary in summaries):
            continue
        label, sep, value = line.partition(": ")
        rows.append((label[:1].upper() + label[1:], value) if sep else ("", line))
    return rows


def details_html(build: LlamaBuild | None, kernels: str, problem: str | None, muted: str) -> str:
    """The open section: one fact per line, then the newest measured batch of each model."""
    if build is None:
        return ROW.format(f"<b>Kernels:</b> {esc(kernels)}") + ROW.format(esc(problem or ""))
    html = "".join(
        ROW.format(
            f"<b>{esc(label)}:</b> {esc(value)}"
            if label
            else f"<span style='color:{muted};'>{esc(value)}</span>"
        )
        for label, value in fact_rows(build)
    )
    batches = newest_per_model(build.calibrations)
    if batches:
        html += ROW.format("<b>Prompt batch</b> (newest measurement per model):")
        html += "".join(
            MODEL_ROW.format(f"<i>{esc(c.model)}</i>: {esc(c.summary())}") for c in batches
        )
    return html


def gist(build: LlamaBuild | None, kernels: str, chat_names: set[str]) -> str:
    """The folded section's one line: what decides speed here, in a few words."""
    if build is None:
        return kernels
    parts = [
        f"extra buffers {'on' if build.extra_buffers else 'off'}",
        f"{build.threads[0]} / {build.threads[1]} threads",
        "GPU offload" if build.gpu_offload else "CPU only",
    ]
    chat = next((c for c in build.calibrations if c.model in chat_names), None)
    if chat is not None:
        parts.append(f"prompt batch {chat.batch}")
    return " · ".join(parts)


class LlamaSection(QWidget):
    """A fold-out block under the models in use; see the module docstring."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QToolButton()
        self.toggle.setText(TITLE)
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setToolTip("Show or hide how llama.cpp runs here (as `--version` lists it)")
        self.toggle.setStyleSheet("QToolButton { border: none; background: transparent; }")
        self.toggle.clicked.connect(self._clicked)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.label.setContentsMargins(4, 0, 0, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.label)
        self._chosen = False
        self._facts: tuple[LlamaBuild | None, str, str | None, set[str]] = (None, "", None, set())
        self._set_open(False)

    def show_facts(
        self,
        build: LlamaBuild | None,
        *,
        kernels: str,
        problem: str | None = None,
        chat_names: Iterable[str] = (),
    ) -> None:
        """Show what the worker gathered (*kernels* and *problem* when *build* is None)."""
        self._facts = (build, kernels, problem, set(chat_names))
        self._render()

    def set_wide(self, wide: bool) -> None:
        """Open when wide, folded when narrow, unless the person has chosen."""
        if not self._chosen:
            self._set_open(wide)

    def is_open(self) -> bool:
        return self.toggle.isChecked()

    def text(self) -> str:
        return self.label.text()

    def _clicked(self, checked: bool) -> None:
        self._chosen = True
        self._set_open(checked)

    def _set_open(self, open_: bool) -> None:
        self.toggle.setChecked(open_)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow)
        self._render()

    def _render(self) -> None:
        build, kernels, problem, chat_names = self._facts
        muted = colors(self.palette()).muted
        if self.is_open():
            self.label.setText(details_html(build, kernels, problem, muted))
            self.label.setToolTip("")
            return
        self.label.setToolTip("Threads: decoding / prompts. Click the heading for the details.")
        line = esc(gist(build, kernels, chat_names))
        self.label.setText(f"<span style='color:{muted};'>{line}</span>" if line else "")
