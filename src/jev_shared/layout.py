"""layout="auto": per call, the prompt layout that makes the server read fewer new tokens.

``state_last`` (one system prompt per question, the state last) lets the server cache each
question's prefix, so a decision reads the state and a few closing tokens anew: N questions read
the state N times. ``split`` (shared rules, the state, then the question) reads the state once if
the questions reach the server slot that holds it, then each question's own block: cheaper as soon
as ``(N − 1) · state > Σ question blocks``, i.e. for a long state (a document, a long chat).

Tokens are counted by the server's own tokenizer where the client carries one (``Backend.tokenize``,
set by ``LocalServer.client()``), else estimated at four characters a token; the tokenizer is
asked only when the estimate is too close to call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .labels import style_for
from .prompt import closing, question_block, state_block
from .questions import Prepared

Tokenize = Callable[[str], Sequence[int]]
#: The estimate decides alone when one side is at least this many times the other.
CLEAR_MARGIN = 2.0
CHARS_PER_TOKEN = 4


def _estimate(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


def layout_costs(preps: Sequence[Prepared], state: Any, count: Callable[[str], int]) -> tuple[int, int]:
    """(tokens read anew under state_last, under split) for one call, beyond what both share."""
    s = count(state_block(state))
    q = 0
    for p in preps:
        fmt = style_for(p, "names").fmt
        q += count(question_block(p, fmt) + "\n\n" + closing(p, fmt))
    n = len(preps)
    return n * s, s + q


def choose_layout(preps: Sequence[Prepared], state: Any, tokenize: Tokenize | None = None) -> tuple[str, dict[str, Any]]:
    """("state_last" or "split", why): split when the questions would read the state more than their own blocks."""
    if len(preps) < 2 or any(p.examples for p in preps):  # examples lead the split prompt: nothing shared
        return "state_last", {"why": "one question" if len(preps) < 2 else "examples lead each question's prompt"}
    last, first = layout_costs(preps, state, _estimate)
    counted = "estimated"
    if tokenize is not None and max(last, first) < CLEAR_MARGIN * min(last, first):
        try:
            last, first = layout_costs(preps, state, lambda text: len(tokenize(text)))
            counted = "tokenizer"
        except Exception:  # noqa: BLE001 - a tokenizer that fails leaves the estimate standing
            pass
    layout = "split" if first < last else "state_last"
    return layout, {"layout": layout, "tokens_state_last": last, "tokens_split": first, "counted": counted}
