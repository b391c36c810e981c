"""Preparation: the one-time costs paid up front (``client.prepare``), and the requests a call would send
(``client.preview``), so a service, a batch run or a dry run need not reach into the engine's stages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .answers import SystemOneResponse
from .calls import Flow, Prompt
from .priors import CONTENT_FREE
from .questions import Prepared
from .redact import redact

#: The state ``prepare`` decides about when none is given: the first content-free state, whose prompt
#: is the very prefix the priors measure (so the server's cache serves both).
PREPARE_STATE = CONTENT_FREE[0]


@dataclass(frozen=True)
class Preparation:
    """What ``prepare`` did: the questions, the provider calls it made (of which the debias priors), the time."""

    questions: list[str]
    calls: int
    prior_calls: int
    seconds: float
    apis: dict[str, str] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, resp: SystemOneResponse, seconds: float) -> Preparation:
        debug = resp.debug or {}
        return cls(questions=list(resp.answers), calls=resp.usage.n_calls,
                   prior_calls=sum((debug.get("prior_calls") or {}).values()), seconds=seconds,
                   apis=dict(debug.get("apis") or {}), methods=dict(debug.get("methods") or {}))

    @classmethod
    def nothing(cls, questions: Mapping[str, Any]) -> Preparation:
        """A hosted service learns nothing on our side: the questions were checked, no call was made."""
        return cls(questions=list(questions), calls=0, prior_calls=0, seconds=0.0)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (f"prepared {len(self.questions)} question(s): {self.calls} call(s), {self.prior_calls} for the "
                f"priors, {self.seconds:.1f} s")


def preview_calls(preps: Sequence[Prepared], flows: Sequence[Flow[Any]],
                  tokenize: Callable[[str], Any] | None) -> list[dict[str, Any]]:
    """Each flow's first request, taken without sending it (a flow does no I/O until it is sent a reply)."""
    hosted = len(flows) == 1 and len(preps) > 1
    out = []
    for i, flow in enumerate(flows):
        call = next(flow)
        flow.close()
        ids = [p.id for p in preps] if hosted else [preps[i].id]
        out.append({"questions": ids, "surface": call.surface, "path": ".".join(call.path),
                    "request": redact(call.kwargs), "input_tokens": _count(call.prompt, tokenize)})
    return out


def _count(prompt: Prompt | None, tokenize: Callable[[str], Any] | None) -> int | None:
    """Tokens of the prompt's texts in the server's tokenizer (the chat template adds a few per turn); a hosted
    call, which carries the state and questions rather than a prompt, counts none."""
    if tokenize is None:
        return None
    texts = [m.get("content") for m in (prompt.messages if prompt is not None else [])]
    try:
        return sum(len(tokenize(t)) for t in texts if isinstance(t, str))
    except Exception:  # noqa: BLE001 - a tokenizer that fails leaves the count unknown
        return None
