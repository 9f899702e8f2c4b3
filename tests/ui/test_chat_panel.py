"""The chat panel: streaming, stop, tool chips with hints, Markdown, the model banner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog
from pytestqt.qtbot import QtBot

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.agent.tools import Tool
from agenvoy_desktop.agent.turn import AnswerDelta, TurnEvent
from agenvoy_desktop.llm.engine import ChatEngine
from agenvoy_desktop.ui import chat_panel, chat_widgets
from agenvoy_desktop.ui.main_window import MainWindow
from agenvoy_desktop.ui.markdown_view import (
    MarkdownView,
    ProseLabel,
    hard_breaks,
    markdown_to_html,
    prose_blocks,
    split_markdown,
)
from tests.conftest import SECOND, T0, conversation, msg
from tests.scripted_chat import WAIT, Call, ScriptedChatModel
from tests.tiny_gguf import write_tiny_llama
from tests.ui.conftest import ServicesFactory, WindowFactory, seed, wait_op

HINT = "[error memory] apply this fix: use an absolute path"


class FixedHints:
    def hint_for_failure(self, tool: str, error_text: str) -> tuple[str, list[int]]:
        return HINT, [7]


def history(services: AppServices, sid: str) -> list[Any]:
    return list(services.storage.run_sync(lambda: list(services.store.history(sid).messages)))


def type_and_send(qtbot: QtBot, window: MainWindow, text: str) -> None:
    """Type *text* (QTest types ASCII only, so other text is pasted) and press Enter."""
    composer = window.chat.composer
    composer.setFocus()
    if text.isascii():
        qtbot.keyClicks(composer, text)
    else:
        composer.insertPlainText(text)
    qtbot.keyClick(composer, Qt.Key.Key_Return)


@pytest.fixture
def scripted(make_services: ServicesFactory) -> tuple[AppServices, ScriptedChatModel]:
    model = ScriptedChatModel([["Hel", "lo ", "**wor", WAIT, "ld**"]])
    return make_services(model), model


def test_send_streams_tokens_then_shows_the_stored_answer(
    qtbot: QtBot, make_window: WindowFactory, scripted: tuple[AppServices, ScriptedChatModel]
) -> None:
    services, model = scripted
    window = make_window(services)
    type_and_send(qtbot, window, "hi there")
    assert window.chat.composer.toPlainText() == ""
    qtbot.waitUntil(model.waiting.is_set)

    def streamed() -> None:
        assert [b.text() for b in window.chat.bubbles()] == ["hi there", "Hello **wor"]

    qtbot.waitUntil(streamed)
    assert window.chat.busy
    assert window.chat.send_button.text() == "Stop"
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    user, answer = window.chat.bubbles()
    stored = history(services, window.session_id or "")
    assert [m.content for m in stored] == ["hi there", "Hello **world**"]
    assert (user.message_id, answer.message_id) == (stored[0].id, stored[1].id)
    assert answer.text() == "Hello **world**"
    assert not answer.interrupted
    assert window.chat.send_button.text() == "Send"


def test_the_real_engine_streams_into_the_chat(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory, tmp_path: Path
) -> None:
    engine = ChatEngine(write_tiny_llama(tmp_path / "tiny-chat.gguf"), context_size=1024, seed=7)
    services = make_services(engine)
    services.settings.models.max_answer_tokens = 12
    services.save_settings()
    window = make_window(services)
    seen: list[TurnEvent] = []
    forward = window.chat._on_event

    def spy(event: TurnEvent) -> None:
        seen.append(event)
        forward(event)

    window.chat._on_event = spy  # type: ignore[method-assign]
    type_and_send(qtbot, window, "say something")
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=120_000)
    assert window.errors.messages() == []
    deltas = "".join(e.text for e in seen if isinstance(e, AnswerDelta))
    stored = history(services, window.session_id or "")
    assert stored[-1].role == "assistant"
    assert sum(isinstance(e, AnswerDelta) for e in seen) > 1  # streamed, not in one piece
    assert stored[-1].content.strip() in deltas
    assert window.chat.bubbles()[-1].text() == stored[-1].content or not stored[-1].content


def test_first_message_without_a_session_creates_and_titles_one(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([["Sure."]]))
    window = make_window(services)
    assert window.session_id is None
    type_and_send(qtbot, window, "Plan a trip to 京都 in spring")
    qtbot.waitUntil(lambda: window.session_id is not None and not window.chat.busy)
    qtbot.waitUntil(lambda: window.sessions.model.rowCount() == 1)
    qtbot.waitUntil(lambda: window.sessions.title_of(window.session_id or "").startswith("Plan"))
    assert window.sessions.current_session() == window.session_id


def test_shift_enter_inserts_a_newline(
    qtbot: QtBot, make_window: WindowFactory, scripted: tuple[AppServices, ScriptedChatModel]
) -> None:
    window = make_window(scripted[0])
    composer = window.chat.composer
    qtbot.keyClicks(composer, "line one")
    qtbot.keyClick(composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(composer, "line two")
    assert composer.toPlainText() == "line one\nline two"
    assert not window.chat.busy


def test_escape_stops_and_the_answer_is_marked_interrupted(
    qtbot: QtBot, make_window: WindowFactory, scripted: tuple[AppServices, ScriptedChatModel]
) -> None:
    services, model = scripted
    window = make_window(services)
    type_and_send(qtbot, window, "tell me more")
    qtbot.waitUntil(model.waiting.is_set)
    assert window.stop_action.isEnabled()
    qtbot.keyClick(window.chat.composer, Qt.Key.Key_Escape)
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    answer = window.chat.bubbles()[-1]
    assert answer.interrupted
    assert answer.mark.isVisible()
    stored = history(services, window.session_id or "")
    assert stored[-1].extra.get("interrupted") is True
    assert stored[-1].content == "Hello **wor"
    assert not window.stop_action.isEnabled()


def test_an_answer_stopped_before_its_first_word_says_so(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """Kept, empty, so the question shows as unanswered; the mark does not speak of what
    "was written so far" when nothing was."""
    model = ScriptedChatModel([[WAIT, "never"]])
    services = make_services(model)
    window = make_window(services)
    type_and_send(qtbot, window, "tell me more")
    qtbot.waitUntil(model.waiting.is_set)
    qtbot.keyClick(window.chat.composer, Qt.Key.Key_Escape)
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    stored = history(services, window.session_id or "")
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].content == ""
    assert stored[-1].extra.get("interrupted") is True
    window.select_session(window.session_id)  # drawn again from the store
    qtbot.waitUntil(lambda: bool(window.chat.bubbles()) and window.chat.bubbles()[-1].interrupted)
    answer = window.chat.bubbles()[-1]
    assert answer.mark.text() == chat_widgets.STOPPED_EMPTY_MARK
    assert not answer.problem_text


def test_a_model_that_ignores_stop_is_cancelled_after_the_grace_period(
    qtbot: QtBot,
    make_window: WindowFactory,
    make_services: ServicesFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chat_panel, "STOP_GRACE_MS", 30)
    model = ScriptedChatModel([["Partial", WAIT, "never"]])
    services = make_services(model)
    window = make_window(services)
    type_and_send(qtbot, window, "go")
    qtbot.waitUntil(model.waiting.is_set)
    window.chat.stop()  # the gate stays closed: the model never sees the stop flag
    qtbot.waitUntil(lambda: not window.chat.busy)
    stored = history(services, window.session_id or "")
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].extra.get("interrupted") is True
    assert window.errors.messages() == []


def test_tool_call_chip_shows_arguments_result_and_hint(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    async def broken(_args: dict[str, Any]) -> str:
        raise FileNotFoundError("no such file: notes.txt")

    model = ScriptedChatModel([[Call("read_notes", {"path": "notes.txt"})], ["It is missing."]])
    services = make_services(model)
    services.tools.register(
        Tool("read_notes", "read notes", {"type": "object", "properties": {}}, broken)
    )
    assert services.agent is not None
    services.agent.hints = FixedHints()
    window = make_window(services)
    type_and_send(qtbot, window, "read my notes")
    qtbot.waitUntil(lambda: not window.chat.busy)
    (chip,) = window.chat.chips()
    assert chip.name == "read_notes"
    assert chip.arguments == {"path": "notes.txt"}
    assert chip.status() == "failed"
    assert chip.hint == HINT
    assert "error-memory hint" in chip.header.text()
    assert not chip.expanded
    qtbot.mouseClick(chip.header, Qt.MouseButton.LeftButton)
    assert chip.expanded
    assert chip.hint_label.isVisible()
    assert HINT in chip.hint_label.text()
    assert "no such file" in chip.result_label.text()
    assert [b.text() for b in window.chat.bubbles()] == ["read my notes", "It is missing."]
    # The same chip comes back from storage when the session is opened again.
    wait_op(qtbot, window.chat.reload())
    (again,) = window.chat.chips()
    assert (again.hint, again.status(), again.arguments) == (HINT, "failed", {"path": "notes.txt"})


def test_stored_history_renders_markdown_code_with_copy(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    answer = "Use this:\n\n```python\nprint('記憶')\n```\n\nDone."
    seed(services, "code", [msg("user", "show code", T0), msg("assistant", answer, T0 + SECOND)])
    window = make_window(services)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 2)
    (block,) = window.chat.bubbles()[1].view.code_blocks()
    assert block.language_label.text() == "python"
    qtbot.mouseClick(block.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "print('記憶')"
    assert block.copy_button.text().startswith("Copied")


def test_long_sessions_open_at_the_newest_page_and_load_earlier(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([]))
    texts = [f"message number {i}" for i in range(150)]
    seed(services, "long", conversation(texts))
    window = make_window(services)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == chat_panel.PAGE_MESSAGES)
    assert window.chat.bubbles()[-1].text() == "message number 149"
    qtbot.waitUntil(window.chat.view.earlier_button.isVisible)
    qtbot.mouseClick(window.chat.view.earlier_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.chat.bubbles()) == 2 * chat_panel.PAGE_MESSAGES)
    assert window.chat.bubbles()[0].text() == f"message number {150 - 2 * chat_panel.PAGE_MESSAGES}"


def test_no_chat_model_shows_a_banner_that_fixes_it(
    qtbot: QtBot,
    make_window: WindowFactory,
    make_services: ServicesFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    services = make_services(None)
    window = make_window(services)
    banner = window.chat.banner
    assert banner.isVisible()
    assert "No chat model" in banner.label.text()
    type_and_send(qtbot, window, "hello?")
    assert not window.chat.busy
    assert "no chat model" in window.errors.current().lower()
    qtbot.mouseClick(banner.settings_button, Qt.MouseButton.LeftButton)
    dialog = next(d for d in window.findChildren(QDialog) if d.isVisible())
    assert dialog.tabs.tabText(dialog.tabs.currentIndex()) == "Models"  # type: ignore[attr-defined]
    dialog.reject()

    prepared: list[Path] = []

    def fake_prepare(models_dir: Path, **_kw: Any) -> Path:
        prepared.append(models_dir)
        return tmp_path / "starter.gguf"

    monkeypatch.setattr("agenvoy_desktop.llm.starter.prepare_starter_model", fake_prepare)
    qtbot.mouseClick(banner.starter_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: services.agent is not None)
    assert prepared[0] == services.paths.models_dir  # assembled (here: faked), then loaded
    assert services.settings.models.chat_model == ""
    qtbot.waitUntil(banner.isHidden)
    assert services.chat_model is not None  # the switcher above the input names it


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("plain", ["text"]),
        ("a\n```py\nx = 1\n```\nb", ["text", "code", "text"]),
        ("```\nunclosed", ["code"]),
        ("````md\n```\ninner\n```\n````", ["code"]),
    ],
)
def test_split_markdown(text: str, kinds: list[str]) -> None:
    assert ["code" if s.is_code else "text" for s in split_markdown(text)] == kinds


def test_prose_blocks_cut_long_lists_where_markdown_starts_a_block() -> None:
    items = "\n".join(f"{i}. item {i}\n   more about {i}" for i in range(1, 21))
    pieces = prose_blocks(f"Intro line.\n\n{items}\n\nOutro.")
    assert pieces[0] == "Intro line."
    assert pieces[-1] == "Outro."
    lists = pieces[1:-1]
    assert len(lists) > 1
    assert "\n".join(lists) == items  # nothing lost or reordered
    assert all(p.split("\n")[0].split(".")[0].isdigit() for p in lists)  # each starts at an item
    assert prose_blocks("a\n\n    indented continuation") == ["a\n\n    indented continuation"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sintra: 15 May\nFado: 13 May", "Sintra: 15 May\u2028Fado: 13 May"),
        ("a\nb\nc", "a\u2028b\u2028c"),
        ("one\n\ntwo", "one\n\ntwo"),  # a blank line already ends the paragraph
        ("Days:\n- one\n- two", "Days:\n- one\n- two"),  # list items start blocks
        ("Days:\n1. one\n   more", "Days:\n1. one\u2028more"),  # an item's own lines
        ("| a | b |\n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("Title\n=====", "Title\n====="),  # a heading's underline
        ("Title\n--", "Title\n--"),
        ("# Title\ntext", "# Title\ntext"),  # a heading is one line
        ("text\n---\nmore", "text\n---\nmore"),
        ("> quoted\n> on", "> quoted\n> on"),
        ("ends in a break\\\nnext", "ends in a break\\\nnext"),
        ("Run:\n\n    make test\n    make dist", "Run:\n\n    make test\n    make dist"),
    ],
)
def test_hard_breaks_keep_single_newlines_of_prose(text: str, expected: str) -> None:
    assert hard_breaks(text) == expected


def test_a_message_keeps_its_line_breaks_and_tables(qtbot: QtBot) -> None:
    """A model's one-item-per-line answer shows one item per line, not run together."""
    view = MarkdownView()
    qtbot.addWidget(view)
    answer = (
        "Our plan:\nSintra: 15 May\nFado: **13** May\n\n| day | what |\n|---|---|\n| 1 | Belem |"
    )
    view.set_markdown(answer)
    html = "".join(label.text() for label in view.findChildren(ProseLabel))
    assert "Our plan:<br />Sintra: 15 May<br />Fado: " in html
    assert "<table" in html
    assert "Belem" in html
    assert view.markdown() == answer  # the source (what Copy takes) is untouched


def test_selected_text_copies_with_plain_newlines(qtbot: QtBot) -> None:
    bubble = chat_widgets.ChatBubble("assistant", T0)
    qtbot.addWidget(bubble)
    bubble.set_text("ab\ncd")
    (label,) = bubble.findChildren(ProseLabel)
    label.setSelection(0, 5)
    assert bubble.selected_text() == "ab\ncd"


def test_recalled_memories_show_above_the_answer_and_after_a_reload(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    services = make_services(ScriptedChatModel([["You live in Graz."]]))
    seed(services, "intro", conversation(["Hi! My name is Lena and I live in Graz.", "Hello!"]))
    window = make_window(services)
    wait_op(qtbot, window.new_session())
    type_and_send(qtbot, window, "Where do I live?")
    qtbot.waitUntil(lambda: not window.chat.busy)

    def recall_chips() -> list[chat_widgets.RecallChip]:
        return window.chat.view.findChildren(chat_widgets.RecallChip)

    qtbot.waitUntil(lambda: len(recall_chips()) == 1)
    chip = recall_chips()[0]
    assert chip.header.text() == "Remembered 1 thing you said before"
    assert "Lena and I live in Graz" in chip.lines.text()
    chip.header.click()
    assert chip.expanded
    sid = window.session_id
    assert sid is not None
    window.chat.set_session(None)
    qtbot.waitUntil(lambda: not recall_chips())
    wait_op(qtbot, window.chat.set_session(sid))
    qtbot.waitUntil(lambda: len(recall_chips()) == 1)
    assert [b.text() for b in window.chat.bubbles()] == ["Where do I live?", "You live in Graz."]


def test_message_html_leaves_the_font_to_the_label(qtbot: QtBot) -> None:
    """No size baked into a message: a font-size change in Settings reaches shown messages."""
    html = markdown_to_html("# Title\n\nsome **bold** text")
    assert "<body>" in html
    assert "pt;" not in html.split("<body>", 1)[1]


def test_an_answer_that_denies_what_was_told_is_replaced_in_its_bubble(
    qtbot: QtBot, make_window: WindowFactory, make_services: ServicesFactory
) -> None:
    """The streamed denial is cleared; the second try streams, then the quoted line stays."""
    model = ScriptedChatModel([["No, you are not ", WAIT, "allergic to anything."], ["No."]])
    services = make_services(model)
    said = "Just so you know, I'm allergic to penicillin."
    seed(services, "health", conversation([said, "Noted."]))
    window = make_window(services)
    wait_op(qtbot, window.new_session())
    type_and_send(qtbot, window, "Am I allergic to anything?")
    qtbot.waitUntil(model.waiting.is_set)
    # the stream shows the denial's start (its last two words wait: agent/voice.py)
    qtbot.waitUntil(lambda: window.chat.bubbles()[-1].text().startswith("No, you"))
    model.gate.set()
    qtbot.waitUntil(lambda: not window.chat.busy)
    answer = window.chat.bubbles()[-1].text()
    assert answer.startswith("Yes. You told me on")
    assert said in answer
    assert "corrected against your memory" in window.chat.turn_status.text()
    stored = history(services, window.session_id or "")
    assert stored[-1].content == answer


def test_the_message_box_fits_two_lines_of_a_larger_font(qtbot: QtBot) -> None:
    box = chat_panel.Composer()
    qtbot.addWidget(box)
    small = box.height()
    font = box.font()
    font.setPointSize(font.pointSize() + 6)
    box.setFont(font)
    assert box.height() > small
    assert box.height() == 2 * box.fontMetrics().lineSpacing() + 16
