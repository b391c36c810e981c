"""Hosted surfaces: every question in one request, answered by a service rather than read from tokens.

* ``api="systemone"``: the hosted System One API, ``POST {base}/v1/systemone`` with
  ``{state, model, questions}`` and a bearer key (the client's, or ``TYPESAFE_API_KEY``).
* ``api="decisions"``: OpenAI's Decisions API (``client.decisions.create`` in openai 3.x):
  noul ↔ predicate, choice, score; a per-question ``refusal`` answer is that question's
  :class:`ModelRefusalError`.

Options that only make sense for an LLM the engine drives (method, labels, layout, examples, …)
are refused by name before anything is sent.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .answers import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer, build_answer
from .calls import Call, Flow, Intent
from .errors import InvalidQuestionError, MalformedReplyError, ModelRefusalError, ProviderError, UnsupportedMethodError
from .options import Options
from .prompt import render_state
from .questions import Prepared
from .record import Record
from .states import is_chat
from .surfaces.registry import SURFACES


def systemone_client() -> Any:
    """An openai client pointed at the hosted System One API, from TYPESAFE_BASE_URL / TYPESAFE_API_KEY."""
    import openai

    base, key = os.environ.get("TYPESAFE_BASE_URL"), os.environ.get("TYPESAFE_API_KEY")
    if not base or not key:
        raise ProviderError("api='systemone' without a client needs TYPESAFE_BASE_URL and TYPESAFE_API_KEY set")
    return openai.OpenAI(base_url=base.rstrip("/") + "/v1", api_key=key)


def refuse_llm_options(options: Options, call_examples: Any) -> None:
    """The service decides how to read the model: refuse, by name, the knobs that steer an LLM."""
    defaults = Options(model=options.model, debias=False)
    for name in ("method", "labels", "mode", "layout", "top_logprobs", "thinking", "missing", "strict_labels",
                 "debias"):
        value = getattr(options, name)
        if value != getattr(defaults, name):
            raise UnsupportedMethodError(
                f"api={options.api!r} answers on the service; {name}={value!r} only makes sense for an LLM this "
                "client drives: leave it unset")
    if options.extra_body:
        raise UnsupportedMethodError(f"api={options.api!r} answers on the service; extra_body is for an LLM request")
    if call_examples or options.examples:
        raise UnsupportedMethodError(f"api={options.api!r} answers on the service; few-shot examples are not sent")


def hosted_flow(options: Options, preps: list[Prepared], state: Any, rec: Record) -> Flow[list[Answer | Exception]]:
    """All questions in one request to a service; per-question refusals come back as exceptions."""
    call = build(options.api, options.model, state, preps)
    rec.note("request", call.kwargs)
    rec.usage.n_calls += 1
    try:
        reply = yield call
    except ProviderError as exc:
        rec.usage.n_retries += exc.n_retries
        raise map_error(exc, preps) from exc
    rec.usage.n_retries += reply.n_retries
    rec.note("response", reply.body)
    answers, tokens = parse(options.api, reply.body, preps)
    rec.usage.add_tokens(*tokens)
    return answers


def _state_json(state: Any) -> Any:
    if hasattr(state, "model_dump"):
        return state.model_dump(mode="json")
    return state


def build(api: str, model: str, state: Any, preps: list[Prepared]) -> Call:
    if api == "systemone":
        questions = {p.id: p.question.model_dump(exclude_none=True, exclude={"examples"}) for p in preps}
        body = {"state": _state_json(state), "model": model, "questions": questions}
        return Call("systemone", {"path": "/systemone", "body": body}, SURFACES["systemone"].path, Intent.HOSTED)
    kwargs = {"model": model, "input": _decision_input(state), "questions": [_decision_question(p) for p in preps]}
    return Call("decisions", kwargs, SURFACES["decisions"].path, Intent.HOSTED)


def _decision_input(state: Any) -> Any:
    if isinstance(state, str):
        return state
    if is_chat(state):
        return [{"role": t["role"] if t["role"] in ("user", "assistant", "system", "developer") else "user",
                 "content": t["content"]} for t in state]
    return render_state(state)


def _decision_question(p: Prepared) -> dict[str, Any]:
    base = {"name": p.id, "instructions": p.question.instructions}
    if p.kind == "noul":
        q = p.question
        criteria = getattr(q, "criteria", None)
        if criteria:
            base["instructions"] += f"\nTrue means: {p.descriptions[0]}\nFalse means: {p.descriptions[1]}"
        return {"type": "predicate", **base}
    if p.kind == "choice":
        return {"type": "choice", **base,
                "choices": [{"value": k, **({"description": d} if d else {})} for k, d in zip(p.keys, p.descriptions)]}
    return {"type": "score", **base, "levels": [{"label": d or k} for k, d in zip(p.keys, p.descriptions)]}


def parse(api: str, body: dict[str, Any], preps: list[Prepared]) -> tuple[list[Answer | Exception], tuple[int | None, int | None]]:
    """Answers in question order (an Exception where a question was refused) and (input, output) tokens.

    A body whose fields have the wrong types is a provider fault, never a raw exception."""
    try:
        return _parse(api, body, preps)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
        raise MalformedReplyError(f"the {api} reply does not have the documented shape ({type(exc).__name__}: "
                                  f"{exc})", status_code=200) from None


def _parse(api: str, body: dict[str, Any], preps: list[Prepared]) -> tuple[list[Answer | Exception], tuple[int | None, int | None]]:
    usage = body.get("usage") or {}
    tokens = (_count(usage.get("input_tokens")), _count(usage.get("output_tokens")))
    if api == "systemone":
        answers = body.get("answers") or {}
        return [_systemone_answer(p, answers.get(p.id)) for p in preps], tokens
    answers = body.get("answers") or []
    if len(answers) != len(preps):
        raise ProviderError(f"the Decisions API sent {len(answers)} answers for {len(preps)} questions")
    return [_decision_answer(p, a) for p, a in zip(preps, answers)], tokens


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _systemone_answer(p: Prepared, raw: Any) -> Answer | Exception:
    """The service's answer, kept as sent (validated against the answer types)."""
    if not isinstance(raw, dict):
        return ProviderError(f"the System One service sent no answer for question {p.id!r}")
    classes: dict[str, type[ChoiceAnswer] | type[ScoreAnswer] | type[NoulAnswer]] = {
        "choice": ChoiceAnswer, "score": ScoreAnswer, "noul": NoulAnswer}
    cls = classes[p.kind]
    try:
        return cls.model_validate({"type": p.kind, **raw})
    except ValueError as exc:
        return ProviderError(f"the System One service's answer for {p.id!r} does not fit the answer shape: {exc}")


def _decision_answer(p: Prepared, raw: dict[str, Any]) -> Answer | Exception:
    kind = raw.get("type")
    if kind == "refusal":
        return ModelRefusalError(f"the Decisions API refused question {p.id!r}", refusal="refusal")
    expected = {"noul": "predicate", "choice": "choice", "score": "score"}[p.kind]
    if kind != expected:
        return ProviderError(f"the Decisions API answered question {p.id!r} with {kind!r}, expected {expected!r}")
    if kind == "predicate":
        return NoulAnswer(noul=float(raw["probability"]))
    if kind == "choice":
        by_value = {str(item["value"]): float(item["probability"]) for item in raw.get("probabilities", [])}
        return ChoiceAnswer(choice=str(raw["choice"]), probabilities={k: by_value.get(k, 0.0) for k in p.keys},
                            confidence=float(raw["confidence"]))
    by_level = {int(item["value"]): float(item["probability"]) for item in raw.get("probabilities", [])}
    probs = [by_level.get(i, 0.0) for i in range(len(p.keys))]
    answer = build_answer(p, probs)
    return answer.model_copy(update={"score": float(raw["score"]), "confidence": float(raw["confidence"])})


def map_error(exc: ProviderError, preps: list[Prepared]) -> Exception:
    """The service's error envelopes: 422 names the field (→ InvalidQuestionError), 401 the key."""
    code = exc.status_code
    body = getattr(exc, "body", None)
    rid = getattr(exc, "request_id", None)
    suffix = f" (request id {rid})" if rid else ""
    if code == 422:
        field, message = _field_of(body)
        qid = None
        parts = field.split(".") if field else []
        if len(parts) >= 2 and parts[0] == "questions":
            qid, field = parts[1], ".".join(parts[2:]) or None
        return InvalidQuestionError(f"{message}{suffix}", question_id=qid, field=field)
    if code == 401:
        return ProviderError(f"the service refused the API key (401): set TYPESAFE_API_KEY or the client's api_key"
                             f"{suffix}", status_code=401, request_id=rid, body=body)
    if code == 529:
        return ProviderError(f"the service is overloaded (529) and stayed so through the retries{suffix}",
                             status_code=529, request_id=rid, body=body, n_retries=exc.n_retries)
    return exc


def _field_of(body: Any) -> tuple[str | None, str]:
    """(dotted field, message) from a 422 body: {"error": {"field", "message"}} or FastAPI's detail list."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None, body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and (err.get("field") or err.get("param")):
            return str(err.get("field") or err.get("param")), str(err.get("message", "invalid"))
        detail = body.get("detail")
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            loc = [str(x) for x in detail[0].get("loc", []) if x != "body"]
            return ".".join(loc) or None, str(detail[0].get("msg", "invalid"))
        if isinstance(err, dict) and err.get("message"):
            return None, str(err["message"])
    return None, str(body)
