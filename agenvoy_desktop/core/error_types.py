"""The vocabulary of the error memory: records, classes, hints.

Everything here is pure (no storage): what a record is, how a failure is
classified (``error_type``), how user or agent input is validated before it
reaches the database, how candidates are ranked, and how returned records
become the hint text the agent injects into the next model turn.
:mod:`core.error_memory` stores records and calls these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

import numpy as np
import numpy.typing as npt

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.retrieval.clip import clip_line, keep_ends
from agenvoy_desktop.core.retrieval.fts_text import normalize

ErrorType = Literal[
    "not_found",
    "permission",
    "invalid_param",
    "required_param",
    "timeout",
    "no_result",
    "tool_not_exist",
    "other",
]
ERROR_TYPES: tuple[ErrorType, ...] = get_args(ErrorType)
Outcome = Literal["resolved", "failed", "abandoned"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
Source = Literal["agent", "user"]
SOURCES: tuple[Source, ...] = get_args(Source)
HintReason = Literal["similar", "error_type", "keywords", "search"]
_Choice = TypeVar("_Choice", bound=str)

ERROR_TYPE_PREFIX = "error_type:"
MAX_TOOL_CHARS = 128
MAX_SYMPTOM_CHARS = 2000
MAX_TEXT_CHARS = 2000  # cause, action
MAX_KEYWORDS = 20
MAX_KEYWORD_CHARS = 64
MAX_SESSION_ID_CHARS = 200
ERROR_TEXT_CLIP = 2000
"""Error texts are cut to their first and last 1000 characters before they are
classified, matched and embedded: a traceback's message is at its end."""

_HINT_FIELD_CHARS = 300


class ErrorRecordInvalid(KnownError, ValueError):
    """A record field is missing or out of bounds; the message names the field."""


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    """One remembered failure.  Times are UTC ns; ``last_hit_ns`` None = never hit."""

    id: int
    tool: str
    keywords: tuple[str, ...]  # lower-cased, deduplicated, ending with error_type:<class>
    error_type: ErrorType
    symptom: str
    cause: str
    action: str
    outcome: Outcome
    created_ns: int
    updated_ns: int
    expires_ns: int
    hits: int
    last_hit_ns: int | None
    source: Source
    session_id: str | None
    has_vector: bool = False

    def is_expired(self, now_ns: int) -> bool:
        return self.expires_ns <= now_ns


@dataclass(frozen=True, slots=True)
class ErrorHint:
    """A record returned for a failure (or a search), with what the agent must do."""

    record: ErrorRecord
    score: float  # cosine similarity for "similar", fused rank score for "search", else 0
    reason: HintReason
    instruction: str


# -- classification ------------------------------------------------------------------
_PATTERN_TEXT: tuple[tuple[ErrorType, str], ...] = (
    (
        "tool_not_exist",
        r"\b(unknown|no such|unsupported|unregistered|undefined) (tool|function)\b"
        r"|\b(tool|function)\s+['\"`]?[\w.\-]+['\"`]?\s+(is\s+)?(not found|does not exist"
        r"|doesn't exist|not available|not registered|unknown)\b",
    ),
    ("timeout", r"\btimed? ?out\b|\btimeout\b|\bdeadline exceeded\b|\betimedout\b"),
    (
        "permission",
        r"\bpermission denied\b|\baccess (is )?denied\b|\bnot permitted\b|\bforbidden\b"
        r"|\bunauthori[sz]ed\b|\beacces\b|\beperm\b|\bnot allowed\b|\boutside the allowed\b",
    ),
    (
        "required_param",
        r"\bmissing\b.{0,40}\brequired\b|\brequired (argument|parameter|field|property)"
        r"|\bis required\b|\bare required\b|\bmissing (argument|parameter|field)",
    ),
    (
        "not_found",
        r"\bno such file\b|\bnot found\b|\bdoes not exist\b|\bdoesn't exist\b"
        r"|\benoent\b|\bno such (directory|path|key|entry|session|record)\b|\b404\b",
    ),
    (
        "invalid_param",
        r"\binvalid\b|\bmust be\b|\bexpected\b|\bexpecting\b|\bnot a valid\b"
        r"|\bout of range\b|\bunexpected keyword\b|\bbad (argument|parameter|value)\b"
        r"|\bcannot parse\b|\bnot an? (integer|number|string|iso)\b",
    ),
    (
        "no_result",
        r"\bno results?\b|\bempty (result|response|output)\b|\bnothing found\b"
        r"|\bno matches\b|\breturned nothing\b",
    ),
)
_PATTERNS = tuple((name, re.compile(text)) for name, text in _PATTERN_TEXT)

_EXCEPTION_TYPES: tuple[tuple[type[BaseException], ErrorType], ...] = (
    (FileNotFoundError, "not_found"),
    (PermissionError, "permission"),
    (TimeoutError, "timeout"),
    (IsADirectoryError, "invalid_param"),
    (NotADirectoryError, "invalid_param"),
)


def error_text(error: BaseException | str | None) -> str:
    """The text of a failure: ``Type: message`` for an exception, clipped."""
    if error is None:
        return ""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    return keep_ends(text.strip(), ERROR_TEXT_CLIP, "\n…\n")


QUERY_CLIP = 200
"""The most characters of an error text embedded for a lookup (head and tail kept)."""

_PATH_PART = r"[^\\/\s'\"()<>,;:|]+"
_PATH = re.compile(rf"['\"]?(?:[A-Za-z]:|{_PATH_PART})?(?:[\\/]{_PATH_PART}){{2,}}[\\/]?['\"]?")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,\s]*\)|\[\s*[,\s]*\]")
_CLASS_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning): ")
_MIN_MESSAGE_WORDS = 3


def lookup_query(tool: str, error: BaseException | str | None) -> str:
    """The part of a failure worth embedding when looking for similar records.

    Embedding the query is most of a lookup's cost and grows with every token
    (about 0.35 ms per token on two cores, against a 20 ms budget for the
    whole turn loop), while what makes two failures alike is their kind, not
    the file they were about.  So the ``<tool> failed:`` prefix goes (the
    lookup keeps to *tool* already), paths go (many tokens, little meaning;
    the keyword tier still matches file names), an exception class goes when
    a message of its own follows (``PermissionError: permission denied …``
    says it twice), and a long text keeps its head and its tail (where a
    traceback's message is), :data:`QUERY_CLIP` characters in all.
    """
    text = error_text(error)
    prefix = f"{tool} failed:"
    if tool and text.startswith(prefix):
        text = text[len(prefix) :].lstrip()
    text = _EMPTY_BRACKETS.sub("", _PATH.sub("", text))
    text = " ".join(text.split())
    rest = _CLASS_PREFIX.sub("", text, count=1)
    if len(rest.split()) >= _MIN_MESSAGE_WORDS:
        text = rest
    return keep_ends(text, QUERY_CLIP, " … ")


def classify_error(error: BaseException | str | None) -> ErrorType:
    """The ``error_type`` of a failure: exception class first, then its text.

    ``None`` or an empty text means the tool returned nothing (``no_result``).
    A ``TypeError``/``ValueError`` whose text says nothing more specific is a
    bad argument (``invalid_param``): that is how Python tools reject input.
    """
    if isinstance(error, BaseException):
        for exc_type, name in _EXCEPTION_TYPES:
            if isinstance(error, exc_type):
                return name
    text = normalize(error_text(error))
    if not text.strip():
        return "no_result"
    for name, pattern in _PATTERNS:
        if pattern.search(text):
            return name
    if isinstance(error, TypeError | ValueError):
        return "invalid_param"
    return "other"


# -- validation ----------------------------------------------------------------------
def _bounded(field: str, value: str, limit: int, *, required: bool) -> str:
    if not isinstance(value, str):
        raise ErrorRecordInvalid(f"{field} must be text, not {type(value).__name__}")
    text = value.strip()
    if required and not text:
        raise ErrorRecordInvalid(f"{field} must not be empty")
    if len(text) > limit:
        raise ErrorRecordInvalid(f"{field} is {len(text)} characters; the limit is {limit}")
    return text


def clean_tool(tool: str) -> str:
    return _bounded("tool", tool, MAX_TOOL_CHARS, required=True)


def clean_symptom(symptom: str) -> str:
    return _bounded("symptom", symptom, MAX_SYMPTOM_CHARS, required=True)


def clean_text(field: str, value: str) -> str:
    return _bounded(field, value, MAX_TEXT_CHARS, required=False)


def clean_session_id(session_id: str | None) -> str | None:
    if session_id is None:
        return None
    return _bounded("session_id", session_id, MAX_SESSION_ID_CHARS, required=False) or None


def clean_choice(field: str, value: str, allowed: Sequence[_Choice]) -> _Choice:
    """*value* as the member of *allowed* it equals (typed), or a clear error."""
    for choice in allowed:
        if choice == value:
            return choice
    raise ErrorRecordInvalid(f"{field} must be one of {', '.join(allowed)}; got {value!r}")


def clean_keywords(keywords: Iterable[str]) -> list[str]:
    """Lower-cased, whitespace-collapsed, deduplicated user keywords (order kept).

    ``error_type:`` keywords are dropped: the record's class is added
    automatically by :func:`with_type_keyword` and is the only one kept.
    """
    if isinstance(keywords, str):
        raise ErrorRecordInvalid("keywords must be a list of words, not one string")
    out: list[str] = []
    for raw in keywords:
        word = " ".join(_bounded("keyword", raw, MAX_KEYWORD_CHARS, required=True).split())
        word = normalize(word)
        if word.startswith(ERROR_TYPE_PREFIX) or word in out:
            continue
        out.append(word)
    if len(out) > MAX_KEYWORDS:
        raise ErrorRecordInvalid(f"keywords: {len(out)} given; the limit is {MAX_KEYWORDS}")
    return out


def merge_keywords(old: Sequence[str], new: Sequence[str]) -> list[str]:
    """Old keywords then new ones, deduplicated; the oldest go beyond the limit."""
    merged = [k for k in old if not k.startswith(ERROR_TYPE_PREFIX)]
    merged += [k for k in new if k not in merged]
    return merged[-MAX_KEYWORDS:]


def with_type_keyword(keywords: Sequence[str], error_type: ErrorType) -> tuple[str, ...]:
    return (*keywords, f"{ERROR_TYPE_PREFIX}{error_type}")


def symptom_key(symptom: str) -> str:
    """What makes two symptoms "the same": case, width, spacing and end punctuation aside."""
    return " ".join(normalize(symptom).split()).rstrip(" .!;:,")


@dataclass(slots=True)
class RecordDraft:
    """Validated fields of a record about to be written."""

    tool: str
    symptom: str
    cause: str
    action: str
    outcome: Outcome
    error_type: ErrorType
    keywords: list[str]  # user keywords, without the error_type one
    source: Source
    session_id: str | None


def draft_record(
    *,
    tool: str,
    symptom: str,
    cause: str,
    action: str,
    outcome: str,
    keywords: Iterable[str],
    error_type: str | None,
    source: str,
    session_id: str | None,
) -> RecordDraft:
    """Validate every field (ErrorRecordInvalid names the first bad one).

    Without an explicit ``error_type`` the record takes its symptom's class,
    or its cause's when the symptom says nothing classifiable.
    """
    symptom = clean_symptom(symptom)
    cause = clean_text("cause", cause)
    if error_type is not None:
        etype = clean_choice("error_type", error_type, ERROR_TYPES)
    else:
        etype = classify_error(symptom)
        if etype == "other" and cause:
            etype = classify_error(cause)
    return RecordDraft(
        tool=clean_tool(tool),
        symptom=symptom,
        cause=cause,
        action=clean_text("action", action),
        outcome=clean_choice("outcome", outcome, OUTCOMES),
        error_type=etype,
        keywords=clean_keywords(keywords),
        source=clean_choice("source", source, SOURCES),
        session_id=clean_session_id(session_id),
    )


# -- matching terms ---------------------------------------------------------------
_WORDS = re.compile(r"\w+")
_CJK_RUN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]{2,}")
_MAX_NGRAM = 4
_MAX_CJK_GRAM = 6


def keyword_term(keyword: str) -> str:
    """A keyword's matching form: its words joined by single spaces."""
    return " ".join(_WORDS.findall(normalize(keyword)))


def text_terms(text: str) -> set[str]:
    """Every term of *text* a keyword could equal: word 1..4-grams, CJK substrings."""
    words = _WORDS.findall(normalize(text))
    terms: set[str] = set()
    for size in range(1, _MAX_NGRAM + 1):
        terms.update(" ".join(words[i : i + size]) for i in range(len(words) - size + 1))
    for run in _CJK_RUN.findall(normalize(text)):
        for size in range(2, min(_MAX_CJK_GRAM, len(run)) + 1):
            terms.update(run[i : i + size] for i in range(len(run) - size + 1))
    return terms


# -- ranking -----------------------------------------------------------------------------
def rank_for_failure(
    sims: npt.NDArray[np.float32],
    same_type: npt.NDArray[np.bool_],
    overlap: npt.NDArray[np.int64],
    ids: npt.NDArray[np.int64],
    *,
    min_similarity: float,
    limit: int,
) -> list[tuple[int, HintReason]]:
    """The best *limit* candidates of a failure lookup: (position, why), best first.

    Tier 1: symptom similar to the error (cosine ≥ *min_similarity*), by
    similarity.  Tier 2: same error_type, by keyword overlap.  Tier 3:
    shared keywords, by overlap.  Ties: similarity, then the newer record.
    Candidates in no tier are not returned.
    """
    tier = np.select([sims >= min_similarity, same_type, overlap > 0], [0, 1, 2], default=3)
    cand = np.flatnonzero(tier < 3)  # usually a small part: sort only that
    sim, tie = sims[cand], tier[cand]
    second = np.where(tie == 0, -sim, -overlap[cand].astype(np.float32))
    order = cand[np.lexsort((-ids[cand], -sim, second, tie))]
    reasons: tuple[HintReason, ...] = ("similar", "error_type", "keywords")
    return [(int(i), reasons[int(tier[i])]) for i in order[:limit]]


# -- hints ------------------------------------------------------------------------------
def instruction_for(record: ErrorRecord) -> str:
    """Resolved: apply the fix.  Failed or abandoned: do not repeat the strategy."""
    action = clip_line(record.action, _HINT_FIELD_CHARS) or "(no action recorded)"
    if record.outcome == "resolved":
        return f"apply this fix: {action}"
    return f"do not repeat this: {action}"


def hint_for(record: ErrorRecord, score: float, reason: HintReason) -> ErrorHint:
    return ErrorHint(record, score, reason, instruction_for(record))


def format_hints(hints: Sequence[ErrorHint], *, tool: str | None = None) -> str:
    """The block the agent injects into the next model turn ("" for no hints)."""
    if not hints:
        return ""
    subject = f"the tool `{tool}`" if tool else "this tool"
    lines = [f"Error memory: past failures of {subject} that resemble this one."]
    for number, hint in enumerate(hints, start=1):
        rec = hint.record
        cause = f" Cause: {clip_line(rec.cause, _HINT_FIELD_CHARS)}." if rec.cause else ""
        lines.append(
            f"{number}. [{rec.outcome}, record #{rec.id}, {rec.tool}] "
            f"Symptom: {clip_line(rec.symptom, _HINT_FIELD_CHARS)}.{cause} → {hint.instruction}"
        )
    lines.append(
        "Apply a resolved fix when it fits this failure; never repeat a failed or abandoned one."
    )
    return "\n".join(lines)
