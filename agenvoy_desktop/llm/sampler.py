"""Choosing the next token: llama.cpp's sampler chain and a lazily checked JSON grammar.

:class:`Sampler` owns the llama.cpp sampler objects of one request (greedy, or
top-k / top-p / min-p / temperature / seeded draw, plus an optional grammar, an
optional repetition guard and an optional flat repeat penalty) and frees them
in :meth:`Sampler.close`.  Chat answers bring the model's
:class:`~agenvoy_desktop.settings.SamplingSettings`; JSON answers use the
module's defaults and :data:`JSON_REPETITION_GUARD`.  It
lives apart from :class:`~agenvoy_desktop.llm.llama_model.LlamaModel` because
its state is per request (a grammar's parse position, the tokens a penalty has
seen, the seeded random stream) while the model and its KV cache outlive every
request, and because the grammar shortcut is sampling policy, not model
plumbing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import llama_cpp
import numpy as np

from agenvoy_desktop.llm.openings import OpeningBan
from agenvoy_desktop.settings import SamplingSettings

TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05


class SamplingModel(Protocol):
    """What a sampler needs of the loaded model (:class:`.llama_model.LlamaModel` has it).

    A protocol rather than the class, so that the model, which makes samplers, is the only
    one of the two modules that imports the other.
    """

    @property
    def context(self) -> Any:
        """The llama.cpp context whose logits are sampled."""

    @property
    def vocab(self) -> Any:
        """The llama.cpp vocabulary (grammar, repetition guard, vocabulary size)."""

    def piece(self, token: int) -> bytes:
        """The bytes *token* stands for (an opening ban follows the text chosen)."""


# llama_token_data as a numpy record, so a whole vocabulary of candidates fills without a loop.
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


@dataclass(frozen=True, slots=True)
class RepetitionGuard:
    """llama.cpp's DRY penalty ("don't repeat yourself"), tuned for JSON answers.

    DRY lowers the logit of a token that would continue a run of tokens the
    answer has already produced, more steeply the longer the run
    (``multiplier * base ** (run - allowed_length)``), so a sentence is not
    written a second time while short phrases and names may recur.  A run
    never crosses a *sequence breaker*: with JSON's punctuation as breakers
    the keys and separators that every list item repeats go unpunished, and
    with ``-`` a date that recurs ("2024-05-02") stays a run of at most four
    digits, below ``allowed_length``.  Only generated tokens count, never the
    prompt, so copying a name from the transcript is free (a chat answer also
    counts the user's last message: :meth:`Sampler.remember`).

    llama.cpp's flat repeat / frequency / presence penalties are left out
    (``repeat_penalty`` 1.0): they would also punish the quote that closes a
    string or the comma between items — tokens a JSON answer must repeat —
    and so make strings run on.
    """

    multiplier: float = 0.8
    base: float = 1.75
    allowed_length: int = 4
    last_n: int = 4096
    """Tokens of the answer searched for runs (a whole summary answer fits)."""
    breakers: tuple[str, ...] = ("\n", '"', ":", ",", "{", "}", "[", "]", "-")


JSON_REPETITION_GUARD = RepetitionGuard()

PROSE_BREAKERS = ("\n", ":", '"', "*")
"""llama.cpp's default DRY sequence breakers: a run of prose never spans a line or a quote."""

JSON_SAMPLING = SamplingSettings(top_k=TOP_K, top_p=TOP_P, min_p=MIN_P)
"""The truncation JSON answers use (their temperature and guard come with the request)."""


def chat_guard(sampling: SamplingSettings) -> RepetitionGuard | None:
    """The DRY guard a chat answer's settings ask for (None: ``dry_multiplier`` is 0).

    Only the answer's last ``max(repeat_last_n, 1024)`` tokens are searched:
    a looping paragraph repeats well within that, and a shorter window keeps
    each token's search cheap.
    """
    if sampling.dry_multiplier <= 0:
        return None
    return RepetitionGuard(
        multiplier=sampling.dry_multiplier,
        base=sampling.dry_base,
        allowed_length=sampling.dry_allowed_length,
        last_n=max(sampling.repeat_last_n, 1024),
        breakers=PROSE_BREAKERS,
    )


class Sampler:
    """Token sampling for one request (worker thread only).

    A JSON-schema grammar is checked lazily, the way llama.cpp's own
    ``common_sampler`` does it: sample without the grammar, ask the grammar
    whether that one token is allowed, and only if it is not, apply the
    grammar to the whole vocabulary and sample again.  Applying it to every
    one of Qwen's 151,936 tokens costs ~50 ms per token, twice a decode.
    """

    def __init__(
        self,
        model: SamplingModel,
        *,
        temperature: float,
        seed: int | None,
        grammar: str | None,
        repetition: RepetitionGuard | None = None,
        sampling: SamplingSettings = JSON_SAMPLING,
        openings: OpeningBan | None = None,
    ) -> None:
        self._ctx = model.context
        self._model = model
        self._openings = openings
        self._grammar: Any = None
        self._chain = self._new_chain(model, temperature, seed, repetition, sampling)
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(model.vocab))
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        self._candidates = np.zeros(self._n_vocab, dtype=_TOKEN_DATA)
        if grammar is not None:
            self._grammar = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar.encode("utf-8"), b"root"
            )
            if not self._grammar:
                self._grammar = None
                self.close()
                raise ValueError("llama.cpp rejected the grammar built from the JSON schema")
            self._one = (llama_cpp.llama_token_data * 1)()
            self._one_array = llama_cpp.llama_token_data_array(
                data=self._one, size=1, selected=-1, sorted=False
            )

    @staticmethod
    def _new_chain(
        model: SamplingModel,
        temperature: float,
        seed: int | None,
        guard: RepetitionGuard | None,
        sampling: SamplingSettings,
    ) -> Any:
        params = llama_cpp.llama_sampler_chain_default_params()
        params.no_perf = True
        chain = llama_cpp.llama_sampler_chain_init(params)
        add = llama_cpp.llama_sampler_chain_add
        # Penalties first, as in llama.cpp's common sampler: they edit raw logits.
        if sampling.repeat_penalty != 1.0 and sampling.repeat_last_n != 0:
            add(
                chain,
                llama_cpp.llama_sampler_init_penalties(
                    llama_cpp.llama_vocab_n_tokens(model.vocab),
                    sampling.repeat_last_n,
                    sampling.repeat_penalty,
                    0.0,
                    0.0,
                ),
            )
        if guard is not None:
            add(chain, _dry(model, guard))
        if temperature <= 0:
            add(chain, llama_cpp.llama_sampler_init_greedy())
            return chain
        if sampling.top_k > 0:
            add(chain, llama_cpp.llama_sampler_init_top_k(sampling.top_k))
        add(chain, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
        add(chain, llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
        add(chain, llama_cpp.llama_sampler_init_temp(temperature))
        add(chain, llama_cpp.llama_sampler_init_dist(_seed(seed)))
        return chain

    def sample(self, index: int = -1) -> int:
        """The next token from the logits row *index* of the last decode (-1: its last).

        Without a grammar, llama.cpp samples and records the token (for the
        penalties and the guard) in one call.  With one, the chain runs on our
        own candidate array and only the token finally chosen is recorded
        (``accept``): a token the grammar turned down must not count as said
        for the repetition guard.  While the answer may still complete a
        banned opening (:mod:`.openings`), the tokens that would are ruled out
        in the logits row first.
        """
        ban = self._openings
        if ban is not None and (banned := ban.banned()) is not None:
            logits = llama_cpp.llama_get_logits_ith(self._ctx, index)
            np.ctypeslib.as_array(logits, shape=(self._n_vocab,))[banned] = -np.inf
        elif ban is not None:
            self._openings = ban = None  # no banned opening is possible any more
        token = self._sample(index)
        if ban is not None:
            ban.chose(self._model.piece(token))
        return token

    def _sample(self, index: int) -> int:
        if self._grammar is None:
            return int(llama_cpp.llama_sampler_sample(self._chain, self._ctx, index))
        token = self._pick(index, grammar=False)
        if self._grammar is not None:
            if not self._allowed(token):
                token = self._pick(index, grammar=True)
            llama_cpp.llama_sampler_accept(self._grammar, token)
        llama_cpp.llama_sampler_accept(self._chain, token)
        return token

    def remember(self, tokens: Sequence[int]) -> None:
        """Count *tokens* as already said, for the penalties and the repetition guard.

        A chat answer remembers the user's last message this way, as llama.cpp's
        server does with the whole prompt: the guard then also stops a run that
        copies the message back ("I locked myself out of the house again." →
        the same sentence), while names and facts from the rest of the prompt
        (the recall block) stay free to copy.
        """
        for token in tokens:
            llama_cpp.llama_sampler_accept(self._chain, token)

    def _allowed(self, token: int) -> bool:
        self._one[0] = llama_cpp.llama_token_data(token, 1.0, 0.0)
        self._one_array.size = 1
        self._one_array.selected = -1
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(self._one_array))
        return bool(np.isfinite(self._one[0].logit))

    def _pick(self, index: int, *, grammar: bool) -> int:
        """Run the chain on logits row *index* (after the grammar over the whole
        vocabulary, if asked); no accept."""
        logits = llama_cpp.llama_get_logits_ith(self._ctx, index)
        candidates = self._candidates
        candidates["id"] = self._ids  # the chain sorted the last round's candidates in place
        candidates["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        candidates["p"] = 0.0
        array = llama_cpp.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )
        if grammar:
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(array))
        llama_cpp.llama_sampler_apply(self._chain, ctypes.byref(array))
        if array.selected < 0:
            raise RuntimeError("the grammar left no token to sample")
        return int(array.data[array.selected].id)

    def close(self) -> None:
        for attr in ("_chain", "_grammar"):
            sampler = getattr(self, attr)
            if sampler is not None:
                llama_cpp.llama_sampler_free(sampler)
                setattr(self, attr, None)


def _dry(model: SamplingModel, guard: RepetitionGuard) -> Any:
    breakers = [b.encode("utf-8") for b in guard.breakers]
    array = (ctypes.c_char_p * len(breakers))(*breakers)
    sampler = llama_cpp.llama_sampler_init_dry(
        model.vocab,
        guard.multiplier,
        guard.base,
        guard.allowed_length,
        guard.last_n,
        array,
        len(breakers),
    )
    if not sampler:
        raise ValueError("llama.cpp could not make the DRY sampler")
    return sampler


def _seed(seed: int | None) -> int:
    return llama_cpp.LLAMA_DEFAULT_SEED if seed is None else seed & 0xFFFFFFFF
