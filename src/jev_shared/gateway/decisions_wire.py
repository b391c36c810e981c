"""``POST /v1/decisions``: OpenAI's Decisions wire (``client.decisions.create`` in openai 3.x) beside
``/v1/systemone``, answered by the same engine client, memory and limits.

A request ``{model, input, questions: [...]}`` becomes the System One request the engine answers
(:meth:`Gateway.respond`): predicate -> noul, choice -> choice (each value a key, its description
the option's), score -> score (each level ``label`` or ``label: description``). A question's id is
its index ("0", "1", ...), or its ``name`` where a ``--calibration`` file fits that name (:func:`engine_ids`);
an id never reaches the prompt, so the same question asked on either wire
is the same prompt and the same distribution. Answers come back in question order, each with the
question's ``name``; a question the model refuses is answered ``{"type": "refusal", name}`` while the
others keep their answers (then each question is asked on its own, to learn which one refused).

Errors: the gateway's ``{"error": {type, message, question_id?, field?}}`` (the same statuses and types
as ``/v1/systemone``), plus OpenAI's ``param`` (``questions[0].choices``) and ``code`` (= ``type``),
which the openai SDK reads into ``APIStatusError.param`` / ``.code``. ``field`` names the Decisions
request's own fields (``questions.0.choices``, ``input``), and ``question_id`` is the index.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from jev_shared import ChoiceAnswer, ModelRefusalError, NoulAnswer, ScoreAnswer, SystemOneResponse

from .body import LongNumbersRoute
from .deps import caller, gateway
from .errors import ApiError, api_error, from_exception
from .examples import DECISIONS_DESCRIPTION, DECISIONS_EXAMPLES, request_examples
from .routes import _ERRORS, json_response
from .schema import SystemOneRequest
from .service import Gateway
from .sets import Calibration

PATH = "/v1/decisions"
#: Text parts the gateway reads (images are refused by name: the engine reads text).
Parts = str | list[dict[str, Any]]
_ROLES = ("user", "developer", "system", "assistant")


class _Question(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instructions: Parts = Field(description="text, or input_text / input_json parts")
    name: str | None = Field(None, description="echoed on the answer; LangChain keys its answers by it")


class PredicateQuestion(_Question):
    """How likely a statement about the input is true (the engine's noul)."""

    type: Literal["predicate"]


class ChoiceOption(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: StrictStr | StrictBool = Field(description="typed: a string or a boolean")
    description: str | None = None


class ChoiceQuestion(_Question):
    """One of 2-255 typed values."""

    type: Literal["choice"]
    choices: list[ChoiceOption] = Field(min_length=2, max_length=255)


class ScoreLevel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    description: str | None = None


class ScoreQuestion(_Question):
    """Ordered levels 0..n-1 (2-10 levels)."""

    type: Literal["score"]
    levels: list[ScoreLevel] = Field(min_length=2, max_length=10)


DecisionQuestion = Annotated[PredicateQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]


class DecisionsRequest(BaseModel):
    """OpenAI's ``decisions.create`` body; the prompt-cache and safety fields are accepted and ignored."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    input: Parts = Field(description="text, or messages {role, content} (text and input_json parts)")
    questions: list[DecisionQuestion] = Field(min_length=1, description="answered in this order")
    prompt_cache_key: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: str | None = None


_SET = ("the options in the answer's decision set, most probable first: only where `jev serve --calibration` has "
        "decision sets for this question (docs/decisions.md)")
_ABSTAINS = "the set is not one option (several, or none): do not decide alone; only beside decision_set"


class PredicateAnswer(BaseModel):
    type: Literal["predicate"]
    name: str | None
    probability: float
    decision_set: list[bool] | None = Field(None, description=_SET)
    abstains: bool | None = Field(None, description=_ABSTAINS)


class ValueProbability(BaseModel):
    value: StrictStr | StrictBool
    probability: float


class ChoiceAnswerOut(BaseModel):
    type: Literal["choice"]
    name: str | None
    choice: StrictStr | StrictBool
    confidence: float
    probabilities: list[ValueProbability]
    decision_set: list[StrictStr | StrictBool] | None = Field(None, description=_SET)
    abstains: bool | None = Field(None, description=_ABSTAINS)


class LevelProbability(BaseModel):
    label: str
    probability: float
    value: int


class ScoreAnswerOut(BaseModel):
    type: Literal["score"]
    name: str | None
    score: float
    confidence: float
    probabilities: list[LevelProbability]
    decision_set: list[int] | None = Field(None, description=_SET + " (level values)")
    abstains: bool | None = Field(None, description=_ABSTAINS)


class RefusalAnswer(BaseModel):
    type: Literal["refusal"]
    name: str | None


class DecisionUsage(BaseModel):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class DecisionReply(BaseModel):
    """Answers in question order (a refusal where the model declined one), the model, usage."""

    answers: list[Annotated[PredicateAnswer | ChoiceAnswerOut | ScoreAnswerOut | RefusalAnswer,
                            Field(discriminator="type")]]
    model: str
    usage: DecisionUsage


class DecisionsErrorDetail(BaseModel):
    type: str
    message: str
    param: str | None = Field(None, description="OpenAI's name for the field: questions[0].choices")
    code: str | None = Field(None, description="the same stable name as type")
    question_id: str | None = Field(None, description="the question's index")
    field: str | None = Field(None, description="the dotted path from the body's root (questions.0.choices)")


class DecisionsErrorBody(BaseModel):
    """Every error of ``/v1/decisions``: the gateway's body, with OpenAI's ``param`` and ``code``."""

    error: DecisionsErrorDetail


@dataclass(frozen=True)
class _Asked:
    """What maps one engine answer back: the question's name, kind, and typed values or level labels."""

    name: str | None
    kind: str
    values: tuple[str | bool, ...] = ()


def _text(parts: Parts, where: str) -> str:
    """Text from a string or text / JSON parts; anything else is a 422 naming the part."""
    if isinstance(parts, str):
        return parts
    out = []
    for j, part in enumerate(parts):
        kind = part.get("type")
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif kind == "input_json" and "data" in part:
            out.append(json.dumps(part["data"], ensure_ascii=False))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            out.append(part["refusal"])
        else:
            raise api_error("invalid_request", f"a {kind!r} part is not read by this gateway (text and "
                                               "input_json parts only)", field=f"{where}.{j}.type")
    return "\n".join(out)


def _state(raw: Parts) -> Any:
    """The engine's state: the text, or chat turns ``{role, content}``."""
    if isinstance(raw, str):
        return raw
    turns = []
    for i, item in enumerate(raw):
        if item.get("type", "message") != "message" or item.get("role") not in _ROLES:
            raise api_error("invalid_request", f"input items are messages with a role in {list(_ROLES)}; "
                                               "tool calls and their outputs are not read by this gateway",
                            field=f"input.{i}.type" if "type" in item else f"input.{i}.role")
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise api_error("invalid_request", "a message's content is text or a list of parts",
                            field=f"input.{i}.content")
        turns.append({"role": item["role"], "content": _text(content, f"input.{i}.content")})
    return turns


def _engine_question(i: int, q: PredicateQuestion | ChoiceQuestion | ScoreQuestion) -> tuple[dict[str, Any], _Asked]:
    instructions = _text(q.instructions, f"questions.{i}.instructions")
    if isinstance(q, PredicateQuestion):
        return {"type": "noul", "instructions": instructions}, _Asked(q.name, "noul")
    if isinstance(q, ChoiceQuestion):
        keys = [_key(c.value) for c in q.choices]
        if len(set(keys)) < len(keys):
            raise api_error("invalid_question", f"choice values must be unique (as text: {keys})",
                            question_id=str(i), field=f"questions.{i}.choices")
        criteria = {k: c.description or "" for k, c in zip(keys, q.choices)}
        return ({"type": "choice", "instructions": instructions, "criteria": criteria},
                _Asked(q.name, "choice", tuple(c.value for c in q.choices)))
    levels = [f"{lv.label}: {lv.description}" if lv.description else lv.label for lv in q.levels]
    return ({"type": "score", "instructions": instructions, "criteria": levels},
            _Asked(q.name, "score", tuple(lv.label for lv in q.levels)))


def _key(value: str | bool) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else value


def engine_ids(req: DecisionsRequest, cal: Calibration | None = None) -> list[str]:
    """Each question's id toward the engine: its index, or its ``name`` where ``--calibration``'s calibrator has a
    fit of that name (a temperature, offsets, a top-label scaling or a map), the name is the request's only one of
    it and no other question's index: the engine calibrates an answer by its question id, so the same question
    with the same file answers the same on both wires (sets are looked up by name already: :func:`_with_set`)."""
    ids = [str(i) for i in range(len(req.questions))]
    fitted = cal.calibrator.fitted_keys() if cal is not None and cal.calibrator is not None else frozenset()
    names = [q.name for q in req.questions]
    for i, name in enumerate(names):
        if name is not None and name in fitted and names.count(name) == 1 and name not in ids:
            ids[i] = name
    return ids


def to_systemone(req: DecisionsRequest, ids: list[str] | None = None) -> tuple[SystemOneRequest, list[_Asked]]:
    """The System One request the engine answers (question ids: ``ids``, else the indexes), and how to map its
    answers back."""
    mapped = [_engine_question(i, q) for i, q in enumerate(req.questions)]
    ids = ids or [str(i) for i in range(len(mapped))]
    questions = {ids[i]: q for i, (q, _) in enumerate(mapped)}
    sysone = SystemOneRequest.model_validate({"model": req.model, "state": _state(req.input), "questions": questions})
    return sysone, [a for _, a in mapped]


def _answer(asked: _Asked, ans: Any) -> dict[str, Any]:
    if isinstance(ans, NoulAnswer):
        return {"type": "predicate", "name": asked.name, "probability": ans.noul}
    if isinstance(ans, ChoiceAnswer):
        by_key = {_key(v): v for v in asked.values}
        return {"type": "choice", "name": asked.name, "choice": by_key[ans.choice], "confidence": ans.confidence,
                "probabilities": [{"value": v, "probability": ans.probabilities[_key(v)]} for v in asked.values]}
    assert isinstance(ans, ScoreAnswer)
    return {"type": "score", "name": asked.name, "score": ans.score, "confidence": ans.confidence,
            "probabilities": [{"label": label, "probability": ans.probabilities[str(n)], "value": n}
                              for n, label in enumerate(asked.values)]}


def _with_set(out: dict[str, Any], asked: _Asked, ans: Any, index: int, cal: Calibration | None) -> dict[str, Any]:
    """The answer with its ``decision_set`` (typed: choice values, booleans, level values) and ``abstains``,
    where ``--calibration`` has sets for the question (by ``name``, then index, then ``"*"``)."""
    wired = cal.wire(ans, asked.name, str(index)) if cal is not None and ans is not None else None
    if wired is None:
        return out
    by_key: dict[str, Any] = {_key(v): v for v in asked.values} if asked.kind == "choice" else (
        {"true": True, "false": False} if asked.kind == "noul" else {str(n): n for n in range(len(asked.values))})
    return {**out, "decision_set": [by_key[k] for k in wired["decision_set"]], "abstains": wired["abstains"]}


def reply(model: str, asked: list[_Asked], answers: list[Any], responses: list[SystemOneResponse],
          cal: Calibration | None = None) -> dict[str, Any]:
    """The Decisions body: each answer (None: refused) mapped back, and the usage of every engine call."""
    tokens_in = sum(r.usage.input_tokens or 0 for r in responses)
    tokens_out = sum(r.usage.output_tokens or 0 for r in responses)
    usage = {"input_tokens": tokens_in, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
             "output_tokens": tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": tokens_in + tokens_out}
    out = [{"type": "refusal", "name": a.name} if ans is None else _with_set(_answer(a, ans), a, ans, i, cal)
           for i, (a, ans) in enumerate(zip(asked, answers))]
    return {"answers": out, "model": model, "usage": usage}


async def decide(gw: Gateway, req: DecisionsRequest, key: str | None, noted: dict[str, Any],
                 ids: list[str] | None = None) -> dict[str, Any]:
    """Every question in one engine call; when the model refuses one, each is asked alone to find which."""
    cal = gw.config.calibration
    sysone, asked = to_systemone(req, ids or engine_ids(req, cal))
    names = [a.name or qid for a, qid in zip(asked, sysone.questions)]  # --keep-states keeps each by its name
    try:
        resp = await gw.respond(sysone, key, noted, names)
        return reply(req.model, asked, list(resp.answers.values()), [resp], cal)
    except ModelRefusalError:
        if len(asked) == 1:
            return reply(req.model, asked, [None], [], cal)
    answers: list[Any] = []
    responses: list[SystemOneResponse] = []
    for name, (qid, question) in zip(names, sysone.questions.items()):
        alone = sysone.model_copy(update={"questions": {qid: question}})
        try:
            responses.append(await gw.respond(alone, key, noted, [name]))
            answers.append(responses[-1].answers[qid])
        except ModelRefusalError:
            answers.append(None)
    noted["n_questions"] = len(asked)
    return reply(req.model, asked, answers, responses, cal)


#: Union tags pydantic puts in an error's location (``questions.0.choice.choices``): not fields.
_TAGS = re.compile(r"^(predicate|choice|score|str|list\[.*|dict\[.*)$")


def _decisions_field(field: str | None, kinds: dict[str, str]) -> str | None:
    """A dotted path in the Decisions request's own names: ``criteria`` -> choices / levels, state -> input."""
    if field is None:
        return None
    parts = [p for p in field.split(".") if not _TAGS.match(p)]
    if parts[:1] == ["state"]:
        parts[0] = "input"
    if len(parts) >= 3 and parts[0] == "questions" and parts[2] == "criteria":
        parts[2] = {"choice": "choices", "score": "levels"}.get(kinds.get(parts[1], ""), "instructions")
    return ".".join(parts)


def error_body(err: ApiError, kinds: dict[str, str] | None = None, ids: list[str] | None = None) -> dict[str, Any]:
    """The gateway's error body in the Decisions request's names (a question by its index, whatever its engine
    id: :func:`engine_ids`), with OpenAI's ``param`` and ``code``."""
    body = err.body()
    detail = body["error"]
    index = {qid: str(i) for i, qid in enumerate(ids or [])}
    if detail.get("question_id") in index:
        detail["question_id"] = index[detail["question_id"]]
    parts = str(detail.get("field") or "").split(".")
    if len(parts) > 1 and parts[0] == "questions" and parts[1] in index:
        detail["field"] = ".".join([parts[0], index[parts[1]], *parts[2:]])
    field = _decisions_field(detail.get("field"), kinds or {})
    if field is not None:
        detail["field"] = field
    detail["param"] = re.sub(r"\.(\d+)", r"[\1]", field) if field else None
    detail["code"] = detail["type"]
    return body


wire = APIRouter(prefix="/v1", tags=["decisions"], route_class=LongNumbersRoute)
_WIRE_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {**row, "model": DecisionsErrorBody} for code, row in _ERRORS.items()}


@wire.post("/decisions", response_model=DecisionReply, responses=_WIRE_ERRORS,
           summary="OpenAI's Decisions wire: predicate, choice and score questions, answered in order",
           description=DECISIONS_DESCRIPTION, openapi_extra=request_examples(DECISIONS_EXAMPLES))
async def decisions(req: DecisionsRequest, request: Request, gw: Gateway = Depends(gateway),  # noqa: B008
                    key: str | None = Depends(caller)) -> Response:  # noqa: B008
    noted = request.scope.setdefault("jev", {})
    kinds = {str(i): {"predicate": "noul"}.get(q.type, q.type) for i, q in enumerate(req.questions)}
    ids = engine_ids(req, gw.config.calibration)
    try:
        body = await decide(gw, req, key, noted, ids)
    except Exception as exc:  # noqa: BLE001 - every failure leaves typed
        err = from_exception(exc, gw.config.retry_after_s)
        noted["error"] = err.type
        return json_response(err.status, error_body(err, kinds, ids), err.headers)
    return json_response(200, body)
