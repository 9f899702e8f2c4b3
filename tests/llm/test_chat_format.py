"""Chat templates rendered like transformers does, and the context-overflow policy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.core.model_api import ChatMessage
from agenvoy_desktop.llm.chat_format import (
    MIN_KEPT_CHARS,
    ChatTemplate,
    ChatTemplateError,
    cut_middle,
    fit_messages,
    split_groups,
)
from tests.tiny_gguf import CHATML_TOOLS_TEMPLATE

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOLS_JSON = (
    '{"type": "function", "function": {"name": "get_weather", "description": "Weather", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, '
    '"required": ["city"]}}}'
)

CONVERSATION: list[ChatMessage] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                # a JSON string here must render exactly like the dict form
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"temp": 21}'},
    {"role": "assistant", "content": "21 °C."},
    {"role": "user", "content": "Thanks"},
]

CONVERSATION_BODY = (
    "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\n"
    '{"temp": 21}\n'
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n21 °C.<|im_end|>\n"
    "<|im_start|>user\nThanks<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def test_tiny_template_with_tools_and_tool_results() -> None:
    rendered = ChatTemplate(CHATML_TOOLS_TEMPLATE).render(CONVERSATION, TOOLS)
    assert rendered == (
        "<|im_start|>system\nBe brief.\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>{TOOLS_JSON}</tools>\n\n"
        "For each function call, return a json object with function name and arguments\n"
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n'
        "</tool_call><|im_end|>\n" + CONVERSATION_BODY
    )


def test_chatml_fallback_with_and_without_tools() -> None:
    template = ChatTemplate(None)
    assert template.is_fallback
    assert template.render(CONVERSATION) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n" + CONVERSATION_BODY
    )
    assert template.render(CONVERSATION[1:], TOOLS) == (
        "<|im_start|>system\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{TOOLS_JSON}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n'
        "</tool_call><|im_end|>\n" + CONVERSATION_BODY
    )


def test_template_helpers_and_tokens() -> None:
    source = (
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{{ eos_token }}{{ strftime_now('%Y') | length }}{{ {'k': '漢'} | tojson }}"
        "{% if add_generation_prompt %}>{% endif %}"
    )
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    assert template.render([{"role": "user", "content": "hi"}]) == '<s>[user]hi</s>4{"k": "漢"}>'


def test_template_without_tool_support_gets_tools_in_the_system_message() -> None:
    source = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    rendered = ChatTemplate(source).render([{"role": "user", "content": "hi"}], TOOLS)
    assert rendered.startswith("<system># Tools")
    assert TOOLS_JSON in rendered
    assert rendered.endswith("<user>hi")


def test_strict_template_gets_plain_alternating_turns() -> None:
    # Mistral-style: roles must alternate user/assistant, nothing else allowed.
    source = (
        "{% for m in messages %}"
        "{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate') }}{% endif %}"
        "[{{ m.role }}]{{ m.content }}{% endfor %}"
    )
    rendered = ChatTemplate(source).render(CONVERSATION)
    assert rendered.startswith("[user]Be brief.\n\nWeather in Paris?[assistant]<tool_call>")
    assert "[user][tool result get_weather]\n" in rendered
    assert rendered.endswith("[user]Thanks")


# -- the turn note: a system message before the last user message (agent/context.py) ------------
NOTE: ChatMessage = {"role": "system", "content": "Current local time: 10:00"}
NOTED: list[ChatMessage] = [*CONVERSATION[:5], NOTE, CONVERSATION[5]]
QWEN25_TEMPLATE = (Path(__file__).parent / "qwen2.5_chat_template.jinja").read_text("utf-8")
"""The starter's own template (Qwen2.5-Coder-0.5B-Instruct's ``tokenizer.chat_template``)."""


def test_starter_template_renders_the_note_as_a_system_turn_before_the_question() -> None:
    rendered = ChatTemplate(QWEN25_TEMPLATE).render(NOTED)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        + CONVERSATION_BODY.replace(
            "<|im_start|>user\nThanks",
            "<|im_start|>system\nCurrent local time: 10:00<|im_end|>\n<|im_start|>user\nThanks",
        )
    )
    with_tools = ChatTemplate(QWEN25_TEMPLATE).render(NOTED, TOOLS)
    assert with_tools.count("<|im_start|>system\n") == 2
    assert with_tools.endswith(
        "<|im_start|>system\nCurrent local time: 10:00<|im_end|>\n"
        "<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n"
    )


def test_chatml_fallback_renders_the_note_in_place() -> None:
    rendered = ChatTemplate(None).render(NOTED)
    assert rendered.endswith(
        "<|im_start|>assistant\n21 °C.<|im_end|>\n"
        "<|im_start|>system\nCurrent local time: 10:00<|im_end|>\n"
        "<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n"
    )


def test_split_groups_puts_the_note_with_the_message_after_it() -> None:
    head, groups = split_groups(NOTED)
    assert head == NOTED[:1]
    assert [len(g) for g in groups] == [4, 2]
    assert groups[-1] == [NOTE, CONVERSATION[5]]
    # a tool round: the note, the question, the calls and results are one group
    round_two = [*NOTED, *CONVERSATION[2:4]]
    assert split_groups(round_two)[1][-1] == [NOTE, CONVERSATION[5], *CONVERSATION[2:4]]
    # right after the head it is part of the head, which is always kept
    head, groups = split_groups([CONVERSATION[0], NOTE, CONVERSATION[1]])
    assert (head, groups) == ([CONVERSATION[0], NOTE], [[CONVERSATION[1]]])


def test_fitting_never_drops_the_note_of_the_message_it_keeps() -> None:
    messages = conversation(10)
    messages.insert(len(messages) - 1, {"role": "system", "content": "recall " * 30})
    for budget in range(count_chars(messages) - 50, 0, -97):
        result = fit_messages(messages, budget, count_chars)
        kept = result.messages
        assert kept[-1]["content"].startswith("the question")
        assert kept[-2]["role"] == "system"  # the note, right before its message
        assert kept[-2]["content"].startswith("recall")
        assert kept[0]["content"].startswith("S")  # and the head


def test_strict_template_gets_the_note_in_the_next_user_turn() -> None:
    source = (
        "{% for m in messages %}"
        "{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate') }}{% endif %}"
        "[{{ m.role }}]{{ m.content }}{% endfor %}"
    )
    rendered = ChatTemplate(source).render(NOTED)
    assert rendered.startswith("[user]Be brief.\n\nWeather in Paris?[assistant]")
    assert rendered.endswith("[assistant]21 °C.[user]Current local time: 10:00\n\nThanks")


def test_template_that_allows_system_only_first_gets_the_plain_form() -> None:
    source = (
        "{% for m in messages %}"
        "{% if m.role == 'system' and not loop.first %}"
        "{{ raise_exception('System message must be at the beginning') }}{% endif %}"
        "<{{ m.role }}>{{ m.content }}{% endfor %}"
    )
    rendered = ChatTemplate(source).render(NOTED)
    assert rendered.endswith("<user>Current local time: 10:00\n\nThanks")
    assert rendered.startswith("<user>Be brief.\n\nWeather in Paris?")
    # a note with no user message after it ends the conversation as a user turn
    ending = ChatTemplate(source).render([*CONVERSATION[:5], NOTE])
    assert ending.endswith("<assistant>21 °C.<user>Current local time: 10:00")


def test_template_that_always_fails_names_the_model() -> None:
    template = ChatTemplate("{{ raise_exception('no way') }}", model="odd-model")
    with pytest.raises(ChatTemplateError, match=r"odd-model.*no way"):
        template.render(CONVERSATION)


def test_template_that_does_not_compile_falls_back_to_chatml() -> None:
    template = ChatTemplate("{% for m in messages %}")
    assert template.is_fallback
    assert template.render(CONVERSATION).endswith("<|im_start|>assistant\n")


def test_sandbox_blocks_attribute_escapes() -> None:
    template = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(ChatTemplateError):
        template.render([{"role": "user", "content": "x"}])


# -- fitting ------------------------------------------------------------------------------------
def count_chars(messages: Sequence[ChatMessage]) -> int:
    """A stand-in tokenizer: 10 tokens per message plus one per 4 characters."""
    return sum(10 + len(m.get("content", "")) // 4 for m in messages)


def conversation(pairs: int, size: int = 80) -> list[ChatMessage]:
    out: list[ChatMessage] = [{"role": "system", "content": "S" * 40}]
    for n in range(pairs):
        out.append({"role": "user", "content": f"u{n} " + "x" * size})
        out.append({"role": "assistant", "content": f"a{n} " + "y" * size})
    out.append({"role": "user", "content": "the question"})
    return out


def test_split_groups_keeps_tool_traffic_with_its_turn() -> None:
    head, groups = split_groups(CONVERSATION)
    assert head == CONVERSATION[:1]
    assert [len(g) for g in groups] == [4, 1]
    assert [g[0]["role"] for g in groups] == ["user", "user"]


def test_fitting_prompt_is_untouched() -> None:
    messages = conversation(3)
    result = fit_messages(messages, 10_000, count_chars)
    assert result.messages == messages
    assert (result.dropped, result.shortened, result.fits) == (0, 0, True)


def test_oldest_pairs_go_first_and_whole() -> None:
    messages = conversation(10)
    budget = count_chars(messages) - 50
    result = fit_messages(messages, budget, count_chars)
    assert result.fits
    assert result.tokens <= budget
    assert result.dropped == 2  # exactly one pair: the fewest that make it fit
    assert result.messages[0] == messages[0]
    assert result.messages[1]["content"].startswith("u1 ")
    assert result.messages[-1] == messages[-1]


def test_tool_group_is_dropped_whole() -> None:
    messages: list[ChatMessage] = [*CONVERSATION[:5], {"role": "user", "content": "next " * 40}]
    budget = count_chars([messages[0], messages[-1]]) + 5
    result = fit_messages(messages, budget, count_chars)
    assert [m["role"] for m in result.messages] == ["system", "user"]
    assert result.dropped == 4


def test_overlong_last_message_loses_its_middle() -> None:
    question = "HEAD " + "z" * 20_000 + " TAIL"
    messages: list[ChatMessage] = [*conversation(2), {"role": "user", "content": question}]
    del messages[-2]  # the last message is the long question
    budget = 600
    result = fit_messages(messages, budget, count_chars)
    assert result.fits
    assert result.tokens <= budget
    assert result.shortened == 1
    assert result.messages[0] == messages[0]  # the system message stays
    last = result.messages[-1]["content"]
    assert last.startswith("HEAD ")
    assert last.endswith(" TAIL")
    assert "characters omitted …]" in last
    assert messages[-1]["content"] == question  # the caller's list is not modified


def test_impossible_budget_reports_not_fitting() -> None:
    messages: list[ChatMessage] = [
        {"role": "system", "content": "s" * 5000},
        {"role": "user", "content": "q"},
    ]
    result = fit_messages(messages, 5, count_chars)
    assert not result.fits
    assert len(result.messages[0].get("content", "")) <= MIN_KEPT_CHARS + 40


def test_cut_middle_marks_what_was_omitted() -> None:
    assert cut_middle("short", 100) == "short"
    cut = cut_middle("a" * 50 + "b" * 50, 20)
    assert cut == "a" * 10 + "\n[… 80 characters omitted …]\n" + "b" * 10
