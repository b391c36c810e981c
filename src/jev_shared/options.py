"""Options: every knob of a client, validated once, as one frozen value (like httpx's ``Timeout``).

A client holds one :class:`Options`; each call derives its own with :meth:`Options.for_call`
(method, mode and labels may be set per call). Constructor mistakes raise ``ValueError`` (and
``UnsupportedMethodError`` for the method); per-call ones an :class:`InvalidQuestionError`
naming the field, before any request is sent.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .answers import ConfidenceKind
from .errors import InvalidQuestionError, UnsupportedMethodError
from .methods import METHODS, MethodConfig
from .prompt import LAYOUTS
from .questions import Example
from .registry import APIS, HOSTED
from .transport import RetryPolicy

MODES = ("system1", "system2", "auto")
LABEL_STYLES = ("letters", "names")
CONFIDENCES = ("peak", "entropy")
MISSING = ("zero", "floor")

Examples = list[Example] | Mapping[str, list[Example]] | None


@dataclass(frozen=True)
class Options:
    """What a client was configured with; the defaults are the client constructor's."""

    model: str
    method: str = "auto"
    mode: str = "system1"
    auto_threshold: float = 0.7
    api: str = "auto"
    confidence: ConfidenceKind = "peak"
    top_logprobs: int = 20
    max_concurrency: int = 8
    n_retry_malformed: int = 1
    thinking: bool | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    layout: str = "auto"
    labels: str = "names"
    missing: str = "zero"
    examples: Examples = None
    strict_labels: bool = False
    #: "auto": content-free calibration for a question without examples, on a model where it was
    #: measured to win (the embedded default; the client resolves it), else off (docs/decisions.md)
    debias: bool | str = "auto"
    normalize_probabilities: bool = True
    structured_outputs: bool = True
    max_retries: int = 3
    timeout: float | None = None
    debug: bool = False
    #: Set per call by the client, not by users: the first token id of each answer word's spellings,
    #: where the server reads those tokens exactly (``LocalServer``'s llama.cpp, :mod:`exact`).
    token_ids: Mapping[str, int] | None = None
    #: With ``token_ids``: each answer word's own token ids, so a shared prefix is read on exactly too.
    token_paths: Mapping[str, tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        check_choice("method", self.method, METHODS)
        check_choice("mode", self.mode, MODES)
        check_choice("api", self.api, APIS)
        check_choice("confidence", self.confidence, CONFIDENCES)
        check_choice("layout", self.layout, LAYOUTS)
        check_choice("missing", self.missing, MISSING)
        check_choice("labels", self.labels, LABEL_STYLES)
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
        return dataclasses.replace(
            self, method=method or self.method, mode=mode or self.mode, labels=labels or self.labels,
            layout=layout or self.layout, top_logprobs=self.top_logprobs if top_logprobs is None else top_logprobs,
            max_concurrency=max_concurrency or self.max_concurrency)

    @property
    def hosted(self) -> bool:
        """The questions are answered by a service (System One, Decisions), not read from an LLM."""
        return self.api in HOSTED

    @property
    def method_config(self) -> MethodConfig:
        """The narrow view the methods stage reads."""
        return MethodConfig(self.top_logprobs, self.thinking, self.structured_outputs, self.token_ids)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_retries=self.max_retries)


def check_choice(name: str, value: Any, allowed: tuple[str, ...], error: type[Exception] = ValueError) -> None:
    """Constructor options raise ValueError; per-call ones a JevError naming the field; a method
    that does not exist is always an UnsupportedMethodError."""
    if value in allowed:
        return
    message = f"must be one of {list(allowed)}, got {value!r}"
    if name == "method":
        raise UnsupportedMethodError(f"{name}: {message}")
    raise error(message, field=name) if error is InvalidQuestionError else error(f"{name}: {message}")


def check_timeout(value: Any, error: type[Exception]) -> None:
    """A total timeout is None or a finite number of seconds above 0 (inf would overflow the thread wait)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        message = f"must be None or a finite number of seconds > 0, got {value!r}"
        raise error(message, field="timeout") if error is InvalidQuestionError else error(f"timeout: {message}")


def _check_count(name: str, value: Any, least: int, error: type[Exception] = ValueError) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        message = f"must be an integer >= {least}, got {value!r}"
        raise error(message, field=name) if error is InvalidQuestionError else error(f"{name}: {message}")
