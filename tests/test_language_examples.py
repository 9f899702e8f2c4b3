"""Every language's example sentences read as its table says (``language/data/*.examples.toml``).

One table per language, one test for all: a language is added with its data file
and its examples, and this file tests it without a change.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Callable
from importlib import resources

import pytest

from agenvoy_desktop.agent import not_remembered, policy, recall, recap, speech_act
from agenvoy_desktop.agent.query_translation import other_languages, translation_prompt, usable
from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.language import Language, LanguageDataError, language_of, languages
from agenvoy_desktop.language.catalog import SCHEMA, parse
from tests.conftest import msg

READINGS: dict[str, Callable[[str], bool]] = {
    "tells": speech_act.only_tells,
    "asks": lambda text: any(speech_act.asks(s) for s in speech_act.sentences(text)),
    "requests": lambda text: any(speech_act.requests(s) for s in speech_act.sentences(text)),
    "own_fact": not_remembered.asks_for_own_fact,
    "recap": recap.asks_for_recap,
    "time": lambda text: policy.clock_in_prompt(text, small_model=True) == "time",
    "past": policy.asks_about_the_past,
    "files": lambda text: policy.needed_tools(text, recalled=True) >= policy.FILE_TOOLS,
    "advice": recall.asks_for_advice,
    "gathers": recall.gathers,
    "assistant": recall.asks_about_assistant,
}
"""What a sentence can be read as, by the function that reads it so."""


def _table(code: str) -> list[dict[str, object]]:
    data = resources.files("agenvoy_desktop.language").joinpath("data", f"{code}.examples.toml")
    examples = tomllib.loads(data.read_text(encoding="utf-8"))["examples"]
    assert isinstance(examples, list)
    return examples


def _cases() -> list[object]:
    return [
        pytest.param(lang.code, example, id=f"{lang.code}: {example['text']}")
        for lang in languages()
        for example in _table(lang.code)
    ]


def _readings(example: dict[str, object], key: str) -> list[str]:
    value = example.get(key, [])
    assert isinstance(value, list)
    unknown = set(value) - set(READINGS)
    assert not unknown, f"unknown readings {sorted(unknown)}"
    return [str(v) for v in value]


@pytest.mark.parametrize(("code", "example"), _cases())
def test_example_reads_as_its_table_says(code: str, example: dict[str, object]) -> None:
    text = str(example["text"])
    reads, not_reads = _readings(example, "reads"), _readings(example, "not")
    assert reads, "an example says how it is read"
    wrong = [r for r in reads if not READINGS[r](text)] + [
        f"not {r}" for r in not_reads if READINGS[r](text)
    ]
    assert not wrong, f"{text!r} is not read as: {', '.join(wrong)}"
    if "own_fact" in reads:  # the "I don't know" exchange is shown in the question's language
        assert language_of(text) == code


@pytest.mark.parametrize("lang", languages(), ids=lambda lang: lang.code)
def test_every_language_has_examples_that_ask_tell_and_request(lang: Language) -> None:
    seen = {r for example in _table(lang.code) for r in _readings(example, "reads")}
    assert {"tells", "asks", "requests", "own_fact"} <= seen


@pytest.mark.parametrize("lang", languages(), ids=lambda lang: lang.code)
def test_the_dont_know_examples_are_questions_for_a_fact_in_their_language(
    lang: Language,
) -> None:
    examples = lang.pairs("dont_know.examples")
    assert len(examples) == 2  # measured: two exchanges, the second one shorter
    for question, _answer in examples:
        assert not_remembered.asks_for_own_fact(question)
        assert not_remembered.example_for(question) == examples


def test_english_comes_first_and_every_language_is_read() -> None:
    codes = [lang.code for lang in languages()]
    assert codes[0] == "en"
    assert {"en", "de", "zh", "ja", "fr"} <= set(codes)


def test_a_french_question_gets_the_replies_the_agent_words_in_french() -> None:
    assert not_remembered.language_of("Comment s'appelle ma sœur ?") == "fr"
    assert recap.header_for("De quoi avons-nous parlé la dernière fois ?").startswith("Plus tôt")


REPLY_KEYS = [
    "never_told_about", "never_told", "quote_user", "quote_assistant", "quote_document",
    "quote_on", "yes", "no",
]  # fmt: skip


@pytest.mark.parametrize("lang", languages(), ids=lambda lang: lang.code)
def test_every_language_words_every_reply_with_its_fields(lang: Language) -> None:
    fields = {
        "never_told_about": {"words"},
        "quote_user": {"on", "text"},
        "quote_assistant": {"on", "text"},
        "quote_document": {"source", "text"},
        "quote_on": {"day"},
    }
    for key in REPLY_KEYS:
        worded = lang.text(f"reply.{key}")
        assert worded, key
        named = {name for _, name, _, _ in string.Formatter().parse(worded) if name}
        assert named == fields.get(key, set()), key


def test_an_archive_in_french_is_searched_in_french(store: MemoryStore) -> None:
    sid = store.create_session("earlier")
    said = "Je ne sais pas où est mon chat, il était avec nous dans le jardin."
    store.append(sid, [msg("user", said, 1)])
    assert other_languages(store.archive) == ["fr"]
    prompt = translation_prompt("What is my cat's name?", "fr")
    assert "French" in prompt[0]["content"]
    assert usable("Comment s'appelle mon chat ?", "fr") == "Comment s'appelle mon chat ?"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            '[language]\nname = "X"\nscript = "latin"\n[speech]\nlaed = ["a"]\n',
            "unknown key 'speech.laed'",
        ),
        ('[language]\nname = "X"\nscript = "latin"\n[speech]\nlead = "a"\n', "speech.lead must be"),
        ('[language]\nname = "X"\nscript = "latin"\n[recap]\npatterns = ["(a"]\n', "bad pattern"),
        ('[language]\nname = "X"\nscript = "runes"\n', "language.script"),
        ("[language\n", "not valid TOML"),
    ],
)
def test_a_bad_language_file_is_named_in_one_line(source: str, message: str) -> None:
    with pytest.raises(LanguageDataError, match=r"^language file xx\.toml: ") as caught:
        parse("xx", source)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_schema_has_every_key_the_files_use() -> None:
    assert all(set(lang.entries) <= set(SCHEMA) for lang in languages())
    with pytest.raises(KeyError):
        languages()[0].words("speech.no_such_list")
