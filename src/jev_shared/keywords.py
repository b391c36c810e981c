"""The public clients' constructor keywords, turned into the few typed values the client core is built from.

``SystemOneClient(client, model=..., method=..., ...)`` keeps every keyword it had (with the same defaults);
they become one :class:`~jev_shared.options.Options` (checked once), and the backend, memory, calibrator and
decision sets pass through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .answers import ConfidenceKind
from .backend import Backend
from .calibration import Calibrator
from .decision_sets import DecisionSets
from .memory import Memory
from .options import Examples, Options


class Keywords:
    """Mixed in before the client core: ``__init__`` takes the keywords, the core's ``__init__`` the values."""

    def __init__(
        self, client: Any, *, model: str, method: str = "auto", mode: str = "system1", auto_threshold: float = 0.7,
        api: str = "auto", confidence: ConfidenceKind = "peak", top_logprobs: int = 20, max_concurrency: int = 8,
        n_retry_malformed: int = 1, thinking: bool | None = None, extra_body: dict[str, Any] | None = None,
        layout: str = "auto", labels: str = "names", missing: str = "zero", examples: Examples = None,
        strict_labels: bool = False, debias: bool | str = "auto", normalize_probabilities: bool = True,
        structured_outputs: bool = True, max_retries: int = 3, timeout: float | None = None, debug: bool = False,
        calibrator: Calibrator | str | None = "auto", memory: Memory | None = None,
        sets: DecisionSets | Mapping[str, DecisionSets] | None = None, backend: Backend | None = None,
        order: str = "auto",
    ) -> None:
        options = Options.checked(
            model=model, method=method, mode=mode, auto_threshold=auto_threshold, api=api, confidence=confidence,
            top_logprobs=top_logprobs, max_concurrency=max_concurrency, n_retry_malformed=n_retry_malformed,
            thinking=thinking, extra_body=extra_body or {}, layout=layout, labels=labels, missing=missing,
            examples=examples, strict_labels=strict_labels, debias=debias,
            normalize_probabilities=normalize_probabilities, structured_outputs=structured_outputs,
            max_retries=max_retries, timeout=timeout, debug=debug, order=order)
        super().__init__(client, options, backend, memory, calibrator, sets)  # type: ignore[call-arg]


__all__ = ["Keywords"]
