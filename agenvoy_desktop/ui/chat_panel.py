"""The conversation: messages, streaming answers, tool chips and the input box.

A thin view over the agent.  A turn runs as one :class:`AsyncRunner`
operation; the agent's events (``MessageSaved``, ``AnswerDelta``,
``ToolCallStarted``/``Finished``) arrive on the UI thread through qasync and
update widgets directly.  Deltas are coalesced: the streaming bubble is
re-rendered at most every :data:`RENDER_INTERVAL_MS`, so a fast model cannot
flood the event loop.

A line under the pending answer says what the turn does now
(:mod:`turn_status`); each bubble carries its actions (:mod:`bubble_actions`):
Edit-and-resend and Regenerate start turns here, the others live in
:mod:`message_actions`.  Actions that change the session are off while a
turn runs in it.

History is shown from the archive (it holds everything, also what
compaction trimmed from history.json), newest page first; older pages load
on demand and when the timeline asks to reveal an old message.  Pages are
rendered a few messages per loop iteration so a long session never freezes
the window while it opens.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.turn import (
    AnswerDelta,
    AnswerRetracted,
    MessageSaved,
    RecallInjected,
    ToolCallFinished,
    ToolCallStarted,
    TurnEvent,
    TurnResult,
    TurnStatus,
)
from agenvoy_desktop.core.errors import is_known, one_line
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.operations.changes import MemoryChanges, turn_changes
from agenvoy_desktop.operations.chat import HiddenWhy, RecallRecord, hidden_lines, load_page, seq_of
from agenvoy_desktop.operations.sessions import create_session
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.chat_widgets import (
    ChatBubble,
    ChatView,
    ModelBanner,
    RecallChip,
    ToolChip,
)
from agenvoy_desktop.ui.document_viewer import CitationOpener
from agenvoy_desktop.ui.markdown_view import WrappingLabel
from agenvoy_desktop.ui.message_actions import MessageActions
from agenvoy_desktop.ui.pending_ops import PendingOps
from agenvoy_desktop.ui.theme import apply_sheet, chat_style, colors
from agenvoy_desktop.ui.turn_status import (
    TurnStatusLine,
    done_details,
    done_text,
    phase_text,
    phase_tip,
    tool_phrase,
)
from agenvoy_desktop.ui.welcome import WelcomePanel, profile_has_messages

log = logging.getLogger(__name__)

PAGE_MESSAGES = 40
RENDER_BATCH = 5
RENDER_INTERVAL_MS = 40
RENDER_SHARE = 4
"""Re-render a streaming answer at most every RENDER_SHARE × its last render time."""
STOP_GRACE_MS = 3000
"""After Stop, a model that has not ended its stream by then is cancelled outright."""
NOTE_MS = 4000
DRAFT_PAUSE_MS = 700
"""A pause in typing this long hands the message so far to the agent, whose model reads
the prompt it would get meanwhile (``Agent.draft_changed``)."""
BUSY_HERE = "Wait until the answer is finished (or stop it) to change this conversation."


class Composer(QPlainTextEdit):
    """The input box: Enter sends, Shift+Enter starts a new line."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("Message Agenvoy…  (Enter to send, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        self.document().contentsChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            event.accept()
            self.submitted.emit()
            return
        super().keyPressEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        """A new font size (Settings, or a restyle) changes the line height: fit again."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit()

    def _fit(self) -> None:
        line = self.fontMetrics().lineSpacing()
        lines = max(2, min(8, int(self.document().size().height())))
        self.setFixedHeight(lines * line + 16)


class ChatPanel(QWidget):
    """Messages of the current session and the controls of a turn."""

    turn_started = Signal(str)
    turn_finished = Signal(str)
    settings_requested = Signal()
    starter_requested = Signal()

    def __init__(
        self, services: AppServices, runner: AsyncRunner, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.session_provider: Callable[[], Awaitable[str]] = self._default_session
        """Gives the session a new message goes to (the window creates one if needed)."""
        self.show_session: Callable[[str], object] = self.set_session
        """Shows another session (a fork); the window selects it in every panel."""
        self._sid: str | None = None
        self._generation = 0
        self._first_seq = 0
        self._turn: Operation | None = None
        self._load_op: Operation | None = None
        self._turn_sid: str | None = None
        self._last_lines: dict[str, tuple[str, str]] = {}
        """Each session's last finished-turn line (speed, time; its tooltip), shown again
        when the session is opened again."""
        self._stop = asyncio.Event()
        self._partial = ""
        self._streaming: ChatBubble | None = None
        self._pending_user: ChatBubble | None = None
        self._editing: ChatBubble | None = None
        """The user message the composer's text will replace (Edit)."""
        self._asked: str | None = None
        """The stored user message the running turn answers."""
        self._last_turn_sid: str | None = None
        self._last_question: ChatBubble | None = None
        self._last_partial: ChatBubble | None = None
        """The cut-off answer of the last turn (kept, marked interrupted, when the model fails)."""
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(RENDER_INTERVAL_MS)
        self._render_timer.timeout.connect(self._render_partial)
        self._draft_timer = QTimer(self)
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_PAUSE_MS)
        self._draft_timer.timeout.connect(self._draft_paused)
        self.citations = CitationOpener(services.paths, runner, self)
        """Makes citations of the user's documents in answers open the cited lines."""
        self._welcome_wanted: bool | None = None
        """The profile held no message when the window opened (None: not known yet); set
        False for good once a message is sent or a conversation with messages is shown."""
        self._build()
        self.message_actions = MessageActions(self, parent=self)
        self.pending_kind: Callable[[str], str | None] = lambda _sid: None
        """The kind of the reset or remove of a session in its undo window ("reset",
        "remove"; None: neither), the window's: a recall chip says why it hides a line."""
        self._hide_round = 0
        self.pending.changed.connect(self.hide_withheld_recall)
        self.pending.executed.connect(lambda _op: self.hide_withheld_recall())
        self.refresh_model_state()
        runner.memory_changed.connect(self._on_memory_changed)
        self._check_welcome()

    @property
    def pending(self) -> PendingOps:
        """Message deletes in their undo window (the app flushes them when it quits)."""
        return self.message_actions.pending

    @property
    def generation(self) -> int:
        """Bumped whenever the view starts showing something else."""
        return self._generation

    def _build(self) -> None:
        self.banner = ModelBanner()
        self.banner.settings_clicked.connect(self.settings_requested)
        self.banner.starter_clicked.connect(self.starter_requested)
        self.view = ChatView()
        self.view.earlier_requested.connect(self.load_earlier)
        self.welcome = WelcomePanel(self.services.paths.config_dir)
        self.welcome.example_chosen.connect(self.put_in_composer)
        self.welcome.hide()
        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.textChanged.connect(self._draft_timer.start)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self._send_or_stop)
        self.send_button.setMinimumWidth(80)
        self.status = QLabel()
        self.status.setObjectName("ChatStatus")
        self.turn_status = TurnStatusLine()
        self.view.footer_box.addWidget(self.turn_status)
        self.edit_bar = QWidget()
        self.edit_label = QLabel("Editing your message — sending replaces it and what follows.")
        self.edit_label.setObjectName("ChatStatus")
        cancel = QPushButton("Cancel edit")
        cancel.setFlat(True)
        cancel.clicked.connect(self.cancel_edit)
        edit_row = QHBoxLayout(self.edit_bar)
        edit_row.setContentsMargins(4, 0, 0, 0)
        edit_row.addWidget(self.edit_label, 1)
        edit_row.addWidget(cancel)
        self.edit_bar.hide()
        self.input_header = QVBoxLayout()
        self.input_header.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.composer, 1)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.addWidget(self.banner)
        layout.addWidget(self.welcome, 1)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.status)
        layout.addLayout(self.input_header)
        layout.addWidget(self.edit_bar)
        layout.addLayout(row)
        self.restyle()

    def set_input_header(self, widget: QWidget) -> None:
        """Put *widget* just above the message box (the model switcher goes here)."""
        self.input_header.addWidget(widget)
        self._restore_status()  # the header names the model now

    def restyle(self) -> None:
        """Colours from the application palette (again after a light/dark switch)."""
        apply_sheet(
            self,
            lambda p: (
                chat_style(p)
                + f" #ChatStatus, #TurnStatus {{ color: {colors(p).muted}; padding: 0 4px; }}"
                + f" #BubbleProblem {{ color: {colors(p).error_fg}; }}"
                + f" #ChatBubble:focus {{ border: 2px solid {colors(p).accent}; }}"
                + " #BubbleActions QToolButton { padding: 0 4px; }"
            ),
        )
        self.welcome.restyle()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            for label in self.findChildren(WrappingLabel):
                label.forget_heights()

    async def _default_session(self) -> str:
        """Without a window: the shown session, or a new one."""
        if self._sid is None:
            created = await self.services.storage.run(create_session, self.services.store)
            self.runner.broadcast(created.changes)
            self._sid = created.value
        return self._sid

    # -- state ----------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        return self._sid

    @property
    def busy(self) -> bool:
        """A turn is running."""
        return self._turn is not None

    def bubbles(self) -> list[ChatBubble]:
        return self.view.items(ChatBubble)

    def chips(self) -> list[ToolChip]:
        return self.view.items(ToolChip)

    def refresh_model_state(self) -> None:
        """Show the banner while there is no chat model (and say how to fix it)."""
        problem = self.services.chat_problem
        if self.services.agent is None:
            message = problem.message if problem else "No chat model is configured."
            fix = problem.fix if problem else "Choose a model in Settings → Models."
            self.banner.set_problem(message, fix)
            self.banner.show()
        else:
            self.banner.hide()
        self._restore_status()

    def _on_memory_changed(self, changes: MemoryChanges) -> None:
        if changes.models:
            self.refresh_model_state()
        if changes.sessions and self._welcome_wanted and not self.busy:
            self._check_welcome()  # an import may have brought the first history

    # -- the first start's welcome ------------------------------------------------------
    def _check_welcome(self) -> Operation:
        """Ask (storage thread) whether the profile holds any message yet."""
        store = self.services.store
        return self.runner.run(
            self.services.storage.run(profile_has_messages, store),
            what="look for earlier conversations",
            on_success=self._welcome_checked,
        )

    def _welcome_checked(self, has_messages: bool) -> None:
        if self._welcome_wanted is not False:  # a message sent meanwhile settled it
            self._welcome_wanted = not has_messages
        self._update_welcome()

    def _update_welcome(self) -> None:
        """The welcome instead of the empty view, while it is wanted and nothing is shown."""
        content = self.bubbles() or self.chips()
        shown = bool(self._welcome_wanted) and not self.busy and not content
        self.welcome.setVisible(shown)
        self.view.setVisible(not shown)

    def _end_welcome(self) -> None:
        """History exists now: the welcome never comes back in this window."""
        if self._welcome_wanted is not False:
            self._welcome_wanted = False
            self._update_welcome()

    @property
    def welcome_shown(self) -> bool:
        """The welcome is what the chat area shows (for tests and the window)."""
        return not self.welcome.isHidden()

    def put_in_composer(self, text: str) -> None:
        """Put *text* into the message box to be read and sent by the person (not sent here)."""
        self.composer.setPlainText(text)
        self.focus_input()
        self.composer.moveCursor(self.composer.textCursor().MoveOperation.End)

    def focus_input(self) -> None:
        self.composer.setFocus(Qt.FocusReason.ShortcutFocusReason)

    # -- sessions ---------------------------------------------------------------------
    def set_session(self, session_id: str | None, *, empty: bool = False) -> Operation | None:
        """Show *session_id* (None: an empty chat) — its newest page first.

        ``empty`` says the session was just created: nothing to load (and a
        load racing the first message would show it twice).
        """
        self._sid = session_id
        self._generation += 1
        self._streaming = self._pending_user = None
        self.view.clear()
        self._forget_shown()
        self._show_last_line(session_id)
        self._update_welcome()
        if self.composer.toPlainText().strip():  # what is typed now goes to this session
            self._draft_timer.start()
        if session_id is None or empty:
            return None
        self._load_op = self.runner.run(
            self._load_newest(session_id, self._generation), what="open the session"
        )
        return self._load_op

    def _show_last_line(self, session_id: str | None) -> None:
        """The session's last "12.3 tokens/s · …" line, when no turn runs here."""
        line = self._last_lines.get(session_id) if session_id is not None else None
        if line is None or self._busy_here():
            return
        self.turn_status.show_line(*line)

    def show_cleared(self) -> None:
        """Empty the view at once (a reset whose undo window is open)."""
        if self._sid is not None:
            self._last_lines.pop(self._sid, None)
        self._generation += 1
        self._streaming = self._pending_user = None
        self.view.clear()
        self._forget_shown()

    def _forget_shown(self) -> None:
        """What belonged to the view just cleared: an edit, the status line, the versions."""
        if self._editing is not None:
            self._editing = None
            self.composer.clear()
        self.edit_bar.hide()
        self.turn_status.setVisible(self._busy_here() and self._turn_sid is not None)
        self.view.set_actions_enabled(not self._busy_here())
        self.message_actions.versions.clear()

    def reload(self) -> Operation | None:
        return self.set_session(self._sid)

    async def _load_newest(self, sid: str, generation: int) -> None:
        """Show the newest page unless another session was chosen meanwhile.

        *generation* is taken when the load is requested, not when the
        coroutine first runs (by then a newer request may have bumped it).
        """
        store = self.services.store
        page = await self.services.storage.run(load_page, store, sid, None, PAGE_MESSAGES)
        if generation != self._generation:
            return
        self._first_seq = page.first_seq
        if page.messages:
            self._end_welcome()
        await self._render(page.messages, generation, prepend=False, recalls=page.recalls)
        await self._hide_if_withheld(generation)
        self.view.set_has_earlier(page.has_earlier)
        if self._turn is not None and self._turn_sid == sid and self._partial:
            self._render_partial()
        self.view.scroll_to_bottom()
        self.view.set_actions_enabled(not self._busy_here())
        if not self._busy_here():
            self.message_actions.load_versions(sid, generation)
        if self.services.agent is not None:  # shown: its next prompt is read meanwhile
            self.services.agent.session_opened(sid)

    # -- recall chips and the undo window ---------------------------------------------------
    def hide_withheld_recall(self) -> Operation | None:
        """Hide the recall chips' lines of what waits in an undo window (a session being
        removed or reset, a message being deleted), show again those Undo brought back, and
        say of those whose operation ran that they are gone."""
        if not self.view.findChildren(RecallChip):
            return None
        return self.runner.run(
            self._hide_withheld(self._generation), what="update the remembered lines"
        )

    async def _hide_if_withheld(self, generation: int) -> None:
        """A page just shown: its chips were stored before any undo window now open."""
        if self.services.withheld() or self.pending.withheld():
            await self._hide_withheld(generation)

    async def _hide_withheld(self, generation: int) -> None:
        ids = {i for chip in self.view.findChildren(RecallChip) for i in chip.ids}
        if not ids:
            return
        self._hide_round += 1
        round_ = self._hide_round
        withheld = self.services.withheld() | self.pending.withheld()
        store = self.services.store
        found = await self.services.storage.run(hidden_lines, store, ids, withheld)
        if generation != self._generation or round_ != self._hide_round:
            return  # another session shown, or a newer reading on its way
        hidden = {i: self._hidden_reason(why, sid) for i, (why, sid) in found.items()}
        for chip in self.view.findChildren(RecallChip):
            if ids.issuperset(chip.ids):
                chip.hide_lines(hidden)

    def _hidden_reason(self, why: HiddenWhy, session_id: str) -> str:
        """A :data:`~agenvoy_desktop.ui.chat_widgets.HIDDEN_WORDS` key for a hidden line."""
        if why == "session":
            return "reset" if self.pending_kind(session_id) == "reset" else "removed"
        return "deleted" if why == "message" else "gone"

    def load_earlier(self) -> Operation | None:
        if self._sid is None:
            return None
        return self.runner.run(
            self._load_earlier(self._sid, self._generation), what="load earlier messages"
        )

    async def _load_earlier(self, sid: str, generation: int, until_seq: int | None = None) -> None:
        store = self.services.store
        while True:
            size = PAGE_MESSAGES
            if until_seq is not None:
                size = max(size, self._first_seq - until_seq + 3)
            page = await self.services.storage.run(load_page, store, sid, self._first_seq, size)
            if generation != self._generation:
                return
            self._first_seq = page.first_seq
            await self._render(page.messages, generation, prepend=True, recalls=page.recalls)
            await self._hide_if_withheld(generation)
            self.view.set_has_earlier(page.has_earlier)
            if until_seq is None or self._first_seq <= until_seq or not page.has_earlier:
                return

    def reveal_message(self, message_id: str) -> Operation | None:
        """Scroll to *message_id*, loading older pages until it is shown."""
        if self._sid is None:
            return None
        return self.runner.run(
            self._reveal(self._sid, self._generation, message_id), what="show that message"
        )

    async def _reveal(self, sid: str, generation: int, message_id: str) -> None:
        loading = self._load_op.task if self._load_op is not None else None
        if loading is not None and not loading.done():
            await asyncio.wait([loading])  # the newest page first, then older ones
        if self.view.widget_for(message_id) is None:
            seq = await self.services.storage.run(seq_of, self.services.store, message_id)
            if generation != self._generation:
                return
            if seq is not None and seq < self._first_seq:
                await self._load_earlier(sid, generation, until_seq=seq)
        self.view.reveal(message_id)

    async def _render(
        self,
        messages: Sequence[Message],
        generation: int,
        *,
        prepend: bool,
        recalls: Mapping[str, RecallRecord] | None = None,
    ) -> None:
        """Add widgets a batch at a time, yielding to the loop in between."""
        chips: dict[str, ToolChip] = {}
        batch: list[QWidget] = []
        placed = 0
        hidden = self.message_actions.hidden(self._sid) if self._sid is not None else set()
        asked: str | None = None
        for number, message in enumerate(messages, 1):
            if message.role == "user":
                asked = message.id
            if message.id in hidden:
                pass  # deleted, its undo window still open
            elif self.view.widget_for(message.id) is None:  # a live turn may have shown it
                batch += self._widgets_for(message, chips, asked)
                if recalls and message.id in recalls:
                    record = recalls[message.id]
                    batch.append(
                        RecallChip(record.text, record.ids, record.passages, record.withdrawn)
                    )
            if number % RENDER_BATCH == 0 or number == len(messages):
                if prepend:
                    self.view.insert_top(placed, batch)
                else:
                    for widget in batch:
                        self.view.append(widget)
                placed += len(batch)
                batch = []
                await asyncio.sleep(0)
                if generation != self._generation:
                    return

    def _widgets_for(
        self, message: Message, chips: dict[str, ToolChip], asked: str | None = None
    ) -> list[QWidget]:
        """The bubble and/or tool chips that show one stored message."""
        if message.role == "tool":
            chip = chips.get(str(message.extra.get("tool_call_id", "")))
            fresh = chip is None
            chip = chip or ToolChip(
                str(message.extra.get("tool_call_id", "")),
                str(message.extra.get("name", "tool")),
                {},
            )
            chip.set_result_message(message)
            self.view.register(message.id, chip)
            return [chip] if fresh else []
        out: list[QWidget] = []
        if _shows_text(message):
            bubble = self._bubble(message.role, message.time_ns)
            bubble.bind(message)
            if message.role == "assistant" and not message.extra.get("tool_calls"):
                bubble.reply_to = asked
            self.view.register(message.id, bubble)
            out.append(bubble)
        for chip in self._call_chips(message):
            chips[chip.call_id] = chip
            out.append(chip)
        return out

    def _bubble(self, role: str, time_ns: int) -> ChatBubble:
        """A new bubble whose actions come here."""
        bubble = ChatBubble(role, time_ns, links=self.citations)
        bubble.action_requested.connect(lambda name, b=bubble: self._on_action(b, name))
        return bubble

    def _call_chips(self, message: Message) -> list[ToolChip]:
        calls = message.extra.get("tool_calls")
        chips = (
            [ToolChip.from_call(c) for c in calls if isinstance(c, dict)]
            if isinstance(calls, list)
            else []
        )
        if chips and not _shows_text(message):
            self.view.register(message.id, chips[0])
        return chips

    def _draft_paused(self) -> None:
        """Typing paused: the agent reads the prompt the text so far would get (nothing
        while it would change before a send: an edit, a delete or a reset in its undo
        window; a new conversation has no session to read it in yet)."""
        agent, sid = self.services.agent, self._sid
        if agent is None:
            return
        text = self.composer.toPlainText()
        held = self._editing is not None or bool(self.pending.pending())
        if sid is None or held or self.pending_kind(sid):
            text = ""  # the agent forgets a draft it holds
        agent.draft_changed(sid or "", text)

    # -- turns ---------------------------------------------------------------------------
    def _send_or_stop(self) -> None:
        if self.busy:
            self.stop()
        else:
            self.send()

    def send(self, text: str | None = None) -> Operation | None:
        """Start a turn with *text* (default: the input box); an edit replaces its message."""
        text = (self.composer.toPlainText() if text is None else text).strip()
        if not text or self.busy or not self._can_answer():
            return None
        editing, self._editing = self._editing, None
        self.edit_bar.hide()
        self.composer.clear()
        return self._start(self._run_turn(text, editing), text)

    def regenerate(self, bubble: ChatBubble) -> Operation | None:
        """Answer the question of *bubble* (an answer, or a failed one) again."""
        target = bubble.message_id or bubble.reply_to
        if self.busy or target is None or self._sid is None or not self._can_answer():
            return None
        return self._start(self._run_regenerate(self._sid, target, bubble), None)

    def _can_answer(self) -> bool:
        if self.services.agent is not None:
            return True
        self.refresh_model_state()
        self.runner.error_reported.emit("There is no chat model yet: " + self.banner.fix)
        return False

    def _start(self, work: Awaitable[None], text: str | None) -> Operation:
        self._stop = asyncio.Event()
        self._last_turn_sid = self._last_question = self._last_partial = None
        self._turn = self.runner.run(
            work, what="get an answer", on_failure=lambda e: self._failed(text, e)
        )
        self._set_busy(True)
        self._end_welcome()
        return self._turn

    def stop(self) -> None:
        """Ask the model to stop (Esc); a model that does not listen is cancelled."""
        if self._turn is None:
            return
        self._stop.set()
        turn = self._turn
        QTimer.singleShot(
            STOP_GRACE_MS, self, lambda: turn.cancel() if turn is self._turn else None
        )

    async def _run_turn(self, text: str, editing: ChatBubble | None) -> None:
        agent = self.services.agent
        assert agent is not None
        sid = await self.session_provider()
        if sid != self._sid:  # the provider created a fresh session: nothing to load
            self._sid = sid
            self._generation += 1
            self.view.clear()
        # A deleted message must not reach the model, and recall searches every session:
        # deletes still in their undo window in *any* session end now, not only this one's.
        await self.pending.flush()
        if editing is not None and editing.message_id is not None and sid == self._sid:
            await self._truncate_for_edit(sid, editing)
        self._begin(sid)
        self._pending_user = self._append_live("user", text)
        try:
            result = await agent.run_turn(sid, text, on_event=self._on_event, stop=self._stop)
        finally:
            self._end(sid)
        self._done(result)

    async def _truncate_for_edit(self, sid: str, editing: ChatBubble) -> None:
        """Drop the edited message and what followed it, in the store and on screen."""
        from agenvoy_desktop.operations.messages import edit_truncate

        store = self.services.store
        assert editing.message_id is not None
        changes = await self.services.storage.run(edit_truncate, store, sid, editing.message_id)
        self.runner.broadcast(changes)
        for widget in [editing, *self.view.items_after(editing)]:
            self.view.remove(widget)

    async def _run_regenerate(self, sid: str, message_id: str, bubble: ChatBubble) -> None:
        from agenvoy_desktop.operations.messages import regenerate_truncate

        agent = self.services.agent
        assert agent is not None
        await self.pending.flush()  # every session's deletes, as for a send
        store = self.services.store
        changed = await self.services.storage.run(regenerate_truncate, store, sid, message_id)
        self.runner.broadcast(changed.changes)
        user_id = changed.value
        asked = self.view.widget_for(user_id)
        if sid == self._sid:
            keep = asked if isinstance(asked, ChatBubble) else None
            drop = self.view.items_after(keep) if keep is not None else [bubble]
            for widget in drop:
                self.view.remove(widget)
        self._begin(sid)
        self._asked = user_id
        try:
            result = await agent.regenerate(sid, user_id, on_event=self._on_event, stop=self._stop)
        finally:
            self._end(sid)
        self._done(result)

    def _begin(self, sid: str) -> None:
        """A turn starts in *sid*: fresh stream state, actions off, the status line on."""
        self._turn_sid = self._last_turn_sid = sid
        self._partial = ""
        self._streaming = None
        self._asked = None
        self._last_partial = None
        self._render_timer.setInterval(RENDER_INTERVAL_MS)
        if sid == self._sid:
            self.view.set_actions_enabled(False)
            self.turn_status.begin()
        self.turn_started.emit(sid)

    def _end(self, sid: str) -> None:
        """The turn ended (answered, stopped or failed): back to idle."""
        self._render_timer.stop()
        self._render_partial()
        self._turn = None
        self._turn_sid = None
        self._last_question = self._pending_user
        if self._streaming is not None:  # text the model wrote before it failed or stopped
            self._last_partial = self._streaming
        self._streaming = self._pending_user = None
        self._set_busy(False)
        self.runner.broadcast(turn_changes(sid))
        if self.composer.toPlainText().strip():  # typed before a Regenerate, or meanwhile
            self._draft_timer.start()
        if sid == self._sid:
            self.view.set_actions_enabled(True)
            self.message_actions.load_versions(sid, self._generation)
        self.turn_finished.emit(sid)

    def _done(self, result: TurnResult) -> None:
        model = self.services.chat_model
        name = getattr(model, "name", "?") if model else "?"
        self._last_lines[result.session_id] = (done_text(result), done_details(result, name))
        if result.session_id == self._sid:
            self.turn_status.finish(result, name)

    def _failed(self, text: str | None, exc: BaseException) -> None:
        """Say why in an answer bubble, with Retry: regenerate if the question was
        saved, send it again if not.  What the model wrote before it failed (a
        server that stopped mid-answer) stays, marked interrupted, and carries the line.
        The bubble is the one place that says why; the error strip only when the
        conversation is not on screen."""
        user = self._last_question
        asked = user.message_id if user is not None else self._asked
        if not self._shown_sid():
            self.runner.report_error("get an answer", exc)
            if text and not self.composer.toPlainText().strip():
                self.composer.setPlainText(text)  # nothing on screen holds it: give it back
            return
        if is_known(exc):
            log.warning("could not get an answer: %s", one_line(exc))
        else:
            log.error("internal error while trying to get an answer", exc_info=exc)
        partial = self._last_partial
        if partial is not None and partial in self.bubbles():
            bubble = partial
            bubble.set_interrupted(True)
        else:
            bubble = self._bubble("assistant", self.services.clock())
            bubble.set_text("")
            self._append_all([bubble])
        bubble.reply_to = bubble.reply_to or asked
        bubble.resend = text if asked is None else None
        bubble.show_problem(self.runner.readable(exc).splitlines()[0])
        self.view.follow_bottom()
        self.turn_status.fail("Answer interrupted." if bubble is partial else "No answer.")
        self.view.set_actions_enabled(True)

    def _shown_sid(self) -> bool:
        return self._sid is not None and self._sid == self._last_turn_sid

    def _set_busy(self, busy: bool) -> None:
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop generating (Esc)" if busy else "Send (Enter)")

    def _busy_here(self) -> bool:
        """A turn runs in the shown session."""
        return self._turn is not None and self._turn_sid in (None, self._sid)

    # -- message actions ---------------------------------------------------------------------
    def _on_action(self, bubble: ChatBubble, name: str) -> None:
        if name == "copy":
            self.message_actions.copy(bubble)
        elif name in ("older", "newer"):
            self.message_actions.page(bubble, -1 if name == "older" else 1)
        elif self._busy_here():
            self.say(BUSY_HERE)
        elif name == "edit":
            self.start_edit(bubble)
        elif name == "regenerate":
            self.regenerate(bubble)
        elif name == "retry":
            self.retry(bubble)
        elif name == "delete":
            self.message_actions.delete(bubble)
        elif name == "fork":
            self.message_actions.fork(bubble)

    def start_edit(self, bubble: ChatBubble) -> None:
        """Put a user message into the message box; sending replaces it and what follows."""
        if bubble.message_id is None:
            return
        self._editing = bubble
        self.composer.setPlainText(bubble.text())
        self.edit_bar.show()
        self.focus_input()
        self.composer.moveCursor(self.composer.textCursor().MoveOperation.End)

    def cancel_edit(self) -> None:
        if self._editing is not None:
            self._editing = None
            self.composer.clear()
        self.edit_bar.hide()
        self.focus_input()

    def retry(self, bubble: ChatBubble) -> Operation | None:
        """Retry a failed or empty answer."""
        resend = getattr(bubble, "resend", None)
        if resend:
            for widget in [bubble, *self._unsaved_questions()]:
                self.view.remove(widget)
            return self.send(resend)
        return self.regenerate(bubble)

    def _unsaved_questions(self) -> list[ChatBubble]:
        return [b for b in self.bubbles() if b.role == "user" and b.message_id is None]

    def say(self, text: str) -> None:
        """A short note in the status line under the chat."""
        self.status.setText(text)
        self.status.setVisible(True)
        QTimer.singleShot(NOTE_MS, self, self._restore_status)

    def _restore_status(self) -> None:
        """The line under the chat between notes: the model's name, unless a header shows it."""
        model = self.services.chat_model
        named = model is not None and self.input_header.count() == 0
        self.status.setText(f"Model: {getattr(model, 'name', '?')}" if named else "")
        self.status.setVisible(bool(self.status.text()))

    def _shown(self) -> bool:
        return self._turn_sid is not None and self._turn_sid == self._sid

    def _append_live(self, role: str, text: str) -> ChatBubble | None:
        if not self._shown():
            return None
        bubble = self._bubble(role, self.services.clock())
        bubble.set_text(text)
        self.view.append(bubble)
        self.view.scroll_to_bottom()
        return bubble

    def _on_event(self, event: TurnEvent) -> None:
        if isinstance(event, AnswerDelta):
            self._partial += event.text
            if not self._render_timer.isActive():
                self._render_timer.start()
        elif isinstance(event, AnswerRetracted):
            self._retract_partial()
        elif isinstance(event, MessageSaved):
            self._on_saved(event.message)
        elif isinstance(event, RecallInjected) and self._shown():
            found = RecallChip(event.text, event.message_ids, len(event.citations))
            self._append_all([found])
        elif isinstance(event, TurnStatus) and self._shown() and event.phase != "tool":
            self.turn_status.say(phase_text(event.phase, event.detail), phase_tip(event.phase))
        elif isinstance(event, ToolCallStarted | ToolCallFinished) and self._shown():
            if isinstance(event, ToolCallStarted):
                self.turn_status.say(tool_phrase(event.name, event.arguments))
            chip = self.view.chip(event.call_id)
            if chip is not None:
                chip.apply_event(event)

    def _retract_partial(self) -> None:
        """The streamed answer failed its check: clear it; the second try or the quote
        streams into the same bubble."""
        self._partial = ""
        if self._streaming is not None and self._shown():
            self._streaming.set_text("")

    def _render_partial(self) -> None:
        if not self._partial or not self._shown():
            return
        if self._streaming is None:
            self._streaming = self._append_live("assistant", "")
        if self._streaming is not None:
            started = time.perf_counter()
            self._streaming.set_text(self._partial)
            self.view.follow_bottom()
            cost_ms = (time.perf_counter() - started) * 1000
            self._render_timer.setInterval(max(RENDER_INTERVAL_MS, round(cost_ms * RENDER_SHARE)))

    def _on_saved(self, message: Message) -> None:
        if self._turn_sid is not None:
            # the list and the timeline follow each message; the rest reloads once the turn ends
            self.runner.broadcast(
                MemoryChanges(sessions=True, timeline=True, session_id=self._turn_sid)
            )
        if not self._shown():
            return
        if message.role == "user":
            self._asked = message.id
        if message.role == "user" and self._pending_user is not None:
            if self.view.widget_for(message.id) is not None:  # a page load showed it already
                self.view.remove(self._pending_user)
                self._pending_user = None
                return
            self._pending_user.bind(message)
            self.view.register(message.id, self._pending_user)
        elif message.role == "assistant":
            self._saved_answer(message)
        elif message.role == "tool":
            chip = self.view.chip(str(message.extra.get("tool_call_id", "")))
            if chip is not None:
                chip.set_result_message(message)
                self.view.register(message.id, chip)
            else:
                self._append_all(self._widgets_for(message, {}))

    def _saved_answer(self, message: Message) -> None:
        """The streamed bubble becomes the stored message; tool calls get their chips."""
        self._render_timer.stop()
        bubble, self._streaming, self._partial = self._streaming, None, ""
        if bubble is not None and _shows_text(message):
            bubble.bind(message)
            if not message.extra.get("tool_calls"):
                bubble.reply_to = self._asked
            self.view.register(message.id, bubble)
            self._append_all(list(self._call_chips(message)))
        else:
            if bubble is not None:
                self.view.remove(bubble)
            self._append_all(self._widgets_for(message, {}, self._asked))
        if message.extra.get("interrupted"):  # a failure may follow: its line goes here
            shown = self.view.widget_for(message.id)
            self._last_partial = shown if isinstance(shown, ChatBubble) else None

    def _append_all(self, widgets: Sequence[QWidget]) -> None:
        for widget in widgets:
            self.view.append(widget)
        self.view.follow_bottom()


def _shows_text(message: Message) -> bool:
    """A bubble is shown unless the message only calls tools."""
    return bool(message.content.strip()) or not message.extra.get("tool_calls")
