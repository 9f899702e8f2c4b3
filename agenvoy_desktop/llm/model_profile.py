"""What a chat model can be trusted with, read from its GGUF header.

A 0.5B model called tools at random (seven calls to answer "Hi, I'm Lena")
and ignored their results; a 7B model uses the same tools well.  The agent
shapes each turn by this profile (``agent/policy.py``): small models get
tools only when the message needs them.  Everything comes from the model
file's metadata, so a model the user adds is judged the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agenvoy_desktop.llm.gguf_info import GgufInfo, ModelFileError, read_gguf_info

SMALL_MODEL_PARAMETERS = 3_000_000_000
"""Below this many parameters a model gets the small-model turn (about 3B)."""


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """Size and abilities of a chat model."""

    parameters: int | None
    """Total weights (None: unknown, e.g. an unreadable header or a test double)."""
    template_tools: bool
    """The chat template renders a tool list (it mentions ``tools``)."""

    @property
    def small(self) -> bool:
        """Small models (and ones without a tool-aware template) get the shaped turn."""
        if not self.template_tools:
            return True
        return self.parameters is not None and self.parameters < SMALL_MODEL_PARAMETERS

    def describe(self) -> str:
        """``0.5B parameters, tools in template → small-model turn`` for the Models tab."""
        size = "unknown size" if self.parameters is None else f"{self.parameters / 1e9:.1f}B"
        tools = "tools in template" if self.template_tools else "no tools in template"
        turn = "small-model turn" if self.small else "full tool set"
        return f"{size}, {tools} → {turn}"


CAPABLE = ModelProfile(parameters=None, template_tools=True)
"""The profile of a model we know nothing about (test doubles): the full tool set."""


def profile_from_info(info: GgufInfo) -> ModelProfile:
    """The profile from header facts.

    A cached catalogue record keeps ``has_chat_template`` but not the
    template's text; such a template is taken to support tools (the size
    still decides the turn shape).
    """
    if info.chat_template is not None:
        tools = "tools" in info.chat_template
    else:
        tools = info.has_chat_template
    return ModelProfile(parameters=info.parameters, template_tools=tools)


def profile_for_path(path: Path) -> ModelProfile:
    """The profile of a GGUF file; an unreadable header gives the cautious small profile."""
    try:
        return profile_from_info(read_gguf_info(path))
    except ModelFileError:
        return ModelProfile(parameters=None, template_tools=False)
