"""Both orders (``order="both"``): a choice asked with its options (and its examples) as listed and reversed, a
yes/no with two or more examples with them reversed, the two answers combined, so neither order moves the answer.
``order="auto"`` (the default) does so for a choice asked with examples where the backend says a second reading
is cheap (``Backend.orders``: the embedded model).

A small model leans to an option by where it is listed and to the label the examples ended on: reversing a
4-topic news question's options changed 15 of its 60 answers on the embedded 1.5B, one option's probability by
up to 0.41. Asked both ways, the answer is the normalised geometric mean of the two distributions (a product of
the two readings, so an option both orders doubt stays doubted), the same whichever order the user listed.
The cost is a second call per such question, on a prompt prefix of its own (the server caches it like the first).
A yes/no's two words and a score's levels (in their order) keep their places; a zero-shot yes/no and every score
are asked once. A yes/no's examples pull too, but reading them both ways does not pay enough for ``auto``: on six
public yes/no sets with one example per option, reversing them moved 58 of 240 answers on the 1.5B, and both ways
answered 182 right against 167 as listed; with two per option 186 against 182, one set lower and the log loss
higher; the pooled ECE worse in both (``--sets sms_spam,clickbait,cr,rte,sst2,subj --shots 1|2``).

With one example per option, on the embedded 1.5B, the examples' order moves more than the options' do: reversing
both changed 61 of 236 answers on four public sets, and the two readings combined answered 166 right against 145
as listed (``python -m bench heldout_orders --shots 1``); zero-shot 159 against 155, within noise, and a pooled ECE
worse (0.110 against 0.072), so ``auto`` asks a zero-shot choice once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .answers import ChoiceAnswer, ConfidenceKind, NoulAnswer, SystemOneResponse, Usage, confidence
from .questions import Choice, Example, Noul, Prepared


def reversed_question(question: Any, examples: Sequence[Example] | None = None) -> Any | None:
    """The choice with its options, and its own examples (or ``examples``: every one it is asked with), in reverse
    order; a yes/no with two or more examples, its examples reversed. None for anything else (a score, a yes/no with
    fewer examples, or anything the planner will refuse: it is asked once and judged there)."""
    kind = "choice" if isinstance(question, Choice) else "noul" if isinstance(question, Noul) else (
        question.get("type") if isinstance(question, Mapping) else None)
    if kind not in ("choice", "noul"):
        return None
    own = question.get("examples") if isinstance(question, Mapping) else question.examples
    update: dict[str, Any] = {}
    if kind == "choice":
        criteria = question.get("criteria") if isinstance(question, Mapping) else question.criteria
        if not isinstance(criteria, Mapping) or len(criteria) < 2:
            return None
        update["criteria"] = dict(reversed(list(criteria.items())))
    if examples is not None:  # every one, the client's and the call's too: the reversed plan merges none
        update["examples"] = list(reversed(examples))
    elif isinstance(own, list) and len(own) > 1:
        update["examples"] = list(reversed(own))
    if kind == "noul" and len(update.get("examples", ())) < 2:
        return None
    return {**question, **update} if isinstance(question, Mapping) else question.model_copy(update=update)


def reversed_questions(questions: Mapping[str, Any], preps: Sequence[Prepared], auto: bool = False) -> dict[str, Any]:
    """The questions that are asked a second time, reversed (by their ids), each with every example its prepared
    question is asked with; ``auto`` (``order="auto"``): only the choices asked with examples."""
    out = {}
    for prep in preps:
        if auto and (not prep.examples or prep.kind != "choice"):
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
        elif isinstance(mine, NoulAnswer) and isinstance(other, NoulAnswer):
            yes = both_orders({"true": mine.noul, "false": 1 - mine.noul}, {"true": other.noul, "false": 1 - other.noul})
            answers[qid] = NoulAnswer(noul=yes["true"])
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


def answers_of(resp: SystemOneResponse, qid: str) -> str | bool | None:
    answer = resp.answers.get(qid)
    return answer.choice if isinstance(answer, ChoiceAnswer) else answer.value if isinstance(answer, NoulAnswer) else None


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
