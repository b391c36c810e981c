"""Questions: the System One question types, their validation, and label allocation.

The first pipeline stage. Everything here runs before any request is sent, so a bad question
costs nothing but an :class:`InvalidQuestionError` naming the question id and the field.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .errors import InvalidQuestionError
from .states import check_state, question_text_fault, text_fault

MAX_CHOICE_OPTIONS = 255
MAX_SCORE_LEVELS = 10
MIN_SCORE_LEVELS = 2
MAX_SINGLE_TOKEN_LABELS = 26
#: Methods that read one label token, so they cannot tell "AA" from "A".
TOKEN_METHODS = frozenset({"logprobs", "grammar"})


class Example(BaseModel):
    """A worked example: a state and the answer the model should give for it."""

    model_config = ConfigDict(frozen=True)

    state: Any
    answer: str | bool | int


class _Question(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str
    examples: list[Example] | None = None


class Choice(_Question):
    """Pick one option; ``criteria`` maps each option key to its description, in order.

    A description may be ``None`` (the key alone says it), as LangChain's ``Choice`` allows."""

    type: Literal["choice"] = "choice"
    criteria: dict[str, str]

    @field_validator("criteria", mode="before")
    @classmethod
    def _no_description(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: "" if v is None else v for k, v in value.items()}
        return value


class Score(_Question):
    """Place the state on ordered levels 0..n-1; ``criteria`` lists the levels' descriptions."""

    type: Literal["score"] = "score"
    criteria: list[str] | dict[str, str]


class Noul(_Question):
    """A yes/no statement; the answer is the probability that it is true."""

    type: Literal["noul"] = "noul"
    criteria: dict[str, str] | None = None


Question = Annotated[Choice | Score | Noul, Field(discriminator="type")]
_QUESTION_ADAPTER: TypeAdapter[Choice | Score | Noul] = TypeAdapter(Question)

DEFAULT_NOUL = {"true": "Yes, the statement is true.", "false": "No, the statement is false."}


def labels_for(n: int) -> list[str]:
    """Labels A..Z while n <= 26, then AA, AB, ... ZZ (only JSON methods can read those)."""
    if n <= MAX_SINGLE_TOKEN_LABELS:
        return list(string.ascii_uppercase[:n])
    return list(_PAIRS[:n])


#: AA … ZZ, written once (a call with more than 26 options wrote all 676 each time).
_PAIRS = tuple(a + b for a in string.ascii_uppercase for b in string.ascii_uppercase)


@dataclass(frozen=True)
class Prepared:
    """A validated question with its candidates and labels allocated, ready for the prompt."""

    id: str
    question: Choice | Score | Noul
    #: Candidate keys in order: option keys (choice), "0".."n-1" (score), "true"/"false" (noul).
    keys: tuple[str, ...]
    descriptions: tuple[str, ...]
    labels: tuple[str, ...]
    examples: tuple[Example, ...] = ()
    #: Answer words picked with the server's tokenizer (labels.token_checked_aliases); None: by name alone.
    aliases: tuple[str, ...] | None = None

    @property
    def kind(self) -> str:
        return self.question.type


def _coerce(qid: str, raw: Any) -> Choice | Score | Noul:
    if isinstance(raw, (Choice, Score, Noul)):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidQuestionError(
            f"expected a Choice, Score or Noul (or its dict), got {type(raw).__name__}", question_id=qid
        )
    try:
        return _QUESTION_ADAPTER.validate_python(dict(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"] if p not in ("choice", "score", "noul"))
        raise InvalidQuestionError(err["msg"], question_id=qid, field=loc or None) from None


#: Questions already prepared, by :func:`_prepared_key`: a question's text does not change between calls, and
#: validating it again was a fifth of the engine's CPU per decision; cleared when full.
_PREPARED: dict[tuple[Any, ...], Prepared] = {}
_PREPARED_SIZE = 1024


def _prepared_key(qid: Any, raw: Any, method: str, labels: str) -> tuple[Any, ...] | None:
    """An exact key of a question without examples: every field by exact type (``"1"`` and ``1``, a list and a
    tuple, a ``str`` subclass and its text never share one), or None (not kept) where it holds anything else."""
    if type(qid) is not str:  # refused, as it always was (and a list would not hash)
        return None
    if type(raw) is dict:
        fields = raw
    elif isinstance(raw, (Choice, Score, Noul)):
        fields = raw.__dict__
    else:
        return None
    key: list[Any] = [qid, method, labels, type(raw)]
    for name, value in fields.items():
        if type(name) is not str:
            return None
        if value is None or type(value) is str:
            key.append((name, value))
        elif type(value) is dict:
            items = tuple(value.items())
            if not all(type(k) is str and (v is None or type(v) is str) for k, v in items):
                return None
            key.append((name, "dict", items))
        elif type(value) is list and all(type(v) is str for v in value):
            key.append((name, "list", tuple(value)))
        else:
            return None
    return tuple(key)


def prepare_question(qid: str, raw: Any, method: str, shared_examples: tuple[Example, ...] = (),
                     labels: str = "names") -> Prepared:
    """Validate one question for ``method`` and allocate its labels (names read past 26 options; letters cannot).
    One without examples is prepared once (:data:`_PREPARED`), its question kept as a copy of its own."""
    key = None if shared_examples else _prepared_key(qid, raw, method, labels)
    if key is None:
        return _prepare_question(qid, raw, method, shared_examples, labels)
    prep = _PREPARED.get(key)
    if prep is None:
        prep = _prepare_question(qid, raw, method, shared_examples, labels)
        if prep.question is raw:  # the caller's own model, whose dicts it may change: the kept one is apart
            prep = replace(prep, question=raw.model_copy(deep=True))
        if len(_PREPARED) >= _PREPARED_SIZE:
            _PREPARED.clear()
        _PREPARED[key] = prep
    return prep


def _prepare_question(qid: str, raw: Any, method: str, shared_examples: tuple[Example, ...],
                      labels: str) -> Prepared:
    if not isinstance(qid, str) or not qid.strip():
        raise InvalidQuestionError("question ids must be non-empty strings", question_id=repr(qid))
    q = _coerce(qid, raw)
    id_fault = text_fault(qid)
    bad = question_text_fault(q) or (None if id_fault is None else ("id", id_fault))
    if bad:
        raise InvalidQuestionError(bad[1], question_id=qid.encode("utf-8", "replace").decode(), field=bad[0])
    if not q.instructions.strip():
        raise InvalidQuestionError("must not be empty", question_id=qid, field="instructions")
    if isinstance(q, Choice):
        keys = list(q.criteria)
        if not 1 <= len(keys) <= MAX_CHOICE_OPTIONS:
            raise InvalidQuestionError(
                f"a choice takes 1 to {MAX_CHOICE_OPTIONS} options, got {len(keys)}", question_id=qid, field="criteria"
            )
        blank = [k for k in keys if not k.strip()]
        if blank:
            raise InvalidQuestionError("option keys must be non-empty", question_id=qid, field="criteria")
        stripped = [k.strip() for k in keys]
        if len(set(stripped)) < len(stripped):  # then name them (list.count on every key was O(n²) each call)
            dupes = sorted({k for k in stripped if stripped.count(k) > 1})
            raise InvalidQuestionError(f"duplicate option keys {dupes}", question_id=qid, field="criteria")
        descriptions = [q.criteria[k] for k in keys]
    elif isinstance(q, Score):
        descriptions = list(q.criteria.values()) if isinstance(q.criteria, dict) else list(q.criteria)
        if not MIN_SCORE_LEVELS <= len(descriptions) <= MAX_SCORE_LEVELS:
            raise InvalidQuestionError(
                f"a score takes {MIN_SCORE_LEVELS} to {MAX_SCORE_LEVELS} levels, got {len(descriptions)}",
                question_id=qid,
                field="criteria",
            )
        keys = [str(i) for i in range(len(descriptions))]
    else:
        criteria = q.criteria if q.criteria is not None else DEFAULT_NOUL
        extra = sorted(set(criteria) - {"true", "false"})
        if extra:
            raise InvalidQuestionError(
                f"noul criteria take only 'true' and 'false', got {extra}", question_id=qid, field="criteria"
            )
        keys = ["true", "false"]
        descriptions = [criteria.get("true", DEFAULT_NOUL["true"]), criteria.get("false", DEFAULT_NOUL["false"])]
    if method in TOKEN_METHODS and len(keys) > MAX_SINGLE_TOKEN_LABELS and (labels != "names" or method == "grammar"):
        raise InvalidQuestionError(
            f"method {method!r} with letter labels reads one letter, so it takes at most {MAX_SINGLE_TOKEN_LABELS} "
            f"options (got {len(keys)}); use labels='names', or method='structured' or method='discrete' for up "
            f"to {MAX_CHOICE_OPTIONS}",
            question_id=qid,
            field="criteria",
        )
    examples = tuple(shared_examples) + tuple(q.examples or ())
    for i, ex in enumerate(examples):
        check_state(ex.state, question_id=qid, field=f"examples[{i}].state")
        if _example_key(ex.answer, keys) is None:
            raise InvalidQuestionError(
                f"answer {ex.answer!r} is not one of the options {keys}", question_id=qid, field=f"examples[{i}].answer"
            )
    return Prepared(qid, q, tuple(keys), tuple(descriptions), tuple(labels_for(len(keys))), examples)


def _example_key(answer: str | bool | int, keys: list[str]) -> str | None:
    """Map an example's answer onto a candidate key (bool for noul, level index for score)."""
    if isinstance(answer, bool):
        text = "true" if answer else "false"
    else:
        text = str(answer)
    return text if text in keys else None


def example_key(prep: Prepared, answer: str | bool | int) -> str:
    key = _example_key(answer, list(prep.keys))
    assert key is not None  # checked in prepare_question
    return key


def prepare_questions(state: Any, questions: Mapping[str, Any], method: str, client_examples: Any = None,
                      call_examples: Any = None, labels: str = "names") -> list[Prepared]:
    """The one entry point: the state and every question (in order) checked before anything is sent."""
    check_state(state)
    if isinstance(questions, Mapping):
        for qid, q in questions.items():
            if not isinstance(qid, str):  # str() would merge {1: q, "1": q} into one answer
                raise InvalidQuestionError(f"question ids must be strings, got {type(qid).__name__} {qid!r}",
                                           field="questions")
            if not isinstance(q, (Choice, Score, Noul, Mapping)):
                raise InvalidQuestionError(f"expected a question, got {type(q).__name__}", question_id=qid)
    if not isinstance(questions, Mapping) or not questions:
        raise InvalidQuestionError("questions must be a non-empty mapping of id -> question", field="questions")
    _check_example_ids(call_examples, questions)  # a client's own may name questions other calls ask
    return [prepare_question(qid, q, method, merge_examples(qid, client_examples, call_examples), labels)
            for qid, q in questions.items()]


def _check_example_ids(source: Any, questions: Mapping[str, Any]) -> None:
    """A call's examples by question id name its questions: a typo is refused, never ignored."""
    if not isinstance(source, Mapping):
        return
    unknown = [k for k in source if k not in questions]
    if unknown:
        raise InvalidQuestionError(f"examples for {unknown[0]!r}, which is not a question of this call "
                                   f"(the questions: {sorted(questions)})", question_id=str(unknown[0]),
                                   field=f"examples.{unknown[0]}")


def merge_examples(qid: str, *sources: Any) -> tuple[Example, ...]:
    """Client-level then call-level examples: each a list for every question, or a mapping by id.

    A string is not a list of examples (iterating it would make one example per character)."""
    merged: list[Example] = []
    for source in sources:
        if source is None:
            continue
        items = source.get(qid, []) if isinstance(source, Mapping) else source
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidQuestionError(f"examples must be a list of Example (or a mapping of question id -> list), "
                                       f"got {type(items).__name__}", question_id=qid, field="examples")
        merged += [_example(e, qid, i) for i, e in enumerate(items, start=len(merged))]
    return tuple(merged)


def _example(value: Any, qid: str, index: int) -> Example:
    if isinstance(value, Example):
        return value
    try:
        return Example.model_validate(value)
    except ValidationError as exc:
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        msg = errors[0]["msg"] if errors else "invalid"
        raise InvalidQuestionError(f"not an example ({where + ': ' if where else ''}{msg})",
                                   question_id=qid, field=f"examples[{index}]") from None
