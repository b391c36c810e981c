"""Both orders (``order="both"``): a choice asked with its options (and its examples) as listed and reversed,
its two answers combined, so neither order moves the answer. ``order="auto"`` (the default) does so for a choice
asked with examples where the backend says a second reading is cheap (``Backend.orders``: the embedded model).

A small model leans to an option by where it is listed and to the label the examples ended on: reversing a
4-topic news question's options changed 15 of its 60 answers on the embedded 1.5B, one option's probability by
up to 0.41. Asked both ways, the answer is the normalised geometric mean of the two distributions (a product of
the two readings, so an option both orders doubt stays doubted), the same whichever order the user listed.
The cost is a second call per choice, on a prompt prefix of its own (the server caches it like the first).
Nouls (two fixed words) and scores (levels in their order) are asked once.

With one example per option, on the embedded 1.5B, the examples' order moves more than the options' do: reversing
both changed 61 of 236 answers on four public sets, and the two readings combined answered 166 right against 145
as listed (``python -m bench heldout_orders --shots 1``); zero-shot 159 against 155, within noise, and a pooled ECE
worse (0.110 against 0.072), so ``auto`` asks a zero-shot choice once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .answers import ChoiceAnswer, ConfidenceKind, SystemOneResponse, Usage, confidence
from .questions import Choice, Example, Prepared


def reversed_question(question: Any, examples: Sequence[Example] | None = None) -> Any | None:
    """The choice with its options, and its own examples (or ``examples``: every one it is asked with), in reverse
    order; None where it is no choice of two or more options (a noul, a score, or anything the planner will refuse:
    it is asked once and judged there)."""
    criteria: Any
    own: Any
    if isinstance(question, Choice):
        criteria, own = question.criteria, question.examples
    elif isinstance(question, Mapping) and question.get("type") == "choice":
        criteria, own = question.get("criteria"), question.get("examples")
    else:
        return None
    if not isinstance(criteria, Mapping) or len(criteria) < 2:
        return None
    update: dict[str, Any] = {"criteria": dict(reversed(list(criteria.items())))}
    if examples is not None:  # every one, the client's and the call's too: the reversed plan merges none
        update["examples"] = list(reversed(examples))
    elif isinstance(own, list) and len(own) > 1:
        update["examples"] = list(reversed(own))
    return question.model_copy(update=update) if isinstance(question, Choice) else {**question, **update}


def reversed_questions(questions: Mapping[str, Any], preps: Sequence[Prepared],
                       with_examples_only: bool = False) -> dict[str, Any]:
    """The questions that are asked a second time, reversed (by their ids), each with every example its prepared
    question is asked with; ``with_examples_only``: only those asked with examples (``order="auto"``)."""
    out = {}
    for prep in preps:
        if with_examples_only and not prep.examples:
            continue
        flipped = reversed_question(questions[prep.id], prep.examples)
        if flipped is not None:
            out[prep.id] = flipped
    return out


def combined(listed: SystemOneResponse, flipped: SystemOneResponse, kind: ConfidenceKind) -> SystemOneResponse:
    """``listed`` with each choice ``flipped`` also answered replaced by the two readings combined; usage added."""
    answers = dict(listed.answers)
    for qid, other in flipped.answers.items():
        mine = answers.get(qid)
        if isinstance(mine, ChoiceAnswer) and isinstance(other, ChoiceAnswer):
            answers[qid] = _both(mine, other, kind)
    usage = Usage(**listed.usage.model_dump())
    usage.merge(flipped.usage)
    debug = dict(listed.debug or {})
    priors = (flipped.debug or {}).get("prior_calls") or {}
    if priors:  # the reversed prompts' priors are calls of this one too
        mine_priors = dict(debug.get("prior_calls") or {})
        debug["prior_calls"] = {q: mine_priors.get(q, 0) + priors.get(q, 0) for q in {**mine_priors, **priors}}
    debug["orders"] = {qid: {"listed": answers_of(listed, qid), "reversed": answers_of(flipped, qid)}
                       for qid in flipped.answers}
    if flipped.debug and flipped.debug.get("questions"):  # what the reversed readings sent and read, as the listed's
        debug["reversed"] = {"questions": flipped.debug["questions"]}
    return listed.model_copy(update={"answers": answers, "usage": usage, "debug": debug})


def answers_of(resp: SystemOneResponse, qid: str) -> str | None:
    answer = resp.answers.get(qid)
    return answer.choice if isinstance(answer, ChoiceAnswer) else None


def both_orders(listed: Mapping[str, float], flipped: Mapping[str, float]) -> dict[str, float]:
    """The normalised geometric mean of two readings of one choice's probabilities, in the listed key order."""
    weights = {k: math.sqrt(max(p, 0.0) * max(flipped.get(k, 0.0), 0.0)) for k, p in listed.items()}
    total = sum(weights.values())
    if total > 0:
        return {k: w / total for k, w in weights.items()}
    return {k: (p + flipped.get(k, 0.0)) / 2 for k, p in listed.items()}


def _both(a: ChoiceAnswer, b: ChoiceAnswer, kind: ConfidenceKind) -> ChoiceAnswer:
    """The two readings of one choice combined (:func:`both_orders`), in ``a``'s (the listed) key order."""
    keys, probs = zip(*both_orders(a.probabilities, b.probabilities).items())
    best = max(range(len(keys)), key=lambda i: (probs[i], -i))  # ties to the first listed, as answers do
    return ChoiceAnswer(choice=keys[best], probabilities=dict(zip(keys, probs)),
                        confidence=confidence(list(probs), kind))


__all__ = ["reversed_question", "reversed_questions", "combined", "both_orders"]
