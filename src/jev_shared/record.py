"""Record: what each question's flow observed, and the response assembled from all of them.

A flow writes only to its own :class:`Record` (usage, diagnostics, and with ``debug`` every
attempt, credentials redacted); :func:`assemble` turns the records and answers into the
:class:`SystemOneResponse` with its ``debug`` dict.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from .answers import Answer, SystemOneResponse, Usage, plus_tokens
from .questions import Prepared
from .redact import redact

log = logging.getLogger("jev_shared")


class Tally:
    """A question's usage as its flow counts it (``Usage``'s counts and ``add_tokens``), in plain attributes: each
    assignment to a pydantic ``Usage`` ran its validator's setattr, four a request. The response's one
    ``Usage`` is built from the tallies (:func:`_summed`)."""

    __slots__ = ("input_tokens", "n_calls", "n_retries", "output_tokens")

    def __init__(self) -> None:
        self.input_tokens: int | None = 0
        self.output_tokens: int | None = 0
        self.n_calls = 0
        self.n_retries = 0

    def add_tokens(self, input_tokens: int | None, output_tokens: int | None) -> None:
        self.input_tokens = plus_tokens(self.input_tokens, input_tokens)
        self.output_tokens = plus_tokens(self.output_tokens, output_tokens)


@dataclass
class Record:
    """What one question's flow observed: usage, diagnostics, and (with debug) every attempt."""

    debug: bool
    usage: Tally = field(default_factory=Tally)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    retry_reasons: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    readout: dict[str, Any] = field(default_factory=dict)
    escalation: dict[str, Any] | None = None
    passed: str = "system1"
    labels_used: str | None = None
    labels_note: str | None = None
    surfaces: list[str] = field(default_factory=list)
    prior: dict[str, float] | None = None
    prior_calls: int = 0  # one-time calls that measured the debias prior (client.prepare pays them)
    #: The examples' own answers (each asked with others as its examples, divided by their prior) and their
    #: true keys: labelled answers that calibrate this very question (client.py, calibration.examples_calibrator).
    labelled: list[tuple[list[float], str]] | None = None

    def note(self, kind: str, payload: Any) -> None:
        """Keep a request or response for ``debug["questions"]`` (redacted), and log it at debug level."""
        if self.debug:
            entry = {"kind": kind, "data": redact(payload)}
            self.attempts.append(entry)
            log.debug("jev %s: %s", kind, entry["data"])


def hosted_records(preps: list[Prepared], rec: Record, api: str) -> list[Record]:
    """One record per question for the response's debug; the call's usage sits on the first."""
    records = [rec] + [Record(rec.debug) for _ in preps[1:]]
    for r in records:
        r.methods.append(api)
        r.surfaces.append(api)
    return records


def assemble(model: str, preps: list[Prepared], answers: list[Answer], records: list[Record], *,
             server_limits: list[str], started: float, debug: bool) -> SystemOneResponse:
    """The response: answers in question order, usage summed, and the debug dict."""
    usage = _summed(records, (time.perf_counter() - started) * 1000.0)
    apis = {p.id: r.surfaces[-1] for p, r in zip(preps, records) if r.surfaces}
    dbg: dict[str, Any] = {"api": next(iter(set(apis.values()))) if len(set(apis.values())) == 1 else "mixed",
                           "apis": apis, "methods": {}, "passes": {}, "labels_missing": {}, "no_signal": [],
                           "truncated": [], "retry_reasons": {}, "server_limits": server_limits}
    for p, r in zip(preps, records):
        dbg["methods"][p.id] = r.methods[-1]
        dbg["passes"][p.id] = r.passed
        for name, value in (("labels_missing", r.readout.get("labels_missing")), ("retry_reasons", r.retry_reasons),
                            ("labels", r.labels_used), ("labels_fallback", r.labels_note),
                            ("escalations", r.escalation), ("priors", r.prior), ("prior_calls", r.prior_calls)):
            if value:
                dbg.setdefault(name, {})[p.id] = value
        for flag in ("no_signal", "truncated"):
            if r.readout.get(flag):
                dbg[flag].append(p.id)
    if debug:
        dbg["questions"] = {p.id: {"readout": r.readout, "attempts": r.attempts} for p, r in zip(preps, records)}
    return SystemOneResponse(model=model, answers=dict(zip((p.id for p in preps), answers)), usage=usage, debug=dbg)


def _summed(records: list[Record], latency_ms: float) -> Usage:
    """The records' usage summed as ``Usage.merge`` sums it (a token count one of them lacks is None), built
    once: each assignment to a pydantic model runs its validator's setattr."""
    tokens_in: int | None = 0
    tokens_out: int | None = 0
    calls = retries = 0
    for rec in records:
        u = rec.usage
        tokens_in = None if tokens_in is None or u.input_tokens is None else tokens_in + u.input_tokens
        tokens_out = None if tokens_out is None or u.output_tokens is None else tokens_out + u.output_tokens
        calls += u.n_calls
        retries += u.n_retries
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out, n_calls=calls, n_retries=retries,
                 latency_ms=latency_ms)
