"""Passages of the user's documents put in front of the model, before it is asked anything.

A 0.5B model rarely calls ``search_rag`` on its own, and when it does not,
it invents an answer (asked for the front tyre pressure kept in a note, the
starter model said "2800mmHg").  So, as proactive recall does for the
conversation memory, each turn searches the enabled collections with the
user's message and puts the passages that clearly match into the system
prompt, each with its citation; the model only has to read and cite.

"Clearly" is the cosine similarity of the message to the passage (MiniLM):
:data:`PASSAGE_FLOOR` on its own, or :data:`AGREED_FLOOR` when the keyword
search ranks the same passage among its first :data:`KEYWORD_DEPTH`; the
passages both searches agree on are shown first.  Nothing is added for a
message no passage matches, so small talk stays fast and unchanged.

The values were chosen by ``benchmarks/documents_floor.py``: LoCoMo's ten
conversations as collections of dated notes, 1,535 questions whose evidence
is in them, and 1,100 off-topic asks (110 greetings, small talk, general
knowledge, code and advice requests, asked of every collection).  Rule: the
highest share of questions whose evidence is injected, with at most 5 % of
off-topic asks getting any passage.  Evidence injected 53.8 % (45.5 % for the
earlier 0.40 / 0.28 / 3, ordered by cosine), passages that hold it 34 % (27 %),
off-topic asks with a passage 4.9 % (7.2 %).  Chosen on either half of
the conversations alone, the floors came out the same but for a passage
floor of 0.525 once.  By meaning alone, a passage held the evidence far
less often than one the words also found, hence the high
:data:`PASSAGE_FLOOR` and the agreed passages first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from agenvoy_desktop.agent.document_tools import DocumentLibrary, Passage
from agenvoy_desktop.agent.recall import content_terms
from agenvoy_desktop.core.retrieval.clip import clip_end

PASSAGE_FLOOR = 0.50
"""Cosine similarity at which a passage is put in front of the model by meaning alone."""
AGREED_FLOOR = 0.325
"""A lower bar for a passage the keyword search also ranks near the top."""
KEYWORD_DEPTH = 7
"""How near the top: among the keyword search's first seven chunks."""
MAX_PASSAGES = 2
"""A small model's prompt has little room; two passages answer most factual questions."""
PASSAGE_CHARS = 450
HEADER = (
    "Passages from the user's documents, each after its source in brackets. If one answers"
    " the question, answer from it and end with its source, copied exactly:"
)


@dataclass(frozen=True, slots=True)
class DocumentPassages:
    """The block for the system prompt ("" when no passage cleared the floor)."""

    text: str = ""
    citations: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    """Each passage's text, in the order of :attr:`citations`."""


@dataclass(frozen=True, slots=True)
class DocumentFloor:
    """What a passage must score to be shown, and how many are shown (the module's constants).

    A value so the benchmark that calibrates them can try others through the
    same code the turn runs.
    """

    passage: float = PASSAGE_FLOOR
    agreed: float = AGREED_FLOOR
    keyword_depth: int = KEYWORD_DEPTH
    max_passages: int = MAX_PASSAGES
    agreed_first: bool = True
    """Show passages both searches found before those found by meaning alone."""

    @property
    def search_depth(self) -> int:
        """How many chunks each search (by meaning, by words) is asked for."""
        return self.max_passages + self.keyword_depth


SHIPPED = DocumentFloor()
E5_FLOOR = DocumentFloor(passage=0.875, agreed=0.85, keyword_depth=7)
"""multilingual-e5-small puts an off-topic ask and the chunk that answers a question
both near cosine 0.80-0.85: MiniLM's floors let passages in for every off-topic ask.
This one holds false injection to 4.1 % and keeps 34.9 % of the evidence (MiniLM: 4.9 %
and 53.8 %; benchmarks/RESULTS.md §15.6)."""
FLOORS_BY_MODEL: dict[str, DocumentFloor] = {"multilingual-e5-small": E5_FLOOR}
"""Floors by the embedding model's own name (``core.model_name.embedding_model_name``)."""


def floor_for(model_name: str) -> DocumentFloor:
    """The passage floor measured for this embedding model; MiniLM's for any other."""
    return FLOORS_BY_MODEL.get(model_name, SHIPPED)


def agrees(passage: Passage, floor: DocumentFloor = SHIPPED) -> bool:
    """Whether the keyword search ranks *passage* near its top and its meaning is close enough."""
    return (
        passage.cosine is not None
        and passage.keyword_rank is not None
        and passage.keyword_rank < floor.keyword_depth
        and passage.cosine >= floor.agreed
    )


def clears(passage: Passage, floor: DocumentFloor = SHIPPED) -> bool:
    """Whether *passage* matches the message clearly enough to be shown to the model."""
    if passage.cosine is None:
        return False
    return passage.cosine >= floor.passage or agrees(passage, floor)


def choose_passages(passages: Sequence[Passage], floor: DocumentFloor = SHIPPED) -> list[Passage]:
    """The clearing passages the block shows: those both searches agree on first, then by cosine.

    Agreement first because a passage close in meaning alone held the
    evidence far less often than one the words found too; ordered by cosine
    only, it took one of the two places and pushed the evidence out.
    """

    def order(passage: Passage) -> tuple[bool, float]:
        return (floor.agreed_first and agrees(passage, floor), passage.cosine or 0.0)

    chosen = sorted((p for p in passages if clears(p, floor)), key=order, reverse=True)
    return chosen[: floor.max_passages]


def format_passages(
    passages: Sequence[Passage], floor: DocumentFloor = SHIPPED
) -> DocumentPassages:
    """The best clearing passages as a prompt block (best first)."""
    chosen = choose_passages(passages, floor)
    if not chosen:
        return DocumentPassages()
    lines = [HEADER]
    texts = [clip_end(" ".join(p.hit.text.split()), PASSAGE_CHARS) for p in chosen]
    for passage, text in zip(chosen, texts, strict=True):
        lines.append(f"[{passage.hit.citation}] {text}")
    return DocumentPassages("\n".join(lines), [p.hit.citation for p in chosen], texts)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _evidence(text: str) -> tuple[set[str], set[str]]:
    return set(content_terms(text)), set(_NUMBER.findall(text))


def sources_used(answer: str, question: str, passages: DocumentPassages) -> list[str]:
    """Citations of the passages the answer visibly draws on.

    A small model seldom cites by itself, so the app does: a passage counts
    as used when the answer repeats a number from it, or two of its words,
    that the question did not already contain (an answer that only echoes
    the question proves nothing).
    """
    asked_words, asked_numbers = _evidence(question)
    said_words, said_numbers = _evidence(answer)
    used: list[str] = []
    for citation, text in zip(passages.citations, passages.texts, strict=True):
        words, numbers = _evidence(text)
        shared_numbers = (said_numbers & numbers) - asked_numbers
        shared_words = (said_words & words) - asked_words
        if shared_numbers or len(shared_words) >= 2:
            used.append(citation)
    return used


def with_sources(answer: str, question: str, passages: DocumentPassages) -> str:
    """*answer* ending with the sources it drew on, unless it names one already."""
    if not passages.citations or any(c in answer for c in passages.citations):
        return answer
    used = sources_used(answer, question, passages)
    if not used:
        return answer
    label = "Source" if len(used) == 1 else "Sources"
    return f"{answer.rstrip()}\n\n{label}: " + ", ".join(f"[{c}]" for c in used)


def find_passages(
    library: DocumentLibrary, message: str, floor: DocumentFloor = SHIPPED
) -> DocumentPassages:
    """Worker thread: the block for *message*, or an empty one (documents off, nothing matches).

    *floor* is the one measured for the embedding model (:func:`floor_for`).
    """
    if not library.available():
        return DocumentPassages()
    return format_passages(library.passages(message, floor.search_depth), floor)
