"""What the last pass changed: the pure comparison behind the Summary tab's "Changed" section."""

from __future__ import annotations

from pathlib import Path

from agenvoy_desktop.core.store import MemoryStore
from agenvoy_desktop.core.summary import (
    PREVIOUS_FILE,
    KeyDecision,
    PastDiscussion,
    Summary,
    save_summary,
)
from agenvoy_desktop.core.summary_facts import Fact
from agenvoy_desktop.operations.summary import SummaryDiff, read_snapshot, summary_diff

DAY = "2024-03-01"


def topic(title: str, gist: str) -> PastDiscussion:
    return PastDiscussion(title, gist, DAY)


def fact(text: str, source: str = "m1", replaced: str | None = None) -> Fact:
    return Fact(text, source, DAY, "user", 4.0, replaced)


def test_the_same_summary_changed_nothing() -> None:
    summary = Summary(
        key_decisions=(KeyDecision("Move on 14 March"),),
        past_discussions=(topic("Moving", "Dates and movers."),),
        facts=(fact("The movers are Blue Wagon."),),
    )
    assert summary_diff(summary, summary) == SummaryDiff()
    assert summary_diff(summary, summary).is_empty


def test_topics_added_removed_and_changed() -> None:
    before = Summary(
        past_discussions=(
            topic("Moving", "Dates and movers."),
            topic("Piano", "How to move the piano."),
            topic("Internet", "Which provider to pick."),
        )
    )
    after = Summary(
        past_discussions=(
            topic("moving", "Dates, movers and the deposit."),  # same title, new gist
            topic("Internet", "Which provider to pick."),  # unchanged
            topic("Cat", "The cat Miso travels in the car."),
        )
    )
    diff = summary_diff(before, after)
    assert [p.topic for p in diff.topics_added] == ["Cat"]
    assert [p.topic for p in diff.topics_removed] == ["Piano"]
    [change] = diff.topics_changed
    assert (change.before.topic, change.after.topic) == ("Moving", "moving")
    assert change.renamed
    assert change.rewritten


def test_a_renamed_topic_with_the_same_words_is_one_change() -> None:
    before = Summary(
        past_discussions=(topic("Flat move", "Moving flats on 14 March with Blue Wagon."),)
    )
    after = Summary(
        past_discussions=(topic("House move", "Moving flats on 14 March with Blue Wagon."),)
    )
    diff = summary_diff(before, after)
    assert not diff.topics_added
    assert not diff.topics_removed
    [change] = diff.topics_changed
    assert change.renamed
    assert not change.rewritten


def test_a_gist_with_other_spacing_or_case_is_no_change() -> None:
    before = Summary(past_discussions=(topic("Piano", "How to move  the piano."),))
    after = Summary(past_discussions=(topic("Piano", "how to move the piano."),))
    assert summary_diff(before, after).is_empty


def test_decisions_added_and_removed_by_their_words() -> None:
    before = Summary(
        key_decisions=(
            KeyDecision("Go with Blue Wagon", source="m1"),
            KeyDecision("Sell the piano"),
        )
    )
    after = Summary(
        key_decisions=(
            KeyDecision("go with blue wagon", source="m1", by_user=True),  # same words
            KeyDecision("Keep the piano", source="m7"),
        )
    )
    diff = summary_diff(before, after)
    assert [d.decision for d in diff.decisions_added] == ["Keep the piano"]
    assert [d.decision for d in diff.decisions_removed] == ["Sell the piano"]


def test_facts_added_removed_and_replaced() -> None:
    before = Summary(
        facts=(
            fact("We move to Rose Street 4.", "m1"),
            fact("The deposit is 900 euros.", "m2"),
            fact("The cat is called Miso.", "m3"),
        )
    )
    after = Summary(
        facts=(
            fact("The cat is called Miso.", "m3"),
            fact("We move to Oak Lane 12 instead.", "m9", replaced="We move to Rose Street 4."),
            fact("Internet starts on 20 March.", "m10"),
        )
    )
    diff = summary_diff(before, after)
    assert [f.text for f in diff.facts_added] == ["Internet starts on 20 March."]
    assert [f.text for f in diff.facts_removed] == ["The deposit is 900 euros."]
    [change] = diff.facts_changed
    assert change.before == "We move to Rose Street 4."
    assert change.after.text == "We move to Oak Lane 12 instead."


def test_the_snapshot_carries_the_diff_only_with_a_previous_summary(store: MemoryStore) -> None:
    sid = store.create_session(None, "move")
    folder: Path = store.folder(sid)
    save_summary(folder, Summary(key_decisions=(KeyDecision("Move on 14 March"),)))
    assert read_snapshot(store, sid).diff is None
    save_summary(folder, Summary(key_decisions=(KeyDecision("Move on 15 March"),)))
    diff = read_snapshot(store, sid).diff
    assert diff is not None
    assert [d.decision for d in diff.decisions_added] == ["Move on 15 March"]
    assert [d.decision for d in diff.decisions_removed] == ["Move on 14 March"]
    (folder / PREVIOUS_FILE).write_text("{cut", "utf-8")
    snapshot = read_snapshot(store, sid)
    assert snapshot.diff is None
    assert snapshot.problems == []  # a damaged copy is no problem of the summary's
