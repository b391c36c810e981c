"""The selection rules, as pure functions of the probabilities: which candidates, and why in words.

Kept apart from the selectors so each rule (the single pick with its confidence fallback, the
multi pick over a threshold) reads in one place and can be tested without a client.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pick", "single_pick", "multi_pick"]


@dataclass(frozen=True)
class Pick:
    """The picked candidate indexes with a reason each; ``note`` when it is not the plain pick.

    ``refusal`` is the :class:`~jev_llamaindex.LowConfidenceError` message when the pick must not stand.
    """

    picked: list[int]
    reasons: list[str]
    note: str | None = None
    refusal: str | None = None


def single_pick(keys: list[str], probs: dict[str, float], choice: str, confidence: float, *,
                min_confidence: float, default_index: int | None) -> Pick:
    """The most probable candidate; below ``min_confidence`` ``default_index``, or a refusal without one."""
    best = keys.index(choice)
    reason = _single_reason(keys, probs, best, confidence)
    if not confidence < min_confidence:  # (a NaN confidence is not "below")
        return Pick([best], [reason])
    if default_index is None:
        refusal = (f"confidence {confidence:.2f} is below min_confidence {min_confidence:.2f} (top choice "
                   f"{choice!r} at probability {probs[choice]:.2f}); pass default_index= to fall back "
                   "instead of raising")
        return Pick([best], [reason], note="below min_confidence", refusal=refusal)
    fallback = keys[default_index]
    note = f"confidence {confidence:.2f} < min_confidence {min_confidence:.2f}: fell back to default_index"
    reason = (f"Fell back to default_index {default_index} ({fallback!r}, probability {probs[fallback]:.2f}): the top "
              f"choice {choice!r} had probability {probs[choice]:.2f}, but confidence "
              f"{confidence:.2f} is below min_confidence {min_confidence:.2f}")
    return Pick([default_index], [reason], note=note)


def _single_reason(keys: list[str], probs: dict[str, float], best: int, confidence: float) -> str:
    key = keys[best]
    text = f"Chose {key!r} with probability {probs[key]:.2f} and confidence {confidence:.2f} over {len(keys)} choices"
    others = sorted((k for k in keys if k != key), key=lambda k: -probs[k])
    return text + (f"; next was {others[0]!r} at {probs[others[0]]:.2f}" if others else "")


def multi_pick(keys: list[str], probs: dict[str, float], *, threshold: float, max_outputs: int | None,
               allow_empty: bool, what: str) -> Pick:
    """Every candidate at or above ``threshold``, most probable first, capped; the top one if none and not empty.

    ``what`` names the probability in the reasons ("probability", "probability of being relevant").
    """
    ranked = sorted(range(len(keys)), key=lambda i: (-probs[keys[i]], i))
    picked = [i for i in ranked if probs[keys[i]] >= threshold][:max_outputs]
    if picked or allow_empty:
        return Pick(picked, [f"{keys[i]!r}: {what} {probs[keys[i]]:.2f} >= threshold {threshold:.2f}" for i in picked])
    top = ranked[0]
    return Pick([top], [f"{keys[top]!r}: {what} {probs[keys[top]]:.2f} is the highest, though below threshold "
                        f"{threshold:.2f}"],
                note=f"no candidate reached threshold {threshold:.2f}: kept the most probable one")
