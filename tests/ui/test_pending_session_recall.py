"""A session removed or reset in its undo window reaches no other session's answer.

Remove and Reset hide the session at once and change the store only when
the undo window ends.  Proactive recall and the model's search tool search
every session, so a question asked elsewhere meanwhile found the removed
session's messages and put them into the prompt.  The window now tells the
agent which sessions and messages are withheld; Undo brings them back, and
once the operation ran they are gone from the store.
"""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from agenvoy_desktop.core.search import NOTHING_WITHHELD
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.pending_ops import OpKind
from tests.conftest import conversation
from tests.scripted_chat import Call, ScriptedChatModel, Seen
from tests.ui.conftest import ServicesFactory, WindowFactory, run, seed

SECRET = ["My bike lock code is 4721.", "Noted: your bike lock code is 4721."]
QUESTION = "What is my bike lock code?"
RECALLED = 'the user said: "My bike lock code is 4721."'


def prompt_of(request: Seen) -> str:
    """Everything one model call was sent."""
    return "\n".join(str(m.get("content")) for m in request.messages)


def ask(qtbot: QtBot, window: MainWindow, model: ScriptedChatModel, sid: str) -> str:
    """Send QUESTION in *sid*; what the model was sent for it."""
    calls = len(model.seen)
    window.select_session(sid)
    qtbot.waitUntil(lambda: window.chat.session_id == sid)
    window.chat.send(QUESTION)
    qtbot.waitUntil(lambda: len(model.seen) > calls and not window.chat.busy)
    return prompt_of(model.seen[calls])


def opened(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, answers: int
) -> tuple[ScriptedChatModel, MainWindow, str, str]:
    """A window over the session holding SECRET and another, unrelated one."""
    model = ScriptedChatModel([["I don't know."]] * answers)
    services = make_services(model)
    other = seed(services, "errands", conversation(["buy milk", "ok"]))
    secret = seed(services, "lock", conversation(SECRET))
    window = make_window(services, undo_ms=60_000)
    qtbot.waitUntil(lambda: window.session_id is not None)
    return model, window, secret, other


def schedule(window: MainWindow, kind: OpKind, sid: str) -> None:
    if kind == "remove":
        window.session_actions.remove_session(sid)
    else:
        window.session_actions.reset_session(sid)
    assert window.pending.pending_for(sid) is not None


def test_the_secret_is_recalled_while_its_session_stands(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """The control: the question does find the line, so the tests below mean something."""
    model, window, _secret, other = opened(qtbot, make_window, make_services, 1)
    assert "4721" in ask(qtbot, window, model, other)


def test_a_removed_session_in_its_undo_window_is_not_recalled_and_undo_brings_it_back(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model, window, secret, other = opened(qtbot, make_window, make_services, 2)
    schedule(window, "remove", secret)
    assert "4721" not in ask(qtbot, window, model, other)
    assert window.pending.pending_for(secret) is not None  # the undo window is still open

    (toast,) = window.toasts.toasts()
    toast.buttons["Undo"].click()
    assert window.pending.pending_for(secret) is None
    assert "4721" in ask(qtbot, window, model, other)


def test_a_reset_session_is_not_recalled_in_its_undo_window_nor_after(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    model, window, secret, other = opened(qtbot, make_window, make_services, 2)
    schedule(window, "reset", secret)
    assert "4721" not in ask(qtbot, window, model, other)
    assert window.pending.pending_for(secret) is not None

    run(qtbot, window.pending.flush())  # the window ends: the store follows
    assert window.pending.withheld() == NOTHING_WITHHELD
    assert "4721" not in ask(qtbot, window, model, other)


def test_the_search_tool_leaves_a_pending_session_out(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """The model's own search_chat_history call, over all sessions, finds nothing there."""
    model, window, secret, other = opened(qtbot, make_window, make_services, 0)
    search = Call("search_chat_history", {"query": "bike lock code", "scope": "all"})
    model.script = [[search], ["I don't know."]]
    schedule(window, "remove", secret)
    ask(qtbot, window, model, other)
    qtbot.waitUntil(lambda: len(model.seen) == 2)
    results = [m for m in model.seen[1].messages if m.get("role") == "tool"]
    assert results, "the tool's result was sent back"  # the search ran...
    assert "4721" not in prompt_of(model.seen[1])  # ...and found nothing of the secret


def context_text(window: MainWindow) -> str:
    """Everything the Context tab shows of the prompt ("" before it loaded)."""
    view = window.inspector.context_tab.view
    return "" if view is None else "\n".join(str(m.get("content", "")) for m in view.messages)


def test_the_context_tab_drops_a_recalled_line_while_its_session_is_removed(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """The Context tab shows the last turn's stored block; a removed session's line goes
    (the answer stays: it is this session's own, written before the remove)."""
    model, window, secret, other = opened(qtbot, make_window, make_services, 1)
    assert "4721" in ask(qtbot, window, model, other)
    window.side.setCurrentWidget(window.inspector)
    window.inspector.show_tab("context")
    context = window.inspector.context_tab
    qtbot.waitUntil(lambda: RECALLED in context_text(window))

    schedule(window, "remove", secret)
    qtbot.waitUntil(lambda: RECALLED not in context_text(window))
    assert QUESTION in context_text(window)  # the same prompt, less the line
    assert "1 recalled line of your last message left out" in context.status.text()

    (toast,) = window.toasts.toasts()
    toast.buttons["Undo"].click()
    window.select_session(other)  # Undo of a remove shows the session brought back
    qtbot.waitUntil(lambda: RECALLED in context_text(window))
    assert context.status.isHidden()


def test_the_recall_tab_finds_nothing_of_a_removed_session_until_undo(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """The Recall tab searches every session too: it follows the undo window as the list does."""
    _model, window, secret, _other = opened(qtbot, make_window, make_services, 0)
    window.side.setCurrentWidget(window.inspector)
    window.inspector.show_tab("recall")
    tab = window.inspector.recall_tab
    tab.scope_combo.setCurrentIndex(tab.scope_combo.findData("all"))
    tab.mode_combo.setCurrentIndex(tab.mode_combo.findData("keyword"))
    tab.query_edit.setText("bike lock code")
    qtbot.waitUntil(lambda: "4721" in tab.results.toPlainText())

    schedule(window, "remove", secret)
    qtbot.waitUntil(lambda: "4721" not in tab.results.toPlainText())
    (toast,) = window.toasts.toasts()
    toast.buttons["Undo"].click()
    qtbot.waitUntil(lambda: "4721" in tab.results.toPlainText())
