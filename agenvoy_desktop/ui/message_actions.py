"""What the actions on a chat bubble do: copy, delete with undo, fork, answer versions.

Edit-and-resend and Regenerate start turns, so the chat panel runs those;
this module owns the rest.  A delete hides the bubble at once and runs when
its undo window (10 s) ends, like a session reset (:mod:`pending_ops`); a
send into any session finalises it first (proactive recall searches every
session), so the model never sees a message the user deleted.  The
operations themselves run on the storage thread (``operations/messages.py``)
and what they changed is broadcast.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QWidget

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.messages import Message
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.chat_widgets import ChatBubble, ChatView
from agenvoy_desktop.ui.pending_ops import UNDO_WINDOW_MS, PendingOp, PendingOps
from agenvoy_desktop.ui.toast import Toast, ToastArea

log = logging.getLogger(__name__)

Versions = dict[str, list[list[Message]]]


def answer_text(version: Sequence[Message]) -> str:
    """The text a version of an answer shows: its last assistant message with text."""
    texts = [m.content for m in version if m.role == "assistant" and m.content.strip()]
    return texts[-1] if texts else ""


def find_versions(store: MemoryStore, session_id: str, user_ids: Sequence[str]) -> Versions:
    """Storage thread: the answers of each user message that has more than one."""
    from agenvoy_desktop.operations.messages import answer_versions

    found: Versions = {}
    for user_id in user_ids:
        versions = answer_versions(store, session_id, user_id)
        if len(versions) > 1:
            found[user_id] = versions
    return found


class ChatHost(Protocol):
    """What the actions need of the chat that shows them (:class:`.chat_panel.ChatPanel`).

    A protocol rather than the panel's class, so that the panel, which owns the actions,
    is the only one of the two modules that imports the other.
    """

    @property
    def services(self) -> AppServices: ...
    @property
    def runner(self) -> AsyncRunner: ...
    @property
    def view(self) -> ChatView: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def busy(self) -> bool:
        """A turn is running."""

    @property
    def generation(self) -> int:
        """Bumped whenever the view starts showing something else."""

    @property
    def show_session(self) -> Callable[[str], object]:
        """Shows another session (a fork)."""

    def say(self, text: str) -> None: ...
    def focus_input(self) -> None: ...
    def reload(self) -> Operation | None: ...
    def bubbles(self) -> list[ChatBubble]: ...


class MessageActions(QObject):
    """The chat panel's message actions that do not start a turn.

    *panel* is what the actions act on; *parent* is the widget that owns them and that
    their undo toasts cover (the panel itself).
    """

    def __init__(self, panel: ChatHost, parent: QWidget, *, undo_ms: int = UNDO_WINDOW_MS) -> None:
        super().__init__(parent)
        self.panel = panel
        self.pending = PendingOps(panel.services, panel.runner, delay_ms=undo_ms, parent=self)
        """Message deletes in their undo window (quitting flushes them)."""
        self.pending.executed.connect(self._deleted)
        self.pending.failed.connect(self._delete_failed)
        self.pending.undone.connect(self._close_toast)
        self.toasts = ToastArea(parent)
        self._toast_for: dict[PendingOp, Toast] = {}
        self.versions: Versions = {}
        """Answers of the shown session's user messages that have several versions."""
        self.shown: dict[str, int] = {}
        """Which version (index) each paged answer shows."""

    # -- copy ------------------------------------------------------------------------------
    def copy(self, bubble: ChatBubble) -> None:
        QApplication.clipboard().setText(bubble.text())
        self.panel.say("Message copied.")

    # -- delete with undo ----------------------------------------------------------------------
    def delete(self, bubble: ChatBubble) -> PendingOp | None:
        """Hide the message now; delete it when the undo window ends."""
        sid, message_id = self.panel.session_id, bubble.message_id
        if sid is None or message_id is None:
            return None
        op = self.pending.schedule("delete_message", sid, "", message_id=message_id)
        bubble.hide()
        toast = self.toasts.show_toast(
            "Message deleted.",
            [("Undo", lambda: self.undo(op))],
            duration_ms=self.pending.delay_ms,
        )
        toast.acted.connect(self.panel.focus_input)
        self._toast_for[op] = toast
        self.panel.focus_input()
        return op

    def undo(self, op: PendingOp) -> bool:
        """Take a delete back: the bubble shows again."""
        if not self.pending.undo(op):
            return False
        self._show_again(op)
        self.panel.say("Delete undone.")
        self.panel.focus_input()
        return True

    def hidden(self, session_id: str) -> set[str]:
        """Messages to leave out when the session is shown again (deletes in their window)."""
        return self.pending.deleting(session_id)

    def _show_again(self, op: PendingOp) -> None:
        if op.message_id is None or op.session_id != self.panel.session_id:
            return
        widget = self.panel.view.widget_for(op.message_id)
        if widget is not None:
            widget.show()

    def _deleted(self, op: PendingOp) -> None:
        self._close_toast(op)
        if op.session_id == self.panel.session_id and not self.panel.busy:
            self.panel.reload()

    def _delete_failed(self, op: PendingOp, message: str) -> None:
        self._close_toast(op)
        self._show_again(op)
        self.panel.runner.error_reported.emit(f"Could not delete the message: {message}")

    def _close_toast(self, op: PendingOp) -> None:
        toast = self._toast_for.pop(op, None)
        if toast is not None and not toast.is_closed:
            toast.dismiss()

    # -- fork ---------------------------------------------------------------------------------
    def fork(self, bubble: ChatBubble) -> Operation | None:
        """A new session with the conversation up to *bubble*; the window selects it."""
        sid, message_id = self.panel.session_id, bubble.message_id
        if sid is None or message_id is None:
            return None
        from agenvoy_desktop.operations.messages import fork_session

        services = self.panel.services
        return self.panel.runner.run_change(
            services.storage.run(fork_session, services.store, sid, message_id),
            what="fork the session",
            on_success=self._forked,
        )

    def _forked(self, new_sid: str | None) -> None:
        if new_sid is not None:
            self.panel.show_session(new_sid)
            self.panel.focus_input()

    # -- versions of an answer -------------------------------------------------------------------
    def load_versions(self, session_id: str, generation: int) -> Operation | None:
        """Find which shown answers have several versions, and show their pagers."""
        user_ids = [b.reply_to for b in self.panel.bubbles() if b.reply_to is not None]
        if not user_ids:
            return None
        services = self.panel.services
        work = services.storage.run(find_versions, services.store, session_id, user_ids)

        def found(versions: Versions) -> None:
            if generation == self.panel.generation:
                self.versions = versions
                self.shown = {k: len(v) - 1 for k, v in versions.items()}
                self._update_pagers()

        return self.panel.runner.run(work, what="find the answer's versions", on_success=found)

    def page(self, bubble: ChatBubble, step: int) -> None:
        """Show the previous (-1) or next (+1) version of an answer."""
        versions = self.versions.get(bubble.reply_to or "")
        if not versions:
            return
        index = max(0, min(len(versions) - 1, self.shown.get(bubble.reply_to or "", 0) + step))
        self.shown[bubble.reply_to or ""] = index
        bubble.set_text(answer_text(versions[index]))
        bubble.action_row.set_versions(index + 1, len(versions))

    def _update_pagers(self) -> None:
        for bubble in self.panel.bubbles():
            if bubble.role != "assistant" or bubble.reply_to is None:
                continue
            versions = self.versions.get(bubble.reply_to)
            if versions:
                bubble.action_row.set_versions(self.shown[bubble.reply_to] + 1, len(versions))
