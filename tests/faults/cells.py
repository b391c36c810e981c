"""The fault matrix: every fault, the surfaces it applies to, and its documented outcome.

One definition serves the tests (``test_matrix.py`` runs each cell on each surface, sync and
async) and the docs (``scripts/fault_table.py`` renders it into docs/engine.md), so the table
cannot drift from what is tested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jev_shared import (
    DecisionTimeoutError,
    IncompleteAnswerError,
    LabelReadoutError,
    MalformedAnswerError,
    ModelRefusalError,
    ProviderError,
    UnsupportedMethodError,
)

from . import kinds as k
from .replies import good, sent_schema, wants_tokens
from .server import Fault, Request

CHAT, RESPONSES, MESSAGES = "chat_completions", "responses", "messages"
ALL = (CHAT, RESPONSES, MESSAGES)
TOKEN = (CHAT, RESPONSES)
NO_LOGPROBS = "Messages has no logprobs (a token method there is refused before any request)"
Check = Callable[[Any, list[Request], str], None]


@dataclass(frozen=True)
class Cell:
    """One fault: what the faulty question's requests get, and what the call must end in."""

    fault: str
    surfaces: tuple[str, ...]
    script: tuple[Fault, ...]
    outcome: str
    error: type[Exception] | None = None
    #: "token": logprobs where the surface has them, structured on Messages; or a method name.
    method: str = "token"
    #: debug["methods"] for the faulty question when the call answers (None: the method asked).
    fallback: str | None = None
    #: requests the faulty question sends; None: at least one.
    requests: int | None = 1
    forever: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    call: dict[str, Any] = field(default_factory=dict)
    #: seconds to wait after the call before counting (a hang: nothing may follow the timeout).
    settle: float = 0.0
    check: Check | None = None
    skipped: str = ""

    def method_for(self, surface: str) -> str:
        if self.method == "token":
            return "structured" if surface == MESSAGES else "logprobs"
        return self.method


def _status(code: int | None) -> Check:
    def check(err: Any, _sent: list[Request], _surface: str) -> None:
        assert err.status_code == code, err

    return check


def _billing(resp: Any, _sent: list[Request], _surface: str) -> None:
    assert resp.answers["q"].choice == "billing"


def _retried(resp: Any, sent: list[Request], surface: str) -> None:
    _billing(resp, sent, surface)
    assert resp.usage.n_retries >= 1


def _zero_technical(resp: Any, sent: list[Request], surface: str) -> None:
    _billing(resp, sent, surface)
    assert resp.answers["q"].probabilities["technical"] < 1e-6


def _no_signal(resp: Any, _sent: list[Request], _surface: str) -> None:
    assert resp.debug["no_signal"] == ["q"]


def _asked_json_last(resp: Any, sent: list[Request], surface: str) -> None:
    """The fallback went over the wire as a JSON request: no logprobs, a schema."""
    assert wants_tokens(sent[0]) and not wants_tokens(sent[-1]) and sent_schema(sent[-1]) is not None
    _billing(resp, sent, surface)


def _field_dropped(resp: Any, sent: list[Request], surface: str) -> None:
    name = "output_config" if surface == MESSAGES else "chat_template_kwargs"
    assert name in sent[0].body and name not in sent[1].body
    assert name in resp.debug["server_limits"]
    _billing(resp, sent, surface)


def _schema_downgraded(resp: Any, sent: list[Request], surface: str) -> None:
    assert sent[0].body["response_format"]["type"] == "json_schema"
    assert sent[1].body["response_format"] == {"type": "json_object"}
    _billing(resp, sent, surface)


def _provider_cannot(err: Any, _sent: list[Request], _surface: str) -> None:
    assert err.provider_cannot


def _budget(err: Any, _sent: list[Request], surface: str) -> None:
    assert err.field == ("max_output_tokens" if surface == RESPONSES else "max_tokens")


def _words(err: Any, _sent: list[Request], _surface: str) -> None:
    assert err.refusal and "can't help" in err.refusal


_FAST = {"max_retries": 1}
LOGPROBS_REFUSED = k.error(400, "This model does not support logprobs", param="logprobs", code="unsupported_parameter")
TOP_VALUE = k.error(400, "Invalid 'top_logprobs': integer must be between 0 and 5", param="top_logprobs",
                    code="integer_above_max_value")

CELLS: tuple[Cell, ...] = (
    Cell("refusal", ALL, (k.refusal,), "`ModelRefusalError` with the provider's words; not retried",
         ModelRefusalError, check=_words),
    Cell("content filter", TOKEN, (k.content_filter,), "`ModelRefusalError`; not retried", ModelRefusalError,
         method="structured", skipped="Messages reports filtering as `stop_reason: refusal` (the refusal row)"),
    Cell("truncated JSON answer", ALL, (k.truncated,),
         "`IncompleteAnswerError` naming the budget (`max_tokens` / `max_output_tokens`) after one corrective retry",
         IncompleteAnswerError, method="structured", requests=2, forever=True, check=_budget),
    Cell("reasoning-only reply (JSON method)", ALL, (k.reasoning_only,),
         "`MalformedAnswerError` saying reasoning-only, after one corrective retry", MalformedAnswerError,
         method="structured", requests=2, forever=True),
    Cell("reasoning-only reply (token method)", TOKEN, (k.reasoning_only,),
         "`LabelReadoutError` saying reasoning-only, after one corrective retry", LabelReadoutError,
         requests=2, forever=True, skipped=NO_LOGPROBS),
    Cell("logprobs null", TOKEN, (k.logprobs_null,), "`LabelReadoutError` (`provider_cannot`); not retried",
         LabelReadoutError, check=_provider_cannot, skipped=NO_LOGPROBS),
    Cell("logprobs null, method=auto", TOKEN, (k.logprobs_null,), "answered with `structured` (one more request)",
         method="auto", fallback="structured", requests=2, check=_asked_json_last, skipped=NO_LOGPROBS),
    Cell("logprobs empty list, method=auto", TOKEN, (k.logprobs_empty,), "answered with `structured`",
         method="auto", fallback="structured", requests=2, check=_asked_json_last, skipped=NO_LOGPROBS),
    Cell("NaN logprob", TOKEN, (k.with_values(-0.1, k.NAN, -2.0),),
         "`LabelReadoutError` (non-finite logprob) after one corrective retry", LabelReadoutError, requests=2,
         forever=True, skipped=NO_LOGPROBS),
    Cell("-inf logprob", TOKEN, (k.with_values(-0.1, k.NEG_INF, -2.0),), "answered; that label reads 0 (a reported zero)",
         check=_zero_technical, skipped=NO_LOGPROBS),
    Cell("-9999 logprob (OpenAI's outside-the-window)", TOKEN, (k.with_values(-0.1, -9999.0, -2.0),),
         "answered; that label gets ~0", check=_zero_technical, skipped=NO_LOGPROBS),
    Cell("window holds no label (`Sure`, ` I`, `The`)", TOKEN, (k.no_label,),
         "answered uniform, the question listed in `debug[\"no_signal\"]`", check=_no_signal, skipped=NO_LOGPROBS),
    Cell("400 refusing an optional field by name", ALL, (k.refuse_field,),
         "field dropped (`chat_template_kwargs`; `output_config` on Messages), re-asked, remembered in "
         "`debug[\"server_limits\"]`", requests=2, check=_field_dropped),
    Cell("400 refusing `response_format`", (CHAT,),
         (k.error(400, "response_format is not supported by this model", param="response_format"),),
         "re-asked with `json_object` (the schema stays in the prompt)", method="structured", requests=2,
         check=_schema_downgraded, skipped="Responses sends `text.format`, Messages `output_config` (row above)"),
    Cell("400 `param: logprobs`, `code: unsupported_parameter`, method=auto", TOKEN, (LOGPROBS_REFUSED,),
         "answered with `structured`, remembered", method="auto", fallback="structured", requests=2,
         check=_asked_json_last, skipped=NO_LOGPROBS),
    Cell("Responses 400 \"logprobs is not supported\", method=auto", (RESPONSES,),
         (k.error(400, "logprobs is not supported"),), "answered with `structured`", method="auto",
         fallback="structured", requests=2, check=_asked_json_last, skipped="a Responses wording"),
    Cell("400 value complaint on `top_logprobs`, method=auto", TOKEN, (TOP_VALUE,),
         "answered with `structured` for this question (not remembered)", method="auto", fallback="structured",
         requests=2, check=_asked_json_last, skipped=NO_LOGPROBS),
    Cell("404", ALL, (k.error(404, "Not Found"),), "`ProviderError` status 404; not retried", ProviderError,
         check=_status(404)),
    Cell("429 with `Retry-After: 0`, then success", ALL,
         (k.error(429, "Rate limit reached", headers={"retry-after": "0"}),), "answered after one retry",
         requests=2, check=_retried),
    Cell("500, then success", ALL, (k.error(500, "Internal error", headers={"retry-after": "0"}),),
         "answered after one retry", requests=2, check=_retried),
    Cell("503 forever (`max_retries=1`)", ALL, (k.error(503, "Service unavailable"),),
         "`ProviderError` status 503 after the retries", ProviderError, requests=2, forever=True,
         options=_FAST, check=_status(503)),
    Cell("503 forever, method=auto (`max_retries=1`)", TOKEN, (k.error(503, "Service unavailable"),),
         "`ProviderError` status 503; no structured re-ask of a down server", ProviderError, method="auto",
         requests=2, forever=True, options=_FAST, check=_status(503), skipped="Messages asks structured at once"),
    Cell("connection reset, then success", ALL, (k.reset,), "answered after one retry", requests=2,
         check=_retried),
    Cell("connection reset forever (`max_retries=1`)", ALL, (k.reset,), "`ProviderError` with no status",
         ProviderError, requests=2, forever=True, options=_FAST, check=_status(None)),
    # the server holds 0.5 s, then resets: a retry after the timeout would arrive at once (no backoff
    # here), well inside the 0.8 s settle
    Cell("hanging server (`timeout=0.3`)", ALL, (k.hang(0.5),),
         "`DecisionTimeoutError`; no request leaves after the call failed", DecisionTimeoutError, forever=True,
         call={"timeout": 0.3}, settle=0.8),
    Cell("10 MB body", ALL, (k.huge,), "answered", check=_billing),
    *(Cell(f"malformed 200: {name.replace('_', ' ')}", ALL, (fault,),
           "`ProviderError` (never a JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError)", ProviderError,
           requests=None, forever=True, options=_FAST) for name, fault in k.MALFORMED.items()),
    Cell("token method on Messages", (MESSAGES,), (good,), "`UnsupportedMethodError` before any request",
         UnsupportedMethodError, method="logprobs", requests=0, skipped="Chat and Responses carry logprobs"),
)


def cases() -> list[tuple[Cell, str, bool]]:
    """Every (cell, surface, sync) the matrix runs."""
    return [(c, s, sync) for c in CELLS for s in c.surfaces for sync in (True, False)]


def case_id(case: tuple[Cell, str, bool]) -> str:
    cell, surface, sync = case
    name = "".join(ch if ch.isalnum() else "-" for ch in cell.fault.lower()).strip("-")
    while "--" in name:
        name = name.replace("--", "-")
    return f"{name}|{surface}|{'sync' if sync else 'async'}"
