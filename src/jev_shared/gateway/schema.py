"""The wire shape of ``POST /v1/systemone``: the hosted API's ``{model, state, questions}`` plus options.

The engine's own ``api="systemone"`` client sends exactly ``{state, model, questions}``, each
question a dumped ``Choice`` / ``Score`` / ``Noul``. The options come where ``how-it-works.txt``
puts them, ``request: {total_timeout_seconds, prompt_layout}`` and ``backend: {max_concurrency,
timeout_seconds, top_logprobs}``, or flat at the top level; both at once must agree.
Questions stay plain dicts when parsed: the engine validates them, so a bad one is named as it names
it. The OpenAPI document still shows their union (choice, score, noul, told apart by ``type``):
:data:`QuestionDoc` is the engine's own models with ``type`` required, and the request's
``questions`` refers to it. The response models document what the routes send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

from jev_shared import Choice, ChoiceAnswer, Noul, NoulAnswer, Score, ScoreAnswer, Usage

#: The engine's layouts (its constructor checks them too); how-it-works has fused and split.
Layout = Literal["state_last", "split", "fused"]
MAX_TOP_LOGPROBS = 4096
MAX_QUESTION_CONCURRENCY = 64


class RequestOptions(BaseModel):
    """Options of the whole request."""

    model_config = ConfigDict(extra="forbid")

    total_timeout_seconds: float | None = Field(None, gt=0, description="bounds the whole request")
    prompt_layout: Layout | None = Field(None, description="state_last (default), split or fused")


class BackendOptions(BaseModel):
    """Options of each backend call."""

    model_config = ConfigDict(extra="forbid")

    max_concurrency: int | None = Field(None, ge=1, le=MAX_QUESTION_CONCURRENCY,
                                        description="questions of this request in flight at once")
    timeout_seconds: float | None = Field(None, gt=0, description="bounds each backend call")
    top_logprobs: int | None = Field(None, ge=1, le=MAX_TOP_LOGPROBS, description="the logprob window asked for")


class ChoiceQuestion(Choice):
    """Pick one option; ``criteria`` maps each option to its description (1-255 options)."""

    type: Literal["choice"]  # pyright: ignore[reportGeneralTypeIssues]  # required on the wire: the discriminator


class ScoreQuestion(Score):
    """Place the state on ordered levels 0..n-1 (2-10 levels)."""

    type: Literal["score"]  # pyright: ignore[reportGeneralTypeIssues]  # required on the wire: the discriminator


class NoulQuestion(Noul):
    """A yes/no statement; the answer is the probability that it is true."""

    type: Literal["noul"]  # pyright: ignore[reportGeneralTypeIssues]  # required on the wire: the discriminator


#: The question union as documented: the engine's models, ``type`` the discriminator.
QuestionDoc = Annotated[ChoiceQuestion | ScoreQuestion | NoulQuestion, Field(discriminator="type")]
QUESTION_REF = "#/components/schemas/Question"
#: ``questions`` is parsed as a plain mapping (the engine validates it) and documented as the union.
Questions = Annotated[dict[str, Any], WithJsonSchema({
    "type": "object", "minProperties": 1, "additionalProperties": {"$ref": QUESTION_REF},
    "description": "id -> question (choice, score or noul, told apart by `type`), answered in this order"})]


class SystemOneRequest(RequestOptions, BackendOptions):
    """A System One request: `model`, `state` and `questions`, as the hosted API takes them; the options nested
    under `request` and `backend`, or flat at the top level."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="a model this gateway serves (GET /v1/models)")
    state: Any = Field(description="text, a JSON object or list, or chat turns")
    questions: Questions
    request: RequestOptions | None = None
    backend: BackendOptions | None = None


class DecisionSetFields(BaseModel):
    """What ``jev serve --calibration FILE`` adds to an answer its decision sets apply to (:mod:`.sets`)."""

    decision_set: list[str] | None = Field(None, description=(
        "the options in the answer's decision set, most probable first (choice keys, score levels \"0\".., "
        "\"true\"/\"false\" for a noul): only where `jev serve --calibration` has decision sets for this "
        "question, fitted on its options (docs/decisions.md)"))
    abstains: bool | None = Field(None, description=(
        "the set is not one option (several, or none): do not decide alone; only beside decision_set"))


def _documented(answer: type[BaseModel]) -> type[BaseModel]:
    """The engine's answer as sent: its own fields, and the two a calibration file's sets add."""
    fields: dict[str, Any] = {n: (f.annotation, f) for n, f in answer.model_fields.items() if not f.exclude}
    return create_model(answer.__name__, __base__=DecisionSetFields, __doc__=answer.__doc__, **fields)


ChoiceAnswerDoc, ScoreAnswerDoc, NoulAnswerDoc = (_documented(a) for a in (ChoiceAnswer, ScoreAnswer, NoulAnswer))
AnswerDoc = Annotated[ChoiceAnswerDoc | ScoreAnswerDoc | NoulAnswerDoc,  # type: ignore[valid-type]
                      Field(discriminator="type")]


class SystemOneReply(BaseModel):
    """The engine's ``SystemOneResponse`` without ``debug``: answers in question order, and usage."""

    model: str
    answers: dict[str, AnswerDoc]
    usage: Usage


class ErrorDetail(BaseModel):
    type: str = Field(description="a stable machine name: invalid_question, rate_limited, timeout, ...")
    message: str
    question_id: str | None = None
    field: str | None = Field(None, description="the dotted path from the body's root (questions.team.criteria)")


class ErrorBody(BaseModel):
    """Every error the gateway answers, whatever its status."""

    error: ErrorDetail


class ModelCard(BaseModel):
    """One model, readable as OpenAI's (``id``, ``object``, ``created``, ``owned_by``) and as the
    System One API's (``name``, ``description``, ``release_date``)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "jev"
    name: str
    description: str
    release_date: str = Field(description="YYYY-MM-DD: the day this gateway started serving it")


class ModelList(BaseModel):
    """OpenAI's list shape (``data``) and the System One API's (``models``), the same cards in both."""

    object: Literal["list"] = "list"
    data: list[ModelCard]
    models: list[ModelCard]


class Health(BaseModel):
    status: Literal["ok", "warming"] = "ok"
    ready: bool = Field(True, description="false while --warm questions are being prepared")
    models: list[str]
    in_flight: int


@dataclass(frozen=True)
class EngineOptions:
    """A request's engine options: per call (layout, window, concurrency), and the per-attempt timeout
    (the one the engine takes at construction: it picks the model client's twin)."""

    layout: str
    max_concurrency: int
    top_logprobs: int
    timeout_seconds: float | None


class OptionConflictError(ValueError):
    """The same option given nested and flat with different values."""

    def __init__(self, field: str):
        self.field = field
        super().__init__(f"given twice with different values (flat and in {field.split('.')[0]!r})")


def _pick(req: SystemOneRequest, group: BaseModel | None, prefix: str, name: str) -> Any:
    flat, nested = getattr(req, name), getattr(group, name, None) if group is not None else None
    if flat is not None and nested is not None and flat != nested:
        raise OptionConflictError(f"{prefix}.{name}")
    return nested if nested is not None else flat


def resolve_options(req: SystemOneRequest, defaults: EngineOptions) -> tuple[EngineOptions, float | None]:
    """(engine options, total timeout) from the request, falling back to the gateway's defaults."""
    layout = _pick(req, req.request, "request", "prompt_layout")
    total = _pick(req, req.request, "request", "total_timeout_seconds")
    conc = _pick(req, req.backend, "backend", "max_concurrency")
    per_call = _pick(req, req.backend, "backend", "timeout_seconds")
    top = _pick(req, req.backend, "backend", "top_logprobs")
    opts = EngineOptions(layout=layout or defaults.layout, max_concurrency=conc or defaults.max_concurrency,
                         top_logprobs=top or defaults.top_logprobs,
                         timeout_seconds=per_call if per_call is not None else defaults.timeout_seconds)
    return opts, total
