"""What a chat template demands, found by rendering small probe conversations with it.

Used by ``doctor``: a required user turn, system first, alternation, ``{% generation %}`` tags,
the generation prompt, earlier reasoning. Each "rejects" answer carries the template's own
message, which is what a skip report would show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from speculators_qwen_compat.core.errors import reason_of

#: transformers' own test for generation tags (chat_template_utils.render_jinja_template).
GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")
HISTORY_MARK = "HISTORY_REASONING_PROBE"
LAST_MARK = "LAST_REASONING_PROBE"


def _turn(role: str, content: str, reasoning: str | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": role, "content": content}
    if reasoning:  # both keys, as normalize.py hands them to the template
        turn["reasoning_content"] = reasoning
        turn["thinking"] = reasoning
    return turn


PLAIN = [_turn("user", "Hello?"), _turn("assistant", "Hi.")]
ASSISTANT_ONLY = [_turn("assistant", "Hi.")]
SYSTEM_FIRST = [_turn("system", "Be brief."), *PLAIN]
LATE_SYSTEM = [
    *PLAIN,
    _turn("system", "Be formal."),
    _turn("user", "And now?"),
    _turn("assistant", "Yes."),
]
DOUBLE_USER = [_turn("user", "Hello?"), _turn("user", "Anyone?"), _turn("assistant", "Hi.")]
DOUBLE_ASSISTANT = [*PLAIN, _turn("assistant", "Still here.")]
REASONING = [
    _turn("user", "First?"),
    _turn("assistant", "One.", HISTORY_MARK),
    _turn("user", "Second?"),
    _turn("assistant", "Two.", LAST_MARK),
]


@dataclass
class TemplateProfile:
    """Each ``*_error`` is the template's message for the probe it rejects, or None."""

    assistant_only_error: str | None
    system_error: str | None
    late_system_error: str | None
    alternation_error: str | None
    generation_tags: bool
    generation_prompt: str
    history_reasoning: str  # "kept", "dropped", "not rendered" or "fails: <message>"

    @property
    def needs_user_turn(self) -> bool:
        return self.assistant_only_error is not None

    @property
    def system_must_be_first(self) -> bool:
        return self.system_error is None and self.late_system_error is not None

    @property
    def strict_alternation(self) -> bool:
        return self.alternation_error is not None

    @property
    def open_think(self) -> bool:
        """The generation prompt ends inside a think block (thinking on by default)."""
        return self.generation_prompt.rstrip().endswith("<think>")


class TemplateUnusable(ValueError):
    """The template cannot render even ``[user, assistant]``."""


def render(tokenizer: Any, conversation: list[dict[str, Any]], generation: bool = False) -> str:
    text = tokenizer.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=generation
    )
    return str(text)


def rejection(tokenizer: Any, conversation: list[dict[str, Any]]) -> str | None:
    """The template's message when it rejects ``conversation``, else None."""
    try:
        render(tokenizer, conversation)
    except Exception as exc:  # templates raise TemplateError, but also TypeError and others
        return reason_of(exc)
    return None


def profile_template(tokenizer: Any) -> TemplateProfile:
    """Probe the template of ``tokenizer`` (raises TemplateUnusable when nothing renders)."""
    plain_error = rejection(tokenizer, PLAIN)
    if plain_error is not None:
        raise TemplateUnusable(f"the chat template rejects even [user, assistant]: {plain_error}")
    return TemplateProfile(
        assistant_only_error=rejection(tokenizer, ASSISTANT_ONLY),
        system_error=rejection(tokenizer, SYSTEM_FIRST),
        late_system_error=rejection(tokenizer, LATE_SYSTEM),
        alternation_error=rejection(tokenizer, DOUBLE_USER)
        or rejection(tokenizer, DOUBLE_ASSISTANT),
        generation_tags=bool(GENERATION_TAG.search(template_source(tokenizer))),
        generation_prompt=generation_prompt(tokenizer),
        history_reasoning=history_reasoning(tokenizer),
    )


def template_source(tokenizer: Any) -> str:
    getter = getattr(tokenizer, "get_chat_template", None)
    if callable(getter):
        try:
            return str(getter())
        except Exception:  # no template: the probes above already failed
            return ""
    return str(getattr(tokenizer, "chat_template", "") or "")


def generation_prompt(tokenizer: Any) -> str:
    """What ``add_generation_prompt`` appends after a user turn."""
    user = PLAIN[:1]
    with_prompt = render(tokenizer, user, generation=True)
    without = render(tokenizer, user)
    return with_prompt[len(without) :] if with_prompt.startswith(without) else with_prompt


def history_reasoning(tokenizer: Any) -> str:
    """How reasoning of assistant turns before the last user query renders."""
    try:
        text = render(tokenizer, REASONING)
    except Exception as exc:
        return f"fails: {reason_of(exc)}"
    if HISTORY_MARK in text:
        return "kept"
    return "dropped" if LAST_MARK in text else "not rendered"
