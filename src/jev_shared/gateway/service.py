"""The gateway's state and its one job: answer a System One request within its limits.

Every limit is checked before the engine is called, so a refused request costs no backend call:
the questions per request (422), the gateway's requests in flight (429), and the backend calls one
key holds in flight (429). A request holds ``min(questions, max_concurrency)`` call slots of its
key: the engine never has more of one request's calls in flight than that.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any

from jev_shared import SystemOneResponse, wire_error

from .config import GatewayConfig
from .engines import EnginePool
from .errors import api_error
from .kept_states import StateLog
from .observe import Metrics
from .schema import OptionConflictError, SystemOneRequest, resolve_options

#: The per-key count of callers without a key (loopback mode): they share one budget.
ANONYMOUS = ""
LOG = logging.getLogger("jev_shared.gateway")


class Gateway:
    """The state one app holds: config, engine clients, metrics, and what is in flight (total and per key)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.pool = EnginePool(config)
        self.metrics = Metrics()
        self.in_flight = 0
        self.key_calls: Counter[str] = Counter()
        #: False while ``--warm`` questions are being prepared (``/healthz`` answers 503 until then).
        self.ready = not config.warm
        self.warmed: dict[str, Any] = {}
        self.states = StateLog(config.keep_states, config.keep_states_max_bytes) if config.keep_states else None

    async def warm_up(self) -> None:
        """Prepare the ``--warm`` questions for every model, then say ready (a failure is logged, and
        the gateway serves anyway: the first requests pay what the preparation would have)."""
        try:
            if self.config.warm:
                preps = await self.pool.prepare(self.config.warm)
                self.warmed = {m: p.as_dict() for m, p in preps.items()}
                for model, prep in preps.items():
                    LOG.warning("jev serve: warmed %s: %s", model, prep)
        except Exception as exc:  # noqa: BLE001 - never keeps the gateway down
            LOG.error("jev serve: --warm failed (%s); serving without it", wire_error(exc)["message"])
            self.warmed = {"error": wire_error(exc)}
        finally:
            self.ready = True

    def _refuse_if_full(self, key: str, slots: int) -> None:
        cfg = self.config
        if self.in_flight >= cfg.max_in_flight:
            raise api_error("overloaded", f"the gateway is answering {self.in_flight} requests, its limit "
                                          "(--max-in-flight)", headers={"retry-after": str(cfg.retry_after_s)})
        if self.key_calls[key] + slots > cfg.max_calls_per_key:
            raise api_error("key_overloaded",
                            f"this key holds {self.key_calls[key]} backend calls in flight and this request needs "
                            f"{slots}; the limit is {cfg.max_calls_per_key} a key (--max-calls-per-key)",
                            headers={"retry-after": str(cfg.retry_after_s)})

    def _holding(self, who: str, slots: int) -> _Held:
        """A request slot and ``slots`` of ``who``'s call slots, held for the block (429 when full)."""
        return _Held(self, who, slots)

    def _take(self, who: str, slots: int) -> None:
        self._refuse_if_full(who, slots)
        self.in_flight += 1
        self.key_calls[who] += slots
        self.metrics.in_flight.inc()

    def _give(self, who: str, slots: int) -> None:
        self.in_flight -= 1
        self.key_calls[who] -= slots
        if not self.key_calls[who]:
            del self.key_calls[who]
        self.metrics.in_flight.dec()

    def decoding(self, presented: str | None) -> Any:
        """What a compressed body holds while it is decoded (``middleware.BodyLimit``): one request slot and
        one call slot of its key, so the in-flight and per-key limits (429) apply before any decoding."""
        return self._holding((presented if self.config.auth_required else None) or ANONYMOUS, 1)

    def _check_size(self, req: SystemOneRequest) -> None:
        limit = self.config.max_questions
        if len(req.questions) > limit:
            raise api_error("too_many_questions", f"{len(req.questions)} questions in one request; the limit is "
                                                  f"{limit} (--max-questions)", field="questions")

    async def respond(self, req: SystemOneRequest, key: str | None, noted: dict[str, Any],
                      keep_as: list[str] | None = None) -> SystemOneResponse:
        """The engine's response for ``req`` on behalf of ``key``, or an ApiError / engine error. With
        ``--keep-states``, the state is kept under each question's id, or under ``keep_as`` (the Decisions wire's
        names, in the questions' order)."""
        noted.update(model=req.model, n_questions=len(req.questions))
        self._check_size(req)
        try:
            opts, total = resolve_options(req, self.pool.defaults)
        except OptionConflictError as exc:
            raise api_error("invalid_request", str(exc), field=exc.field) from None
        conc = min(opts.max_concurrency, self.config.max_calls_per_key)
        client = self.pool.get(req.model, opts.timeout_seconds)
        timeout = min(total or self.config.default_timeout_s, self.config.max_timeout_s)
        with self._holding(key or ANONYMOUS, min(len(req.questions), conc)):
            resp = await client.system_one(req.state, req.questions, timeout=timeout, layout=opts.layout,
                                           top_logprobs=opts.top_logprobs, max_concurrency=conc)
        m = self.metrics
        m.child(m.backend_calls, req.model).inc(resp.usage.n_calls)
        m.child(m.backend_retries, req.model).inc(resp.usage.n_retries)
        m.child(m.questions, req.model).inc(len(resp.answers))
        if self.states is not None:  # a file it cannot write is logged; the answer still goes out
            try:
                await asyncio.to_thread(self.states.keep, req.state, keep_as or list(resp.answers))
            except (OSError, TimeoutError) as exc:
                LOG.error("jev serve: --keep-states %s: %s", self.states.path, exc)
        return resp

    async def answer_json(self, req: SystemOneRequest, key: str | None, noted: dict[str, Any]) -> bytes:
        """:meth:`respond` as the JSON bytes sent, serialised by pydantic in one step; with ``--calibration``
        sets, each answer they apply to carries its ``decision_set`` and ``abstains`` (.sets)."""
        resp = await self.respond(req, key, noted)
        if resp.model != req.model:
            resp = resp.model_copy(update={"model": req.model})
        cal = self.config.calibration
        if cal is None or not cal.sets:
            return resp.model_dump_json(exclude={"debug"}).encode()
        body = resp.model_dump(mode="json", exclude={"debug"})
        for qid, answer in resp.answers.items():
            body["answers"][qid].update(cal.wire(answer, qid) or {})
        return json.dumps(body, separators=(",", ":")).encode()


class _Held:
    """``Gateway._holding``'s block: a plain context manager (contextlib's generator-based one cost more than the
    counting it wraps)."""

    __slots__ = ("gw", "slots", "who")

    def __init__(self, gw: Gateway, who: str, slots: int) -> None:
        self.gw, self.who, self.slots = gw, who, slots

    def __enter__(self) -> None:
        self.gw._take(self.who, self.slots)

    def __exit__(self, *exc: object) -> None:
        self.gw._give(self.who, self.slots)
