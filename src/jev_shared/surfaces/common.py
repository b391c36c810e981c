"""What every wire shares: a request's JSON copied, a reply's types checked, refusals and truncation as typed errors,
the fields a server refused stripped from a request.

Each surface reports refusals, filters and truncation in its own words; :func:`check_refusal` and
:func:`check_complete` map them to typed errors, so no cut-off or refused reply is ever parsed as an answer.
"""

from __future__ import annotations

import copy
from typing import Any

from ..calls import Call
from ..errors import IncompleteAnswerError, ModelRefusalError
from .wire import Parsed


def json_copy(value: Any) -> Any:
    """A copy of JSON-shaped data (its dicts and lists new, its strings and numbers shared): ``copy.deepcopy``'s
    result for a request's messages at half its CPU (a decision's hot path, bench/cpu.py)."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return copy.deepcopy(value) if isinstance(value, (tuple, set)) else value


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def int_or_none(v: Any) -> int | None:
    """A token count as the reply gives it, or None where it is not an int."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def check_types(p: Parsed) -> None:
    """A parsed reply whose fields have the wrong types raises TypeError (the registry's parse_reply maps it)."""
    _check_types(p)


def _check_types(p: Parsed) -> None:
    for name in ("content", "finish", "refusal"):
        value = getattr(p, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} is a {type(value).__name__}, not text")
    if p.logprobs is None:
        return
    if not isinstance(p.logprobs, dict):
        raise TypeError(f"logprobs is a {type(p.logprobs).__name__}, not an object")
    entries = p.logprobs.get("content")
    if entries is None:
        return
    if not isinstance(entries, list):
        raise TypeError(f"logprobs.content is a {type(entries).__name__}, not a list")
    for entry in entries:
        if not isinstance(entry, dict):
            raise TypeError("a logprobs entry is not an object")
        _check_logprob(entry)
        window = entry.get("top_logprobs")
        if window is not None and not isinstance(window, list):
            raise TypeError("top_logprobs is not a list")
        for alt in window or []:
            if type(alt) is dict and type(alt.get("token")) is str and type(alt.get("logprob")) is float:
                continue  # the common case, ~20 times a reply, without a call
            if not isinstance(alt, dict):
                raise TypeError("a top_logprobs entry is not an object")
            _check_logprob(alt)


def _check_logprob(entry: dict[str, Any]) -> None:
    token, lp = entry.get("token"), entry.get("logprob")
    if type(token) is not str and token is not None and not isinstance(token, str):  # the common case first
        raise TypeError(f"token {token!r} is not text")
    if type(lp) is not float and lp is not None and (isinstance(lp, bool) or not isinstance(lp, (int, float))):
        raise TypeError(f"logprob {lp!r} is not a number")


def check_refusal(p: Parsed) -> None:
    """A refusal or a content filter is the model declining: never parsed, never retried."""
    if p.refusal:
        raise ModelRefusalError(f"the model refused: {p.refusal}", refusal=p.refusal)
    if p.finish == "content_filter":
        raise ModelRefusalError(
            "the provider filtered the content (finish_reason='content_filter')", refusal=p.content or None
        )


def check_complete(p: Parsed, budget_field: str = "max_tokens") -> None:
    """A cut-off JSON answer is never parsed: say which budget ran out and the field to raise."""
    if p.finish == "length":
        raise truncation_error(budget_field)
    if p.finish == "context":
        raise IncompleteAnswerError(
            "the provider's context window ran out before the answer (stop_reason='model_context_window_exceeded'); "
            "shorten the state and the examples", field="state")
    if p.finish and (p.finish.startswith("unknown:") or p.finish.startswith("incomplete:")):
        raise IncompleteAnswerError(f"the provider stopped for a reason it does not document ({p.finish}); "
                                    "the reply was not read")


def truncation_error(field: str = "max_tokens") -> IncompleteAnswerError:
    """The answer was cut off: ``field`` is the surface's output cap (:attr:`Surface.budget_field`)."""
    return IncompleteAnswerError(
        f"the provider ran out of output tokens before the answer was complete; raise {field}", field=field
    )


def strip_fields(call: Call, refused: set[str]) -> None:
    """Drop fields this server refused earlier (top level and extra_body); downgrade a refused schema."""
    extra = call.kwargs.get("extra_body") or {}
    for name in refused:
        call.kwargs.pop(name, None)
        extra.pop(name, None)
    if "response_format:json_schema" in refused and (call.kwargs.get("response_format") or {}).get("type") == "json_schema":
        call.kwargs["response_format"] = {"type": "json_object"}
    if "extra_body" in call.kwargs and not extra:
        call.kwargs.pop("extra_body")
