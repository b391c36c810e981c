"""Chat Completions requests built as the flows build them: their intent and prompt set (``asking.call``).

The kept prompts (``local/slots.py``) read what a request is for from its intent and its prompt's key, never
from its messages; a request made by hand in a test carries them as the engine's own would.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from jev_shared.asking import _twin, intent_of
from jev_shared.calls import Call, Intent, Prompt
from jev_shared.prompt import state_block
from jev_shared.surfaces.chat import CHAT, chat_call

RULES = "rules and a question"


def zero_shot(state: Any, system: str = RULES, model: str = "m") -> Call:
    """A zero-shot question's request about ``state`` (its answer, or a content-free prior's)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": state_block(state)}]
    return _with(chat_call(model, messages, {}, {}), intent_of(state), Prompt(model, messages, system))


def repair(state: Any, reply: str, why: str, system: str = RULES, model: str = "m") -> Call:
    """A zero-shot question's repair turn: its prompt, the reply that could not be read, and why."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": state_block(state)},
                {"role": "assistant", "content": reply}, {"role": "user", "content": why}]
    return _with(chat_call(model, messages, {}, {}), Intent.REPAIR, Prompt(model, messages, system))


def with_turns(messages: list[dict[str, Any]], intent: Intent = Intent.ANSWER, model: str = "m") -> Call:
    """A request whose prompt has examples (or another layout): no stem, never kept."""
    return _with(chat_call(model, messages, {}, {}), intent, Prompt(model, messages))


def _with(call: Call, intent: Intent, prompt: Prompt) -> Call:
    call.intent, call.prompt = intent, prompt
    if prompt.stem is not None:
        call.twin = partial(_twin, CHAT, prompt.model, prompt.messages[:1], {}, {}, None, set(), prompt)
    return call
