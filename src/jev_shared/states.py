"""States and question texts: what can go over the wire (no NaN, no lone surrogate, not nested too deep).

Split from :mod:`.questions` (the first pipeline stage), which checks every question's texts with
:func:`question_text_fault` and the state with :func:`check_state` before any request is sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .errors import InvalidQuestionError

#: States nest no deeper than this: deeper ones are not data a model reads, and would exhaust the stack.
MAX_STATE_DEPTH = 100


def text_fault(text: str) -> str | None:
    """Why a string cannot go over the wire (a lone surrogate is not UTF-8), or None."""
    if text.isascii():  # a flag the string carries: no scan, no copy
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds {text[exc.start:exc.end]!r}, which is not valid Unicode text (a lone surrogate)"
    return None


def state_fault(value: Any, path: str) -> str | None:
    """The first thing in a JSON-like value that cannot be sent (NaN, too deep, bad text), or None.

    Iterative, so a value nested thousands deep is refused rather than overflowing the stack. A path is
    written out only for a fault (``_where``): each item carries its parent's and its own key."""
    stack: list[tuple[Any, Any, Any, int]] = [(value, None, path, 0)]
    while stack:
        item, parent, key, depth = stack.pop()
        if type(item) is str and depth <= MAX_STATE_DEPTH:  # the common leaf first
            bad = text_fault(item)
            if bad:
                return f"{bad} at {_where(parent, key)}"
            continue
        if depth > MAX_STATE_DEPTH:
            return f"nests deeper than {MAX_STATE_DEPTH} levels (at {_where(parent, key)[:80]}…)"
        if isinstance(item, float) and not math.isfinite(item):
            return f"holds a NaN or Infinity at {_where(parent, key)}; JSON cannot carry it"
        if isinstance(item, str):
            bad = text_fault(item)
            if bad:
                return f"{bad} at {_where(parent, key)}"
        elif isinstance(item, Mapping):
            here = (parent, key)
            for k, v in item.items():
                bad = text_fault(k) if isinstance(k, str) else None
                if bad:
                    return f"{bad} in a key at {_where(parent, key)}"
                stack.append((v, here, f".{k}", depth + 1))
        elif isinstance(item, (list, tuple)):
            here = (parent, key)
            stack.extend((v, here, f"[{i}]", depth + 1) for i, v in enumerate(item))
    return None


def _where(parent: Any, key: str) -> str:
    """The path ``state_fault`` names: the root's name, then each ``.key`` and ``[i]`` down to the item."""
    parts = [key]
    while parent is not None:
        parent, key = parent
        parts.append(key)
    return "".join(reversed(parts))


def question_text_fault(q: BaseModel) -> tuple[str, str] | None:
    """(field, why) for the first text in a question that cannot be sent, or None."""
    for name in ("instructions", "criteria"):
        bad = state_fault(getattr(q, name, None), name)
        if bad:
            return name, bad
    return None


def is_chat(state: Any) -> bool:
    """Chat turns: a non-empty list of mappings that each carry a role and a content."""
    return (
        isinstance(state, list)
        and bool(state)
        and all(isinstance(t, Mapping) and "role" in t and "content" in t for t in state)
    )


def check_state(state: Any, *, question_id: str | None = None, field: str = "state") -> None:
    """A state is text, a JSON-able mapping or list, or chat turns; never empty or non-finite."""
    if isinstance(state, str):
        if not state.strip():
            raise InvalidQuestionError("must not be empty", question_id=question_id, field=field)
        bad = text_fault(state)
        if bad:
            raise InvalidQuestionError(bad, question_id=question_id, field=field)
        return
    if isinstance(state, (Mapping, list, tuple)):
        if not state:
            raise InvalidQuestionError("must not be empty", question_id=question_id, field=field)
        bad = state_fault(state, field)
        if bad:
            raise InvalidQuestionError(bad, question_id=question_id, field=field)
        try:
            json.dumps(state, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidQuestionError(f"is not JSON-serialisable ({exc})", question_id=question_id, field=field) from None
        return
    if isinstance(state, BaseModel):
        check_state(state.model_dump(mode="json"), question_id=question_id, field=field)
        return
    raise InvalidQuestionError(
        f"must be text, a JSON object or list, or chat turns; got {type(state).__name__}",
        question_id=question_id,
        field=field,
    )
