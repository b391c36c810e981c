"""Asking: one question's requests, the bottom of every flow (see :mod:`flows`).

:class:`Ask` is what a question's flow reads; :func:`call` sends one request (a refused optional
field dropped and re-asked, a missing Responses route moved to Chat Completions) and reads the
reply; :func:`ask_until_read` adds the repair turns. No I/O: each yields its :class:`Call`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from .calls import CONTENT_FREE_STATES, Call, Flow, Intent, Prompt
from .errors import FieldRefusedError, IncompleteAnswerError, LabelReadoutError, MalformedAnswerError, ProviderError
from .faults import READOUT_FIELDS, refused_field, route_missing, sent_fields
from .memory import BackendMemory, Memory
from .options import Options
from .prompt import state_block
from .questions import Prepared
from .record import Record
from .surfaces.common import check_refusal, strip_fields
from .surfaces.registry import build_call, fallback_of, parse_reply
from .surfaces.wire import Parsed

T = TypeVar("T")
Messages = list[dict[str, Any]]
#: How a repair turn begins (the slot cache knows a readout failed by it: slots.py).
REPAIR_PREFIX = "Your previous reply was invalid"


@dataclass(frozen=True)
class Ask:
    """One question in one call: everything its flow reads. The flow writes only to ``record``."""

    prep: Prepared
    state: Any  # read in two places only: read_tokens and json_pass render it
    options: Options  # this call's (Options.for_call)
    memory: BackendMemory  # a whole Memory is taken as its default backend's (tests drive flows by hand)
    speaks: tuple[str, ...]
    record: Record

    def __post_init__(self) -> None:
        if isinstance(self.memory, Memory):
            object.__setattr__(self, "memory", self.memory.for_backend(""))

    @property
    def model(self) -> str:
        return self.options.model

    def surface(self, method: str) -> str:
        return self.memory.surface_for(self.model, method, self.options.api, self.speaks)


def ask_until_read(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
                   read: Callable[[Parsed], T], repairable: Callable[[Exception], bool],
                   repair: str) -> Flow[tuple[Parsed, T]]:
    """Ask, read; a reply that cannot be read earns ``n_retry_malformed`` repair turns saying why."""
    last = ask.options.n_retry_malformed
    intent, stem = intent_of(ask.state), zero_shot_stem(ask, messages)
    for attempt in range(last + 1):
        parsed = yield from call(ask, surface, messages, fields, extra, intent, stem)
        try:
            return parsed, read(parsed)
        except (LabelReadoutError, MalformedAnswerError, IncompleteAnswerError) as exc:
            if attempt == last or not repairable(exc):
                raise
            ask.record.retry_reasons.append(str(exc))
            messages = messages + [
                {"role": "assistant", "content": parsed.content or ""},
                {"role": "user", "content": f"{REPAIR_PREFIX}: {exc}. {repair}"},
            ]
            intent = Intent.REPAIR
    raise AssertionError("unreachable")


def intent_of(state: Any) -> Intent:
    """A question's request about ``state``: its answer, or content-free where the state is one of the debias
    prior's content-free ones (the first: the twin's), whoever asks about it."""
    if isinstance(state, str) and state in CONTENT_FREE_STATES:
        return Intent.TWIN if state == CONTENT_FREE_STATES[0] else Intent.CONTENT_FREE
    return Intent.ANSWER


def zero_shot_stem(ask: Ask, messages: Messages) -> str | None:
    """The prompt's part that holds no state, where the state comes last (state_last): its system message (the
    rules, the question, its options) for a zero-shot prompt, else that and the examples' turns (as JSON); the
    state alone follows. None for the layouts that put the question after the state."""
    if ask.options.layout in ("split", "fused"):
        return None
    if not ask.prep.examples:
        return messages[0]["content"]
    return json.dumps(messages[:-1], ensure_ascii=False, sort_keys=True)


#: The intents whose prompt is the question's own, found by :func:`call` (a repair turn is given its prompt's).
_OWN_PROMPT = frozenset({Intent.ANSWER, Intent.CONTENT_FREE, Intent.TWIN})


def call(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
         intent: Intent = Intent.ANSWER, stem: str | None = None) -> Flow[Parsed]:
    """Send one request and read the reply; refusals and filters raise here. The request carries ``intent`` and
    its prompt (``stem``: a repair turn's, the prompt's it repairs; an answer's or a content-free prior's is found
    here).

    A refused optional field is dropped and the call re-asked (remembered for the client); under
    api='auto' a 404 from the Responses route that does not name the model moves to Chat Completions.
    """
    rec, model = ask.record, ask.model
    if stem is None and intent in _OWN_PROMPT:
        stem = zero_shot_stem(ask, messages)
    prompt = Prompt(model, messages, stem, len(ask.prep.examples) if stem is not None else 0)
    while True:
        refused = ask.memory.refused_on((model, surface))
        request = _built(surface, model, messages, fields, extra, ask.options.extra_body, refused)
        request.intent, request.prompt = intent, prompt
        if stem is not None:
            head = messages[:-3] if intent is Intent.REPAIR else messages[:-1]  # the prompt before its state
            request.twin = partial(_twin, surface, model, head, fields, extra, ask.options.extra_body, refused, prompt)
        rec.note("request", request.kwargs)
        rec.usage.n_calls += 1
        rec.surfaces.append(surface)
        try:
            reply = yield request
        except ProviderError as exc:
            rec.usage.n_retries += exc.n_retries
            moved = _on_provider_error(ask, surface, request, exc)
            if moved is None:
                raise
            surface = moved
            continue
        rec.usage.n_retries += reply.n_retries
        parsed = parse_reply(surface, reply.body)
        rec.usage.add_tokens(parsed.input_tokens, parsed.output_tokens)
        rec.note("response", reply.body)
        check_refusal(parsed)
        return parsed


def _built(surface: str, model: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
           user_extra: dict[str, Any] | None, refused: set[str]) -> Call:
    """The surface's request, less the fields this server refused."""
    request = build_call(surface, model, messages, fields, extra, user_extra)
    strip_fields(request, refused)
    return request


def _twin(surface: str, model: str, head: Messages, fields: dict[str, Any], extra: dict[str, Any],
          user_extra: dict[str, Any] | None, refused: set[str], of: Prompt) -> Call:
    """A request's content-free twin: its prompt up to the state (the system message, any examples' turns), the
    state ``N/A``, its fields."""
    messages = [*head, {"role": "user", "content": state_block(CONTENT_FREE_STATES[0])}]
    if "max_tokens" in fields:  # its reply is never read: one token keeps the prompt (a path read writes more)
        fields = {**fields, "max_tokens": 1}
    request = _built(surface, model, messages, fields, extra, user_extra, refused)
    request.intent, request.prompt = Intent.TWIN, Prompt(model, messages, of.stem, of.examples)
    return request


def _on_provider_error(ask: Ask, surface: str, request: Call, exc: ProviderError) -> str | None:
    """The surface to re-ask on (a missing route moves, a refused optional field is dropped), or None."""
    target = fallback_of(surface, ask.speaks) if ask.options.api == "auto" else None
    if target is not None and route_missing(exc, ask.model):
        ask.memory.mark_route_missing(surface)
        ask.record.retry_reasons.append(f"{surface} answered 404; re-asked on {target}")
        return target
    name = refused_field(exc, sent_fields(request.kwargs), surface)
    if name is None:
        return None
    if name in READOUT_FIELDS:
        raise FieldRefusedError(str(exc), field=name, status_code=exc.status_code,
                                provider_message=exc.provider_message, body=exc.body) from exc
    schema = (request.kwargs.get("response_format") or {}).get("type") == "json_schema"
    ask.memory.refuse((ask.model, surface),
                      "response_format:json_schema" if name == "response_format" and schema else name)
    ask.record.retry_reasons.append(f"the server refuses {name!r}; re-asked without it")
    return surface
