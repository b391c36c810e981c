"""Options: every knob of a client, validated once, as one frozen value (like httpx's ``Timeout``).

A client holds one :class:`Options`; each call derives its own with :meth:`Options.for_call`
(method, mode and labels may be set per call). Constructor mistakes raise ``ValueError`` (and
``UnsupportedMethodError`` for the method); per-call ones an :class:`InvalidQuestionError`
naming the field, before any request is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .answers import ConfidenceKind
from .errors import InvalidQuestionError, UnsupportedMethodError
from .methods import METHODS, MethodConfig
from .prompt import LAYOUTS
from .questions import Example
from .surfaces.registry import APIS, HOSTED
from .transport import RetryPolicy

Method = Literal["auto", "logprobs", "grammar", "structured", "discrete"]
Mode = Literal["system1", "system2", "auto"]
LabelStyle = Literal["letters", "names"]
Layout = Literal["auto", "state_last", "split", "fused"]
Missing = Literal["zero", "floor"]
Order = Literal["auto", "listed", "both"]
MODES: tuple[str, ...] = get_args(Mode)
LABEL_STYLES: tuple[str, ...] = get_args(LabelStyle)
CONFIDENCES: tuple[str, ...] = get_args(ConfidenceKind)
MISSING: tuple[str, ...] = get_args(Missing)
ORDERS: tuple[str, ...] = get_args(Order)

Examples = list[Example] | Mapping[str, list[Example]] | None


@dataclass(frozen=True)
class Options:
    """What a client was configured with; the defaults are the client constructor's."""

    #: the model name sent with every request
    model: str
    #: the System 1 readout: auto (logprobs where the provider gives them, else structured) | logprobs |
    #: grammar | structured | discrete
    method: Method = "auto"
    #: system1 | system2 (JSON ratings) | auto (System 1, escalated once below ``auto_threshold``)
    mode: Mode = "system1"
    #: mode="auto" escalates an answer whose confidence is below this
    auto_threshold: float = 0.7
    #: the wire: "auto" or a registered surface (:data:`~jev_shared.surfaces.registry.APIS`: chat_completions, responses,
    #: messages, the served engines', systemone, decisions)
    api: str = "auto"
    #: peak ((n·p_max − 1)/(n − 1), the hosted API's) | entropy (1 − H/ln n)
    confidence: ConfidenceKind = "peak"
    #: the logprob window asked for (0: none)
    top_logprobs: int = 20
    #: a call's requests in flight at once
    max_concurrency: int = 8
    #: repair turns for a reply that cannot be read
    n_retry_malformed: int = 1
    #: the model's thinking: None leaves it to the server, False turns it off, True on (no output cap)
    thinking: bool | None = None
    #: fields added to every request's body (merged last)
    extra_body: dict[str, Any] = field(default_factory=dict)
    #: where the state goes: auto (state_last, or split when that reads fewer tokens) | state_last | split | fused
    layout: Layout = "auto"
    #: the answer symbols: names (the options' own words) | letters
    labels: LabelStyle = "names"
    #: a label missing from the window: zero (0, listed in labels_missing) | floor (the lowest logprob returned)
    missing: Missing = "zero"
    #: few-shot examples for every question, or per question id
    examples: Examples = None
    #: a reply whose window holds no label at all earns a corrective retry
    strict_labels: bool = False
    #: "auto": content-free calibration for a question without examples, on a model where it was
    #: measured to win (the embedded default; the client resolves it), else off (docs/decisions.md)
    debias: bool | Literal["auto"] = "auto"
    #: JSON readouts: probabilities that do not sum to 1 are normalised (False: refused)
    normalize_probabilities: bool = True
    #: JSON readouts ask for a schema (response_format json_schema) where the surface takes one
    structured_outputs: bool = True
    #: retries of transient provider faults (429, 5xx, connection), honouring Retry-After
    max_retries: int = 3
    #: the call's total time in seconds (None: none)
    timeout: float | None = None
    #: every response carries the per-question debug detail
    debug: bool = False
    #: a question asked with its options and examples as listed ("listed"), or as listed and reversed, the two answers
    #: combined so neither the options' nor the examples' order can move the answer ("both": a second call per choice,
    #: and per yes/no with examples; :mod:`orders`); "auto": both for a choice with examples where the backend says
    #: so (``Backend.orders``), else as listed
    order: Order = "auto"
    #: Set per call by the client, not by users: the first token id of each answer word's spellings,
    #: where the server reads those tokens exactly (``LocalServer``'s llama.cpp, :mod:`exact`).
    token_ids: Mapping[str, int] | None = None
    #: With ``token_ids``: each answer word's own token ids, so a shared prefix is read on exactly too.
    token_paths: Mapping[str, tuple[int, ...]] | None = None
    #: With ``token_paths``: the texts of those tokens, where the server's tokenizer gives them.
    token_texts: Mapping[str, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        check_choice("method", self.method, METHODS)
        check_choice("mode", self.mode, MODES)
        check_choice("api", self.api, APIS)
        check_choice("confidence", self.confidence, CONFIDENCES)
        check_choice("layout", self.layout, LAYOUTS)
        check_choice("missing", self.missing, MISSING)
        check_choice("labels", self.labels, LABEL_STYLES)
        check_choice("order", self.order, ORDERS)
        if not isinstance(self.debias, bool) and self.debias != "auto":
            raise ValueError(f"debias: must be True, False or 'auto', got {self.debias!r}")
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("model: a non-empty model name is required")
        if not 0.0 <= self.auto_threshold <= 1.0:
            raise ValueError(f"auto_threshold: must lie in [0, 1], got {self.auto_threshold}")
        _check_count("top_logprobs", self.top_logprobs, 0)
        _check_count("max_concurrency", self.max_concurrency, 1)
        _check_count("n_retry_malformed", self.n_retry_malformed, 0)
        _check_count("max_retries", self.max_retries, 0)
        check_timeout(self.timeout, ValueError)
        object.__setattr__(self, "extra_body", dict(self.extra_body or {}))

    def for_call(self, method: str | None = None, mode: str | None = None, labels: str | None = None, *,
                 layout: str | None = None, top_logprobs: int | None = None,
                 max_concurrency: int | None = None) -> Options:
        """This call's options: the client's, with what the call sets checked (an InvalidQuestionError
        naming the field) and set, so one client serves every option set of its model."""
        check_choice("method", method or self.method, METHODS)
        check_choice("mode", mode or self.mode, MODES, InvalidQuestionError)
        check_choice("labels", labels or self.labels, LABEL_STYLES, InvalidQuestionError)
        check_choice("layout", layout or self.layout, LAYOUTS, InvalidQuestionError)
        for name, value, least in (("top_logprobs", top_logprobs, 0), ("max_concurrency", max_concurrency, 1)):
            if value is not None:
                _check_count(name, value, least, InvalidQuestionError)
        changes: dict[str, Any] = {name: value for name, value in (
            ("method", method), ("mode", mode), ("labels", labels), ("layout", layout),
            ("max_concurrency", max_concurrency)) if value}  # an empty value keeps the client's, as it always did
        if top_logprobs is not None:
            changes["top_logprobs"] = top_logprobs
        return self.evolved(**changes)  # each checked above

    def evolved(self, **changes: Any) -> Options:
        """A copy with ``changes`` already checked by the caller: the options are validated once a call, not again
        by ``__post_init__`` (``self`` itself when nothing changes, the common call)."""
        if not changes:
            return self
        new = object.__new__(type(self))  # what copy.copy does, without its reduce protocol (a third of the cost)
        new.__dict__.update(self.__dict__, **changes)
        return new

    @classmethod
    def checked(cls, **settings: Any) -> Options:
        """Options from untyped settings (the client's ``str`` keywords): every one checked in ``__post_init__``."""
        return cls(**settings)

    def with_layout(self, layout: str) -> Options:
        check_choice("layout", layout, LAYOUTS)
        return self.evolved(layout=layout)

    @classmethod
    def choices(cls, name: str) -> tuple[str, ...]:
        """The values option ``name`` takes (what the CLI, the gateway and the docs offer)."""
        return CHOICES[name]

    @classmethod
    def default(cls, name: str) -> Any:
        """Option ``name``'s default (the client constructor's)."""
        return cls.__dataclass_fields__[name].default

    @property
    def hosted(self) -> bool:
        """The questions are answered by a service (System One, Decisions), not read from an LLM."""
        return self.api in HOSTED

    @property
    def method_config(self) -> MethodConfig:
        """The narrow view the methods stage reads."""
        return MethodConfig(self.top_logprobs, self.thinking, self.structured_outputs, self.token_ids, self.token_paths,
                            self.token_texts)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.max_retries)


#: Every option with a closed set of values.
CHOICES: dict[str, tuple[str, ...]] = {"method": METHODS, "mode": MODES, "api": APIS, "confidence": CONFIDENCES,
                                       "layout": LAYOUTS, "labels": LABEL_STYLES, "missing": MISSING,
                                       "order": ORDERS}


def check_choice(name: str, value: Any, allowed: tuple[str, ...], error: type[Exception] = ValueError) -> None:
    """Constructor options raise ValueError; per-call ones a JevError naming the field; a method
    that does not exist is always an UnsupportedMethodError."""
    if value in allowed:
        return
    message = f"must be one of {list(allowed)}, got {value!r}"
    if name == "method":
        raise UnsupportedMethodError(f"{name}: {message}")
    raise error(message, field=name) if error is InvalidQuestionError else error(f"{name}: {message}")


#: The longest total timeout a call may set (seconds, about 11.6 days): a thread's wait takes at most
#: ``threading.TIMEOUT_MAX`` (49.7 days on Windows) and a wall-clock deadline must fit the platform's time_t
#: (``timeout=1e10`` was an OverflowError out of the sync client's first wait).
MAX_TIMEOUT_S = 1_000_000


def check_timeout(value: Any, error: type[Exception]) -> None:
    """A total timeout is None or a finite number of seconds above 0, at most :data:`MAX_TIMEOUT_S`."""
    if value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
            or value > MAX_TIMEOUT_S):
        message = f"must be None or a finite number of seconds > 0 and <= {MAX_TIMEOUT_S:,}, got {value!r}"
        raise error(message, field="timeout") if error is InvalidQuestionError else error(f"timeout: {message}")


def _check_count(name: str, value: Any, least: int, error: type[Exception] = ValueError) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        message = f"must be an integer >= {least}, got {value!r}"
        raise error(message, field=name) if error is InvalidQuestionError else error(f"{name}: {message}")
