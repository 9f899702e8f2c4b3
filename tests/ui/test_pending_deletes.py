"""A message deleted in the chat is gone from every view during its undo window.

The chat hides the bubble at once and the store deletes the message ten
seconds later.  Meanwhile the inspector's Context and Recall tabs and the
timeline read the store: they must leave the message out as the chat does,
show it again on Undo, and keep it out once the delete has run.  A turn in
any session must not see it either (proactive recall searches every session),
also when the window ended a moment before the send and the delete is still
queued on the storage thread.
"""

from __future__ import annotations

import asyncio
import threading

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.context import build_messages
from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.locks import LOCK_DIR, FileLock, StoreBusyError
from agenvoy_desktop.operations.context import ContextView
from agenvoy_desktop.ui.inspector.context_tab import ContextTab, leave_out
from agenvoy_desktop.ui.inspector.recall_tab import RecallTab
from agenvoy_desktop.ui.main_window import MainWindow
from tests.conftest import T0, conversation
from tests.scripted_chat import ScriptedChatModel
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op

QA = ["first question", "first answer", "second question", "second answer"]
GONE = "second answer"
SECRET = ["My bike lock code is 4512.", "Noted: your bike lock code is 4512."]


def context_text(tab: ContextTab) -> str | None:
    """Everything the Context tab shows of the prompt (None: not loaded yet)."""
    if tab.view is None:
        return None
    return "\n".join(str(m.get("content", "")) for m in tab.view.messages)


def timeline_text(window: MainWindow) -> str:
    return "\n".join(e.text for e in window.timeline.model.events())


def recall_text(tab: RecallTab) -> str:
    return tab.results.toPlainText()


def open_with_recall(qtbot: QtBot, window: MainWindow) -> RecallTab:
    """The Memory side tab on Recall, searching for the answer that will be deleted."""
    window.side.setCurrentWidget(window.inspector)
    window.inspector.show_tab("recall")
    recall = window.inspector.recall_tab
    recall.mode_combo.setCurrentIndex(recall.mode_combo.findData("keyword"))
    recall.query_edit.setText(GONE)
    qtbot.waitUntil(lambda: GONE in recall_text(recall))
    return recall


def opened_on_qa(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> tuple[str, MainWindow]:
    """A window on one session holding QA, every bubble shown."""
    services = make_services(ScriptedChatModel([]))
    sid = seed(services, "chat", conversation(QA))
    window = make_window(services)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == len(QA))
    return sid, window


def test_a_pending_delete_is_shown_nowhere_and_undo_brings_it_back_everywhere(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    sid, window = opened_on_qa(qtbot, make_window, make_services)
    chat = window.chat
    qtbot.waitUntil(lambda: GONE in timeline_text(window))
    recall = open_with_recall(qtbot, window)
    context = window.inspector.context_tab
    window.inspector.show_tab("context")
    qtbot.waitUntil(lambda: GONE in (context_text(context) or ""))

    op = chat.message_actions.delete(chat.bubbles()[3])
    assert op is not None
    assert chat.pending.deleting(sid) == {op.message_id}
    assert GONE not in timeline_text(window)
    assert GONE not in recall_text(recall)  # the answer held is shown again without it
    assert "first answer" in recall_text(recall)
    qtbot.waitUntil(lambda: GONE not in (context_text(context) or GONE))
    assert "first answer" in (context_text(context) or "")
    assert "1 message deleted in the chat is left out" in context.status.text()
    assert context.view is not None
    assert len(context.view.tokens) == len(context.view.messages)  # counts follow

    (toast,) = chat.message_actions.toasts.toasts()
    qtbot.mouseClick(toast.buttons["Undo"], Qt.MouseButton.LeftButton)
    assert GONE in timeline_text(window)
    assert GONE in recall_text(recall)
    qtbot.waitUntil(lambda: GONE in (context_text(context) or ""))
    assert context.status.isHidden()


def test_once_the_delete_ran_the_message_stays_gone(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    sid, window = opened_on_qa(qtbot, make_window, make_services)
    chat = window.chat
    recall = open_with_recall(qtbot, window)
    context = window.inspector.context_tab
    window.inspector.show_tab("context")
    qtbot.waitUntil(lambda: GONE in (context_text(context) or ""))
    chat.pending.delay_ms = 30
    with qtbot.waitSignal(chat.pending.executed):
        chat.message_actions.delete(chat.bubbles()[3])
    assert not chat.pending.deleting(sid)

    # the delete's broadcast reloads what shows the session, from a store without it (the
    # tabs showed "first answer" before it too: what is waited for is the reload itself)
    def context_reloaded() -> bool:
        text = context_text(context) or GONE
        return "first answer" in text and GONE not in text

    def timeline_reloaded() -> bool:
        text = timeline_text(window)
        return "second question" in text and GONE not in text

    qtbot.waitUntil(context_reloaded)
    qtbot.waitUntil(timeline_reloaded)
    window.inspector.show_tab("recall")

    def recall_reloaded() -> bool:
        text = recall_text(recall)
        return "first answer" in text and GONE not in text

    qtbot.waitUntil(recall_reloaded)


def test_a_send_in_another_session_ends_pending_deletes_first(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """Proactive recall searches every session: a message deleted in the session left
    behind, undo window still open, was recalled into the new session's prompt."""
    model = ScriptedChatModel([["Fine."]])
    services = make_services(model)
    first = seed(services, "a", conversation([*SECRET, "thanks", "you're welcome"]))
    window = make_window(services)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 4)
    window.chat.message_actions.delete(window.chat.bubbles()[0])
    wait_op(qtbot, window.new_session())
    qtbot.waitUntil(lambda: window.session_id not in (None, first))
    window.chat.send("What is my bike lock code?")
    qtbot.waitUntil(lambda: not window.chat.busy)
    sent = "\n".join(str(m.get("content")) for m in model.seen[0].messages)
    assert "lock code is 4512" not in sent
    assert not window.chat.pending.deleting(first)


class WatchedEvent(asyncio.Event):
    """An event that tells whether anyone waits on it."""

    waited = False

    async def wait(self) -> bool:
        self.waited = True
        return await super().wait()


def turn_running(services: AppServices, sid: str) -> bool:
    """Whether a turn holds *sid*'s turn lock (a probe; call only while the store is idle)."""
    lock = FileLock(services.store.paths.memory_dir / LOCK_DIR / f"turn-{sid}.lock", sid, "test")
    try:
        lock.acquire("probe", shared=False, wait_s=0.0)
    except StoreBusyError:
        return True
    lock.release()
    return False


def test_a_send_waits_for_a_delete_whose_window_just_ended(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """The window ended just before the send: the delete runs, queued behind other work on
    the storage thread.  The send waits for it; a turn started first held the session's turn
    lock, which refused the delete: the message stayed, and the model was sent it."""
    model = ScriptedChatModel([["Fine."]])
    services = make_services(model)
    sid, window = opened_on_qa_with(qtbot, make_window, services)
    chat = window.chat
    busy, release = threading.Event(), threading.Event()

    def other_work() -> None:  # an embedding, a reload: the storage thread is busy
        busy.set()
        release.wait(60)

    window.runner.run(services.storage.run(other_work), what="other work")
    qtbot.waitUntil(busy.is_set)
    chat.pending.delay_ms = 1
    op = chat.message_actions.delete(chat.bubbles()[2])  # the second question
    assert op is not None
    op.ended = ended = WatchedEvent()
    qtbot.waitUntil(lambda: op.state == "running")  # its window ended: the delete is queued
    chat.send("next")
    # the send either waits for the delete, or (the bug) has started its turn
    qtbot.waitUntil(lambda: ended.waited or turn_running(services, sid))
    release.set()
    qtbot.waitUntil(lambda: not chat.busy)
    assert op.state == "done"
    history = services.storage.run_sync(lambda: services.store.history(sid).messages)
    assert [m.content for m in history] == [QA[0], QA[1], QA[3], "next", "Fine."]
    sent = [m.get("content") for m in model.seen[0].messages]
    assert "second question" not in sent


def opened_on_qa_with(
    qtbot: QtBot, make_window: WindowFactory, services: AppServices
) -> tuple[str, MainWindow]:
    sid = seed(services, "chat", conversation(QA))
    window = make_window(services)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == len(QA))
    return sid, window


def test_leave_out_builds_the_prompt_of_the_window_after_the_delete() -> None:
    """Dropping a message can move the window's start back over an older exchange."""
    older, before = conversation(["q0", "a0"], T0), conversation(QA, T0 + 10)
    gone = before[3].id
    after = [*older, *[m for m in before if m.id != gone]]

    def built(window: list) -> ContextView:  # type: ignore[type-arg]
        messages = build_messages(
            base_prompt="You help.", summary_text="", window=window, now_ns=T0, recall="- r"
        )
        view = ContextView(messages, 4)
        view.tokens = [len(str(m.get("content"))) for m in messages]
        view.exact_total = 99
        return view

    view, expected = built(before), built(after)
    added = [len(m.content) for m in older]
    assert leave_out(view, before, after, added) == 1
    assert view.messages == expected.messages
    assert view.tokens == expected.tokens
    assert view.exact_total is None
    assert leave_out(expected, after, after, []) == 0
