"""The Context tab: exactly what the model receives on the session's next turn.

The messages come from ``agent.context_messages`` — the same call a turn
makes — so the system prompt (with the rolling summary), the window and
the turn note before its last user message (the current time, the recall
block) shown here are the real thing, with the session's own persona and
tools switch (named in the summary line; "Session settings…" changes them).
Tokens are counted with the chat model's own tokenizer and set against its
context.
Without a chat model the messages are still built (same functions, same
settings) and shown; only the token count is missing, and the tab says why.
The line under the summary names who answers next and who wrote the last
answer: a local GGUF (llama.cpp, in this process) or an endpoint with its
address, so it is plain which one answered.
A message deleted in the chat whose undo window is still open is left out, as
the next turn will leave it out (a send ends every pending delete first): the
window is taken again without it and its tool traffic (:func:`leave_out`), and
Undo brings it back here as in the chat.  The last turn's recall block loses
the lines of messages gone since (deleted, or in a session removed or reset,
undo window open or not), and the status line says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QLabel,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.context import to_chat_message, turn_note_index
from agenvoy_desktop.agent.not_remembered import example_count
from agenvoy_desktop.agent.recall import ADVICE_HEADERS, BLOCK_HEADERS
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import KnownError, one_line
from agenvoy_desktop.core.history import take_window
from agenvoy_desktop.core.message_edit import orphaned_with
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.operations.context import (
    ContextView,
    message_text,
    read_context,
    window_settings,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.flow_layout import flow_row
from agenvoy_desktop.ui.inspector.common import InspectorTab, StatusLine, esc, plural
from agenvoy_desktop.ui.session_settings_dialog import SessionSettingsDialog
from agenvoy_desktop.ui.theme import colors

ROLE_COLOURS = {  # (light theme, dark theme)
    "system": ("#6a1b9a", "#ce93d8"),
    "user": ("#1565c0", "#90caf9"),
    "assistant": ("#2e7d32", "#a5d6a7"),
    "tool": ("#e65100", "#ffcc80"),
}


def recalled_count(system_prompt: str) -> int:
    """Lines of the proactive-recall block in a system prompt (0: no block)."""
    headers = [*BLOCK_HEADERS.values(), *ADVICE_HEADERS.values()]
    header = next((h for h in headers if h in system_prompt), None)
    if header is None:
        return 0
    block = system_prompt.split(header, 1)[1]
    return sum(1 for line in block.splitlines() if line.startswith("- "))


Windows = tuple[list[Message], list[Message]]


def windows_without(
    store: MemoryStore, session_id: str, n: int, step: int, hidden: set[str]
) -> Windows:
    """Storage thread: the session's window now, and once the *hidden* messages are deleted.

    A delete takes the tool traffic it would orphan with it, and the window's
    start can move back over older messages, so the second window is taken
    afresh from what the history will hold rather than by dropping rows.
    """
    history = store.history(session_id).messages
    present = {m.id for m in history}
    gone: set[str] = set()
    for message_id in hidden & present:
        gone |= orphaned_with(history, message_id)
    after = [m for m in history if m.id not in gone]
    return take_window(history, n, step), take_window(after, n, step)


def leave_out(
    view: ContextView, before: Sequence[Message], after: Sequence[Message], tokens: Sequence[int]
) -> int:
    """Turn *view*, built from the window *before*, into the prompt of the window *after*.

    The window's messages sit after the system prompt and any made-up
    exchange, in order, with the turn note among them.  Messages that come
    in (*tokens*: their counts, when the view has counts) go first.  The
    model's exact count of the whole prompt no longer applies: the total
    becomes the sum.  Returns how many messages left the view; nothing
    changes if the layout is not the one expected.
    """
    start = 1 + example_count(view.messages)
    note = turn_note_index(view.messages)
    slots = [i for i in range(start, len(view.messages)) if i != note]
    shown = [m for m in before if m.role != "system"]
    if len(slots) != len(shown):
        return 0
    keep = {m.id for m in after}
    known = {m.id for m in before}
    drop = [i for i, m in zip(slots, shown, strict=True) if m.id not in keep]
    added = [m for m in after if m.id not in known and m.role != "system"]
    if not drop and not added:
        return 0
    counted = bool(view.tokens)
    for index in reversed(drop):
        del view.messages[index]
        if counted:
            del view.tokens[index]
    view.messages[start:start] = [to_chat_message(m) for m in added]
    if counted:
        view.tokens[start:start] = list(tokens)
    view.exact_total = None
    return len(drop)


def gone_recall_note(count: int) -> str:
    """The status line's words for recalled lines left out of the last turn's block."""
    quoted = (
        "the message it quoted was deleted, or its session removed or reset"
        if count == 1
        else "the messages they quoted were deleted, or their sessions removed or reset"
    )
    return f"{plural(count, 'recalled line')} of your last message left out: {quoted}."


def render_html(view: ContextView, *, dark: bool = False) -> str:
    """The messages as one readable page: a coloured role line, then the text."""
    blocks: list[str] = []
    made_up = example_count(view.messages)
    note = turn_note_index(view.messages)
    for number, message in enumerate(view.messages):
        role = message.get("role", "?")
        colour = ROLE_COLOURS.get(role, ("#455a64", "#b0bec5"))[int(dark)]
        label = role.capitalize()
        if number == 0 and role == "system":
            label = "System prompt" + (" · custom" if view.settings.custom_prompt else "")
        if number == note:
            label = "Turn note · what changes every turn"
        if role == "tool" and message.get("name"):
            label += f" · {message.get('name')}"
        if 1 <= number <= made_up:
            label += " · made-up example"
        count = f" · {plural(view.tokens[number], 'token')}" if view.tokens else ""
        body = esc(message.get("content", "") or "")
        calls = message.get("tool_calls") or []
        for call in calls:
            function = call.get("function", {})
            args = json.dumps(function.get("arguments", {}), ensure_ascii=False)
            body += f"\n<b>→ calls {esc(str(function.get('name')))}</b>({esc(args)})"
        blocks.append(
            f"<p style='margin: 10px 0 2px 0;'><span style='color:{colour}; font-weight:600;'>"
            f"{esc(label)}</span><span style='color: gray;'>{count}</span></p>"
            f"<pre style='white-space: pre-wrap; margin: 0 0 0 0; font-family: sans-serif;'>"
            f"{body or '<i>(empty)</i>'}</pre>"
        )
    if view.tools:
        count = f" · {plural(view.tool_tokens, 'token')}" if view.tool_tokens else ""
        blocks.append(
            f"<p style='margin: 14px 0 2px 0; color: gray;'><b>Tools offered</b>{count}</p>"
            f"<p style='margin: 0; color: gray;'>{esc(', '.join(view.tools))}</p>"
        )
    return "".join(blocks)


def answerer_html(view: ContextView) -> str:
    """``Answers next: …`` over ``Last answer by: …``; a remote model is flagged as such."""
    parts = []
    if view.backend:
        flag = " <b style='color:#c62828;'>· text leaves this machine</b>" if view.remote else ""
        parts.append(f"Answers next: <b>{esc(view.backend)}</b>{flag}")
    if view.answered_by:
        parts.append(f"Last answer by: <b>{esc(view.answered_by)}</b>")
    return "<br>".join(parts)


def _tools_part(view: ContextView) -> str:
    """The summary line's word on tools: off for this session, per message, or how many."""
    if not view.settings.tools:
        return "<b>tools and memory search off</b> (plain chat)"
    if view.small_model:
        return "tools chosen per message (small model)"
    return plural(len(view.tools), "tool") + " offered"


class ContextTab(InspectorTab):
    """See the module docstring."""

    no_session_text = "Choose a session to see what the model will receive."
    reload_on = ("messages", "summary", "models", "session_settings")

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(services, runner, parent)
        self.runner = runner
        self.view: ContextView | None = None
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextFormat(Qt.TextFormat.RichText)
        self.meter = QProgressBar()
        self.meter.setTextVisible(False)
        self.meter.setFixedHeight(8)
        self.meter_label = QLabel()
        self.meter_label.setWordWrap(True)  # "… 7,006 free after 1,024 reserved …" was clipped
        self.answered_label = QLabel()
        self.answered_label.setWordWrap(True)
        self.answered_label.setTextFormat(Qt.TextFormat.RichText)
        self.copy_button = QPushButton("Copy as JSON")
        self.copy_button.setToolTip("Copy the messages exactly as the model receives them")
        self.copy_button.clicked.connect(self.copy_json)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.settings_button = QPushButton("Session settings…")
        self.settings_button.setToolTip("This session's system prompt and tools switch")
        self.settings_button.clicked.connect(self.edit_settings)
        self.settings_button.setEnabled(False)
        # Buttons on a row of their own, wrapping: beside the description they squeezed it
        # into a column a word wide in the side panel of a 1280-pixel screen.
        top = flow_row(self.settings_button, self.copy_button, self.refresh_button)
        self.status = StatusLine()
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.answered_label)
        layout.addWidget(self.meter_label)
        layout.addWidget(self.meter)
        layout.addWidget(self.status)
        layout.addWidget(self.browser, 1)
        self._show_nothing(self.placeholder)

    def _session_changed(self) -> None:
        self.view = None
        self._show_nothing(self.placeholder)
        self.settings_button.setEnabled(self.session_id is not None)

    def edit_settings(self) -> SessionSettingsDialog | None:
        """Open the session's settings; saving them reloads this tab through the broadcast."""
        if self.session_id is None:
            return None
        dialog = SessionSettingsDialog(self.services, self.runner, self.session_id, parent=self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def refresh(self) -> None:
        sid = self.session_id
        if sid is None:
            return
        services = self.services
        hidden = self.hidden_messages()

        async def load(_op: Operation) -> tuple[ContextView, int]:
            if not hidden:
                return await read_context(services, sid), 0
            # the windows first, then the view: a delete that runs between the two reads
            # leaves a view that no longer holds the message (the layouts then differ and
            # leave_out changes nothing); read the other way round, the view kept it
            store = services.store
            n, step = window_settings(services)
            before, after = await services.storage.run(windows_without, store, sid, n, step, hidden)
            view = await read_context(services, sid)
            return view, leave_out(view, before, after, await self._count(view, before, after))

        self.jobs.start("load", load, self._loaded, self._failed, what="build the context")

    async def _count(
        self, view: ContextView, before: Sequence[Message], after: Sequence[Message]
    ) -> list[int]:
        """Tokens of the messages a pending delete brings into the window (none: not counted)."""
        model = self.services.chat_model
        known = {m.id for m in before}
        added = [m for m in after if m.id not in known and m.role != "system"]
        if not view.tokens or model is None or not added:
            return []
        texts = [message_text(to_chat_message(m)) for m in added]
        try:
            return [int(await model.count_tokens(text)) for text in texts]
        except KnownError as exc:  # a server that went down: as read_context says it
            view.tokens, view.tool_tokens, view.exact_total = [], 0, None
            view.count_problem = one_line(exc)
            return []

    def deletes_changed(self) -> bool:
        return self.session_id is not None

    def copy_json(self) -> None:
        if self.view is not None:
            text = json.dumps(self.view.messages, ensure_ascii=False, indent=2)
            QGuiApplication.clipboard().setText(text)
            self.status.info(f"Copied {plural(len(self.view.messages), 'message')} as JSON.")

    # -- showing ---------------------------------------------------------------------------
    def _show_nothing(self, text: str) -> None:
        self.summary_label.setText(text)
        self.answered_label.hide()
        self.meter.hide()
        self.meter_label.hide()
        self.browser.clear()
        self.copy_button.setEnabled(False)

    def _failed(self, message: str) -> None:
        self.status.error(f"The context could not be built: {message}")

    def _loaded(self, loaded: tuple[ContextView, int]) -> None:
        view, left_out = loaded
        self._show(view)
        if self.status.is_error:
            return
        notes = []
        if left_out:
            notes.append(
                f"{plural(left_out, 'message')} deleted in the chat "
                f"{'is' if left_out == 1 else 'are'} left out; Undo in the chat brings "
                f"{'it' if left_out == 1 else 'them'} back."
            )
        if view.recall_left_out:
            notes.append(gone_recall_note(view.recall_left_out))
        if notes:
            self.status.info(" ".join(notes))

    def _show(self, view: ContextView) -> None:
        self.view = view
        self.status.clear_message()
        if view.settings_problem:
            self.status.error(f"{view.settings_problem}; the default settings are used.")
        self.copy_button.setEnabled(True)
        made_up = example_count(view.messages)
        note = turn_note_index(view.messages)
        window = len(view.messages[1:]) - made_up - (note is not None)
        system = view.messages[0].get("content", "") if view.messages else ""
        has_summary = "Summary of the earlier conversation" in system
        if note is not None:  # the recall block is in the note, before the last user message
            system = view.messages[note].get("content", "")
        recalled = recalled_count(system)
        persona = "Custom system prompt" if view.settings.custom_prompt else "Default system prompt"
        parts = [
            f"<b>{persona}</b> ({'with' if has_summary else 'no'} rolling summary"
            + (
                f", {plural(recalled, 'recalled message')} from your last message"
                if recalled
                else ""
            )
            + ")",
            f"<b>{plural(window, 'message')}</b> from the window (N = {view.window_messages}"
            + (f", in steps of {view.window_step}" if view.window_step else "")
            + ")"
            + (
                f" after {plural(made_up // 2, 'made-up exchange')} that show how to say "
                "\u201cI don't know\u201d"
                if made_up
                else ""
            ),
            _tools_part(view),
        ]
        total = view.total_tokens
        if view.count_problem:
            self.meter.hide()
            self.meter_label.hide()
            parts.append(
                "<span style='color:#c62828;'>Tokens cannot be counted now:</span> "
                + esc(view.count_problem)
            )
        elif total is None or view.context_size is None:
            self.meter.hide()
            self.meter_label.hide()
            problem = self.services.chat_problem
            why = f" {esc(problem.message)} {esc(problem.fix)}" if problem else ""
            parts.append(
                "<span style='color:#c62828;'>No chat model is loaded, so tokens cannot be "
                f"counted.</span>{why}"
            )
        else:
            self._show_meter(view, total)
            parts.append(f"model <b>{esc(view.model_name or '?')}</b>")
        self.summary_label.setText(" · ".join(parts))
        self.answered_label.setText(answerer_html(view))
        self.answered_label.setVisible(bool(view.backend or view.answered_by))
        self.browser.setHtml(render_html(view, dark=colors(self.palette()).dark))

    def _show_meter(self, view: ContextView, total: int) -> None:
        size = view.context_size or 1
        approx = "" if view.exact_total is not None else "≈ "
        self.meter.setRange(0, size)
        self.meter.setValue(min(total, size))
        free = size - total - view.answer_reserve
        room = (
            f"{free:,} free after {view.answer_reserve:,} reserved for the answer"
            if free >= 0
            else f"{-free:,} over: the oldest window pairs will be trimmed"
        )
        self.meter_label.setText(
            f"<b>{approx}{total:,}</b> of {size:,} tokens ({100 * total / size:.0f} %) · {room}"
        )
        c = colors(self.palette())
        colour = c.error_fg if free < 0 else "#d69e2e" if total > 0.75 * size else c.accent
        self.meter.setStyleSheet(
            f"QProgressBar {{ border: none; border-radius: 4px; background: {c.chip}; }}"
            f" QProgressBar::chunk {{ border-radius: 4px; background: {colour}; }}"
        )
        self.meter.show()
        self.meter_label.show()
