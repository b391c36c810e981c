"""What the gateway says about itself: Prometheus metrics and one JSON access-log line per request.

Metrics live in a registry per app (not the process-global one), so two gateways in one process
(tests, a bench) count apart. The access log never holds a key: the bearer token is logged as a
short hash (``key_id``), every configured key is scrubbed from the line, and the line passes
through :func:`jev_shared.redact.redact`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from jev_shared.redact import REDACTED, SECRET_KEYS, redact, redact_text

ACCESS_LOG = logging.getLogger("jev_shared.gateway.access")
#: Bound label children kept (paths, statuses, models and error types are bounded sets; a guard besides).
MAX_CHILDREN = 4096
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The gateway's counters: requests, latency, backend calls, questions, errors by type, in flight."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("jev_gateway_requests", "HTTP requests answered", ["path", "status"], registry=r)
        self.latency = Histogram("jev_gateway_request_seconds", "Time to answer a request", ["path"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.backend_calls = Counter("jev_gateway_backend_calls", "Backend calls made for answered requests",
                                     ["model"], registry=r)
        self.backend_retries = Counter("jev_gateway_backend_retries", "Backend calls retried for answered requests",
                                       ["model"], registry=r)
        self.questions = Counter("jev_gateway_questions", "Questions answered", ["model"], registry=r)
        self.errors = Counter("jev_gateway_errors", "Error responses by type", ["type"], registry=r)
        self.in_flight = Gauge("jev_gateway_in_flight", "System One requests being answered", registry=r)
        self.refused = Counter("jev_gateway_connections_refused", "Connections the protocol answered and closed "
                               "itself (request_timeout, too_many_connections, bad_request)", ["type"], registry=r)

        self._children: dict[tuple[Any, ...], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, bound once and kept: a request counts without prometheus's label checks."""
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            if len(self._children) > MAX_CHILDREN:  # label values come from a bounded set; a guard all the same
                self._children.clear()
            found = self._children[key] = metric.labels(*labels)
        return found

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of a known secret (a configured or presented key) in ``text``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text


def access_line(fields: dict[str, Any], secrets: Iterable[str]) -> str:
    """One JSON line, redacted: secret-named fields, key-shaped strings, and the known keys.

    A line of plain fields (no secret-like name; every value a number, bool, None or text) with no escape in it
    (every text printable ASCII without quotes or backslashes: JSON writes it as it is) whose whole text
    :func:`redact_text` leaves alone is the line redacting each field would give: any text it would change in a
    field it changes in the line. That line is redacted once rather than field by field, which was most of the
    access line's cost; its checks are one cached look at the names, one at the values' types and one
    search of the line, not a check of each field."""
    if _plain_names(tuple(fields)) and _SCALARS.issuperset(map(type, fields.values())):
        line = _ENCODE(fields)
        if "\\" not in line and redact_text(line) == line:
            return scrub(line, secrets)
    line = json.dumps(redact(fields), separators=(",", ":"), default=str)
    return scrub(line, secrets)


#: The types of a plain field's value, and the line's encoder (one made for all lines, as ``json.dumps`` keeps
#: its own for its default settings only).
_SCALARS = frozenset({str, int, float, bool, type(None)})
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


@functools.lru_cache(maxsize=256)
def _plain_names(names: tuple[Any, ...]) -> bool:
    """Every name a text :func:`redact` leaves the value of (the line's names are a few fixed sets)."""
    return all(type(name) is str and SECRET_KEYS.search(name) is None for name in names)


def log_access(fields: dict[str, Any], secrets: Iterable[str]) -> None:
    """The line logged at INFO on :data:`ACCESS_LOG`, its record made and handled through the logger's public
    ``makeRecord`` and ``handle`` (its filters, handlers and propagation as ``info`` has them) with this function
    as its place: ``info`` walks the stack to find the caller, a quarter of logging the line."""
    if ACCESS_LOG.isEnabledFor(logging.INFO):
        line = access_line({"ts": round(time.time(), 3), **fields}, secrets)
        ACCESS_LOG.handle(ACCESS_LOG.makeRecord(ACCESS_LOG.name, logging.INFO, __file__, 0, line, (), None,
                                                "log_access"))
