"""The wire shape of ``POST /v1/systemone``: the hosted API's ``{model, state, questions}`` plus options.

The engine's own ``api="systemone"`` client sends exactly ``{state, model, questions}``, each
question a dumped ``Choice`` / ``Score`` / ``Noul``. The options come where ``how-it-works.txt``
puts them, ``request: {total_timeout_seconds, prompt_layout}`` and ``backend: {max_concurrency,
timeout_seconds, top_logprobs}``, or flat at the top level; both at once must agree.
Questions stay plain dicts here: the engine validates them, so a bad one is named as it names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class SystemOneRequest(RequestOptions, BackendOptions):
    """``{model, state, questions}`` as the hosted API has it; options nested or flat."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    state: Any = Field(description="text, a JSON object or list, or chat turns")
    questions: dict[str, Any] = Field(description="id -> {type: choice|score|noul, instructions, criteria}")
    request: RequestOptions | None = None
    backend: BackendOptions | None = None


@dataclass(frozen=True)
class EngineOptions:
    """What picks (or builds) an engine client: the options the engine takes at construction."""

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
