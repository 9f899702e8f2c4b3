"""Shared helpers for the document-collection benchmarks (not a benchmark itself).

LoCoMo's conversations become what a person keeps on disk: one dated
Markdown note per session (``# 8 May 2023, 1:56 pm`` then one
``**Speaker**: text`` line per turn, blank lines between), so a chunk's
line range maps back to LoCoMo's dialogue ids.  The notes are written to a
temporary or cache folder, never into the repository (LoCoMo is for
evaluation only).

Also here: a throw-away profile with collections, an embedder that returns
prepared vectors (for building large indexes without hours of embedding),
and the chunk-to-evidence mapping used for recall.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import benchlib
import numpy as np
import numpy.typing as npt

from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.rag.collections import Collection
from agenvoy_desktop.rag.index import DocumentIndex, index_folder, open_document_index
from agenvoy_desktop.rag.registry import CollectionRegistry, documents_dir

FloatArray = npt.NDArray[np.float32]
DIM = 384
_SESSION = re.compile(r"^D(\d+):\d+$")
_LINE = re.compile(r"^\*\*(?P<name>[^*]+)\*\*: (?P<text>.*)$")


@dataclass
class NoteSet:
    """Where the notes of one conversation are, and which dialogue id each line holds."""

    folder: Path
    lines: dict[str, dict[int, str]] = field(default_factory=dict)
    """file name -> {1-based line number: dia_id}."""

    def refs(self, path: str, start: int | None, end: int | None) -> set[str]:
        """The dialogue ids inside a chunk's line range (its path is ``<root>/<file>``)."""
        by_line = self.lines.get(path.rsplit("/", 1)[-1], {})
        if start is None or end is None:
            return set()
        return {ref for line, ref in by_line.items() if start <= line <= end}


def session_number(dia_id: str) -> int:
    match = _SESSION.match(dia_id)
    if match is None:
        raise ValueError(f"not a LoCoMo dialogue id: {dia_id}")
    return int(match.group(1))


def heading_date(time_ns: int) -> str:
    """A session's start as a person writes it in a note: ``8 May 2023, 1:56 pm``."""
    when = datetime.fromtimestamp(time_ns / 1e9, tz=UTC)
    return f"{when.day} {when:%B %Y}, {when.hour % 12 or 12}:{when:%M} {when:%p}".replace(
        "AM", "am"
    ).replace("PM", "pm")


def note_line(speaker: str, text: str) -> str:
    """One turn as one Markdown line (newlines inside a turn are flattened)."""
    return f"**{speaker}**: {' '.join(text.split())}"


def write_notes(conv: benchlib.Conversation, folder: Path) -> NoteSet:
    """*conv* as one note per session in *folder*; returns the line-to-dialogue-id map."""
    folder.mkdir(parents=True, exist_ok=True)
    notes = NoteSet(folder)
    sessions: dict[int, list[benchlib.Turn]] = {}
    for turn in conv.turns:
        sessions.setdefault(session_number(turn.dia_id), []).append(turn)
    for number, turns in sorted(sessions.items()):
        day = datetime.fromtimestamp(turns[0].time_ns / 1e9, tz=UTC)
        name = f"{day:%Y-%m-%d}-session-{number:02d}.md"
        lines = [f"# {heading_date(turns[0].time_ns)}", ""]
        by_line: dict[int, str] = {}
        for turn in turns:
            lines.append(note_line(turn.speaker, turn.text))
            by_line[len(lines)] = turn.dia_id
            lines.append("")
        (folder / name).write_text("\n".join(lines), "utf-8")
        notes.lines[name] = by_line
    return notes


# -- profiles and collections ------------------------------------------------------------
def add_collection(paths: AppPaths, name: str, roots: Sequence[Path]) -> Collection:
    return CollectionRegistry(paths).add(name, [str(r) for r in roots])


def open_index(paths: AppPaths, name: str) -> DocumentIndex:
    return open_document_index(index_folder(documents_dir(paths), name), name)


# -- embedders ---------------------------------------------------------------------------
def unit(vectors: FloatArray) -> FloatArray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    out: FloatArray = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


def hashed_vector(text: str, dim: int = DIM) -> FloatArray:
    """A deterministic random unit vector for *text* (same text, same vector)."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    return unit(np.random.default_rng(seed).standard_normal(dim).astype(np.float32))


class PreparedEmbedder:
    """A stand-in for the Embedder that costs (almost) nothing per text.

    ``vector_of(text)`` says what a text's vector is; ``model_path`` is the
    real model's, so an index built with this one is current for the real
    embedder too (the index remembers the model by file name).
    """

    def __init__(
        self, vector_of: Callable[[str], FloatArray], model_path: Path | None, dim: int = DIM
    ) -> None:
        self._vector_of = vector_of
        self.model_path = model_path
        self.dim = dim
        self.calls = 0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> FloatArray:
        self.calls += 1
        self.texts += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector_of(t) for t in texts]).astype(np.float32)

    def submit(self, texts: Sequence[str]) -> Future[FloatArray]:
        future: Future[FloatArray] = Future()
        future.set_result(self.embed(texts))
        return future

    def close(self) -> None:
        """Nothing to release."""


def fixed_query_embedder(vector: FloatArray) -> PreparedEmbedder:
    """An embedder that answers every query with *vector* (query embedding kept out of timings)."""
    return PreparedEmbedder(lambda _t: vector, None, int(vector.shape[-1]))


def turn_vectors(n_turns: int) -> FloatArray | None:
    """Cached real MiniLM vectors of every LoCoMo turn (bare text), if another benchmark made them.

    ``retrieval_lab.py`` caches them as ``locomo-turns-bare-*.npy``; None when absent.
    """
    for file in sorted((benchlib.BENCH_CACHE / "embeddings").glob("locomo-turns-bare-*.npy")):
        vectors: FloatArray = np.load(file).astype(np.float32)
        if vectors.shape == (n_turns, DIM):
            return vectors
    return None


def line_vectors(
    lines: Iterable[str], vector_of_line: Callable[[str], FloatArray | None]
) -> FloatArray:
    """A chunk's stand-in vector: the normalised mean of its lines' vectors (mean pooling)."""
    found = [v for v in (vector_of_line(line) for line in lines) if v is not None]
    if not found:
        return np.zeros(DIM, dtype=np.float32)
    return unit(np.mean(found, axis=0).astype(np.float32))


def parse_line(line: str) -> tuple[str, str] | None:
    """(speaker, text) of a note line, or None for a heading or blank line."""
    match = _LINE.match(line)
    return None if match is None else (match.group("name"), match.group("text"))
