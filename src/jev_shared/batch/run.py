"""Batch decisions: many states, the same questions, bounded concurrency, a failure kept per item.

Deciding a backlog is a loop, a pool, bookkeeping and an output file that everybody wrote by hand;
this is the loop and the pool. One engine client serves the whole batch, so what it learns about
its provider (the surface, refused fields) is learnt once. The questions are checked once, before
any request; after that nothing ends the run: an item that fails keeps its typed error.

    from jev_shared.batch import decide_batch, stream_batch

    result = decide_batch(client, [("t1", "I was charged twice"), ("t2", "The app crashes")], questions)
    result.results[0].response.answers["team"].choice, result.totals.decisions_per_s
    for r in stream_batch(client, items, questions, concurrency=8):   # as they finish, tagged with r.id
        ...

``concurrency`` bounds the items in flight; each item's questions run under the client's own
``max_concurrency``, so requests in flight are at most ``concurrency * min(n_questions, max_concurrency)``.
The async twins (``adecide_batch``, ``astream_batch``) take an ``AsyncSystemOneClient``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from jev_shared.answers import SystemOneResponse
from jev_shared.errors import InvalidQuestionError, wire_error

#: In input order, finished items may wait this many times ``concurrency`` for a slow one ahead of them.
ORDER_LOOKAHEAD = 4


@dataclass(frozen=True)
class Item:
    """One state to decide, with the id its answer is tagged with (and its true answers, where the input has them)."""

    id: Any
    state: Any
    #: ``{question id: label}``, carried onto the item's log line (``jev decide --label``); None: unlabelled.
    labels: dict[str, Any] | None = None


def as_item(value: Any, index: int) -> Item:
    """An ``Item``, an ``(id, state)`` pair, a ``{"id", "state"}`` mapping (``"labels"`` too), or a bare state
    (id = its index)."""
    if isinstance(value, Item):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Item(value[0], value[1])
    if isinstance(value, Mapping) and "state" in value and set(value) <= {"id", "state", "labels"}:
        return Item(value.get("id", index), value["state"], value.get("labels"))
    return Item(index, value)


def error_body(exc: BaseException) -> dict[str, Any]:
    """The error as ``jev serve`` would put it on the wire (the engine's own ``wire_error``), plus its class."""
    body = wire_error(exc)
    body["exception"] = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if status is not None:
        body["status_code"] = status
    return body


@dataclass
class ItemResult:
    """One item's outcome: its response, or the typed error that stopped it (never both)."""

    id: Any
    index: int
    response: SystemOneResponse | None = None
    error: Exception | None = None
    latency_s: float = 0.0
    #: The item's labels, written on its line as ``"labels"`` (only where it has some).
    labels: dict[str, Any] | None = None
    #: The item's state, written on its line as ``"state"`` where it was kept (``jev decide --keep-states``), so
    #: ``jev calibrate`` can measure each question's lean over the states a run saw.
    state: Any = None
    #: The model whose shipped calibration gave the answers, written on a labelled line as ``"shipped_calibration"``
    #: (``jev decide --label``), so ``jev calibrate`` fits on top of that calibration rather than replacing it.
    shipped_calibration: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """``{"id", "answers", "error", "usage"}``: answers as the System One response has them; ``"labels"``
        too where the item has them (and ``"shipped_calibration"`` where one gave its answers)."""
        if self.response is None:
            line = {"id": self.id, "answers": None, "error": error_body(self.error or RuntimeError("no answer")),
                    "usage": None}
        else:
            dumped = self.response.model_dump(mode="json", exclude={"debug"})
            line = {"id": self.id, "answers": dumped["answers"], "error": None, "usage": dumped["usage"]}
        if self.labels:
            line["labels"] = self.labels
            if self.shipped_calibration is not None:
                line["shipped_calibration"] = self.shipped_calibration
        return line if self.state is None else {**line, "state": self.state}


@dataclass
class BatchTotals:
    """What the batch cost and did so far: items, decisions (answered questions), tokens, calls, time."""

    answered: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    decisions: int = 0
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    n_calls: int = 0
    n_retries: int = 0
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None

    def add(self, result: ItemResult) -> None:
        if result.response is None:
            self.failed[error_body(result.error)["type"] if result.error else "internal_error"] += 1
            self.n_retries += int(getattr(result.error, "n_retries", 0) or 0)
            return
        usage = result.response.usage
        self.answered += 1
        self.decisions += len(result.response.answers)
        self.input_tokens = None if self.input_tokens is None or usage.input_tokens is None else \
            self.input_tokens + usage.input_tokens
        self.output_tokens = None if self.output_tokens is None or usage.output_tokens is None else \
            self.output_tokens + usage.output_tokens
        self.n_calls += usage.n_calls
        self.n_retries += usage.n_retries

    @property
    def wall_s(self) -> float:
        return (self.finished or time.perf_counter()) - self.started

    @property
    def decisions_per_s(self) -> float:
        return self.decisions / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def items_per_s(self) -> float:
        done = self.answered + sum(self.failed.values())
        return done / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"answered": self.answered, "failed": dict(self.failed), "decisions": self.decisions,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "n_calls": self.n_calls,
                "n_retries": self.n_retries, "wall_s": round(self.wall_s, 3),
                "decisions_per_s": round(self.decisions_per_s, 3), "items_per_s": round(self.items_per_s, 3)}


@dataclass
class BatchResult:
    """Every item's result in input order, and the totals."""

    results: list[ItemResult]
    totals: BatchTotals

    @property
    def failed(self) -> list[ItemResult]:
        return [r for r in self.results if not r.ok]


#: The per-call options ``client.check`` validates along with the questions.
CHECKED_OPTIONS = frozenset({"method", "mode", "labels", "examples", "layout", "top_logprobs", "max_concurrency"})


def check_questions(client: Any, questions: Mapping[str, Any], method: str | None = None, **options: Any) -> None:
    """The questions (and the call's options) checked once up front by ``client.check`` (no I/O), so a
    bad one costs no request."""
    chosen = {k: v for k, v in {"method": method, **options}.items() if k in CHECKED_OPTIONS and v is not None}
    client.check(questions, **chosen)


def _check_concurrency(concurrency: int) -> None:
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise InvalidQuestionError(f"concurrency must be a positive int, got {concurrency!r}", field="concurrency")


class _Window:
    """Which items may start, and which finished ones may be handed out (in input order or as they finish)."""

    def __init__(self, concurrency: int, ordered: bool) -> None:
        self.concurrency, self.ordered = concurrency, ordered
        self.limit = concurrency * ORDER_LOOKAHEAD if ordered else concurrency
        self.running = 0
        self.buffer: dict[int, ItemResult] = {}
        self.next_index = 0
        self.started = 0
        self.exhausted = False

    def can_start(self) -> bool:
        return self.running < self.concurrency and self.running + len(self.buffer) < self.limit

    def starts(self, source: Iterator[Item]) -> Iterator[tuple[int, Item]]:
        """The (index, item) pairs that may start now; marks the source exhausted at its end."""
        while not self.exhausted and self.can_start():
            item = next(source, None)
            if item is None:
                self.exhausted = True
                return
            self.running += 1
            self.started += 1
            yield self.started - 1, item

    def hand_out(self, results: Iterable[ItemResult], totals: BatchTotals) -> list[ItemResult]:
        """What finished, in the order the window hands it out, counted in the totals."""
        out = [r for done in sorted(results, key=lambda r: r.index) for r in self.finish(done)]
        for result in out:
            totals.add(result)
        return out

    def finish(self, result: ItemResult) -> list[ItemResult]:
        self.running -= 1
        if not self.ordered:
            return [result]
        self.buffer[result.index] = result
        out = []
        while self.next_index in self.buffer:
            out.append(self.buffer.pop(self.next_index))
            self.next_index += 1
        return out


def _timed(result: ItemResult, started: float) -> ItemResult:
    result.latency_s = time.perf_counter() - started
    return result


def _decide_one(client: Any, index: int, item: Item, questions: Mapping[str, Any], kw: dict[str, Any]) -> ItemResult:
    started = time.perf_counter()
    try:
        return _timed(ItemResult(item.id, index, response=client.system_one(item.state, questions, **kw),
                                 labels=item.labels), started)
    except Exception as exc:  # every failure stays with its item; KeyboardInterrupt still ends the run
        return _timed(ItemResult(item.id, index, error=exc, labels=item.labels), started)


async def _adecide_one(client: Any, index: int, item: Item, questions: Mapping[str, Any],
                       kw: dict[str, Any]) -> ItemResult:
    started = time.perf_counter()
    try:
        return _timed(ItemResult(item.id, index, response=await client.system_one(item.state, questions, **kw),
                                 labels=item.labels), started)
    except Exception as exc:
        return _timed(ItemResult(item.id, index, error=exc, labels=item.labels), started)


def stream_batch(client: Any, items: Iterable[Any], questions: Mapping[str, Any], *, concurrency: int = 4,
                 ordered: bool = False, totals: BatchTotals | None = None, **call_kw: Any) -> Iterator[ItemResult]:
    """Decide each item with a ``SystemOneClient``; yield results as they finish (or in input order).

    ``items`` is consumed lazily, ``concurrency`` at a time; ``totals`` (if given) is updated as results
    are yielded; ``call_kw`` goes to every ``system_one`` call (``timeout``, ``method``, ...). Bad
    questions or concurrency raise here, before the first request.
    """
    _check_concurrency(concurrency)
    check_questions(client, questions, **call_kw)
    return _stream(client, items, questions, concurrency, ordered, totals or BatchTotals(), call_kw)


def _stream(client: Any, items: Iterable[Any], questions: Mapping[str, Any], concurrency: int, ordered: bool,
            totals: BatchTotals, call_kw: dict[str, Any]) -> Iterator[ItemResult]:
    source = (as_item(v, i) for i, v in enumerate(items))
    window, pending = _Window(concurrency, ordered), set[Future[ItemResult]]()
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="jev-batch")
    try:
        while True:
            pending |= {pool.submit(_decide_one, client, i, item, questions, call_kw) for i, item in window.starts(source)}
            if not pending:
                break
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from window.hand_out((f.result() for f in done), totals)
    finally:
        totals.finished = time.perf_counter()
        pool.shutdown(wait=True, cancel_futures=True)


def decide_batch(client: Any, items: Iterable[Any], questions: Mapping[str, Any], *, concurrency: int = 4,
                 **call_kw: Any) -> BatchResult:
    """Every item decided; results in input order, failures kept per item; with the totals."""
    totals = BatchTotals()
    results = list(stream_batch(client, items, questions, concurrency=concurrency, ordered=True, totals=totals,
                                **call_kw))
    return BatchResult(results, totals)


def astream_batch(client: Any, items: Iterable[Any], questions: Mapping[str, Any], *, concurrency: int = 4,
                  ordered: bool = False, totals: BatchTotals | None = None,
                  **call_kw: Any) -> AsyncIterator[ItemResult]:
    """The async twin of :func:`stream_batch`, over an ``AsyncSystemOneClient`` (tasks, not threads)."""
    _check_concurrency(concurrency)
    check_questions(client, questions, **call_kw)
    return _astream(client, items, questions, concurrency, ordered, totals or BatchTotals(), call_kw)


async def _astream(client: Any, items: Iterable[Any], questions: Mapping[str, Any], concurrency: int, ordered: bool,
                   totals: BatchTotals, call_kw: dict[str, Any]) -> AsyncIterator[ItemResult]:
    source = (as_item(v, i) for i, v in enumerate(items))
    window, pending = _Window(concurrency, ordered), set[asyncio.Task[ItemResult]]()
    try:
        while True:
            pending |= {asyncio.ensure_future(_adecide_one(client, i, item, questions, call_kw))
                        for i, item in window.starts(source)}
            if not pending:
                break
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for result in window.hand_out((t.result() for t in done), totals):
                yield result
    finally:
        totals.finished = time.perf_counter()
        for task in pending:
            task.cancel()


async def adecide_batch(client: Any, items: Iterable[Any], questions: Mapping[str, Any], *, concurrency: int = 4,
                        **call_kw: Any) -> BatchResult:
    """The async twin of :func:`decide_batch`."""
    totals = BatchTotals()
    results = [r async for r in astream_batch(client, items, questions, concurrency=concurrency, ordered=True,
                                              totals=totals, **call_kw)]
    return BatchResult(results, totals)
