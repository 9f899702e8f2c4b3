"""A recall record quotes messages of any session: their lines leave it when they go."""

from __future__ import annotations

from agenvoy_desktop.core import message_edit
from agenvoy_desktop.core.recall_record import withdrawn, without_lines
from agenvoy_desktop.core.store import MemoryStore
from tests.conftest import SECOND, T0, msg

SECRET = "quokkalock4721"


def block(*quoted: str) -> str:
    return "Said before:\n" + "\n".join(f'- you said: "{q}"' for q in quoted)


def test_withdrawn_takes_out_only_the_gone_lines_and_counts_them() -> None:
    detail = {"text": block("a secret", "a keeper"), "ids": ["a", "b"], "message_id": "q"}
    changed = withdrawn(detail, {"a"})
    assert changed is not None
    assert changed["text"] == block("a keeper")
    assert (changed["ids"], changed["withdrawn"], changed["message_id"]) == (["b"], 1, "q")
    assert withdrawn(detail, {"z"}) is None
    # a block whose lines cannot be matched to its ids goes whole (the safe side)
    assert without_lines(block("one", "two"), ["a"], {"a"}) == ""


def test_deleting_a_message_takes_its_line_out_of_another_sessions_recall_record(
    store: MemoryStore,
) -> None:
    told = store.create_session(None, "told")
    store.append(
        told, [msg("user", f"My code is {SECRET}.", T0), msg("assistant", "Ok.", T0 + SECOND)]
    )
    asked = store.create_session(None, "asked")
    store.append(asked, [msg("user", "The keeper is Marguerite.", T0 + 2 * SECOND)])
    secret, keeper = store.history(told).messages[0], store.history(asked).messages[0]
    detail = {"text": block(secret.content, keeper.content), "ids": [secret.id, keeper.id]}
    store.archive.add_event(asked, T0 + 3 * SECOND, "recall", detail)

    message_edit.delete_message(store, told, secret.id)
    event = store.archive.last_event(asked, "recall")
    assert event is not None
    assert SECRET not in event[1]["text"]
    assert "Marguerite" in event[1]["text"]
    assert event[1]["withdrawn"] == 1
