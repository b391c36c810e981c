"""The surface registry: every wire the engine speaks, one line each (see :mod:`.wire` for what a line holds).

Adding a wire is one module that builds a :class:`~jev_shared.wire.Surface` and one line in ``_WIRES``; the
flows, the memory, the transport and the options ask the registry, never a surface by name. Order matters
for ``auto=True`` surfaces: it is api="auto"'s preference order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..calls import Call
from ..errors import MalformedReplyError
from .chat import CHAT_SURFACE
from .common import check_types
from .messages import MESSAGES_SURFACE
from .responses import RESPONSES_SURFACE
from .sglang import SGLANG_SURFACE
from .vllm import VLLM_SURFACE
from .wire import Parsed, Surface

_WIRES: tuple[Surface, ...] = (
    RESPONSES_SURFACE,
    CHAT_SURFACE,
    MESSAGES_SURFACE,
    VLLM_SURFACE,  # served engines reading the labels' own token ids (api="vllm" / "sglang", served.py)
    SGLANG_SURFACE,
    # whole-call wires: hosted.py builds and reads them
    Surface("systemone", ("post",), logprobs=False, auto=False, per_question=False),
    Surface("decisions", ("decisions", "create"), logprobs=False, auto=False, per_question=False),
)

SURFACES: dict[str, Surface] = {s.name: s for s in _WIRES}
#: api="auto"'s preference order
AUTO_ORDER: tuple[str, ...] = tuple(s.name for s in _WIRES if s.auto and s.per_question)
#: every api= value: "auto" and each registered surface
APIS: tuple[str, ...] = ("auto", *SURFACES)
HOSTED: tuple[str, ...] = tuple(s.name for s in _WIRES if not s.per_question)
#: the HTTP route of each surface an SDK client's own ``post`` can reach (transport's lean path)
ROUTES: dict[str, str] = {s.name: s.route for s in _WIRES if s.route}


def surface(name: str) -> Surface:
    return SURFACES[name]


def has_path(client: Any, name: str) -> bool:
    """Whether ``client`` has the surface's method (``client.chat.completions.create``, …)."""
    obj = client
    for part in SURFACES[name].path:
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return callable(obj)


def speaks(client: Any, named: Sequence[str] | None = None) -> tuple[str, ...]:
    """The per-question surfaces a client has: api="auto"'s order, then any other surface ``named``.

    A client that says which surfaces to use (``named``: the backend's own list, e.g. ``LocalServer``'s)
    is taken at its word, so api="auto" pays for no discovery (no Responses try, no scout)."""
    spoken = tuple(s for s in AUTO_ORDER if has_path(client, s))
    if named is None:
        return spoken
    extra = tuple(s for s in named if s in SURFACES and s not in AUTO_ORDER and SURFACES[s].per_question
                  and has_path(client, s))
    kept = tuple(s for s in spoken if s in named) + extra
    return kept or spoken


def first_with(speaks: Sequence[str], what: str) -> str | None:
    """The first spoken surface for which the :class:`Surface` flag ``what`` (prefill, grammar, …) holds."""
    return next((s for s in speaks if getattr(SURFACES[s], what)), None)


def fallback_of(name: str, speaks: Sequence[str]) -> str | None:
    """Where api="auto" re-asks from ``name`` (a missing route, no distribution), if the client speaks it."""
    target = SURFACES[name].fallback
    return target if target is not None and target in speaks else None


def build_call(name: str, model: str, messages: list[dict[str, Any]], fields: dict[str, Any],
               extra: dict[str, Any], user_extra: dict[str, Any] | None = None) -> Call:
    build = SURFACES[name].build
    assert build is not None, f"{name} is a whole-call wire"
    return build(model, messages, fields, extra, user_extra)


def parse_reply(name: str, body: dict[str, Any]) -> Parsed:
    """The reply in the common shape; one whose fields have the wrong types is a provider fault."""
    parse = SURFACES[name].parse
    assert parse is not None, f"{name} is a whole-call wire"
    try:
        parsed = parse(body)
        check_types(parsed)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
        raise MalformedReplyError(f"the {name} reply does not have the documented shape "
                                  f"({type(exc).__name__}: {exc})", status_code=200) from None
    return parsed


__all__ = ["APIS", "AUTO_ORDER", "HOSTED", "ROUTES", "SURFACES", "Surface", "build_call", "fallback_of", "first_with",
           "has_path", "parse_reply", "speaks", "surface"]
