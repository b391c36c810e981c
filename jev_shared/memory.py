"""Memory: what one client learned about its provider, shared by every call and question it runs.

Questions run on threads (sync) or tasks (async) at once, so every read and write takes the lock
inside; callers name what they learned or want to know, never the sets behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from .surfaces import CHAT

Key = tuple[str, str]  # (model, surface)


class Memory:
    """method=auto verdicts, refused fields, missing routes, debias priors and scouted models."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._no_logprobs: set[Key] = set()  # method=auto answers these with structured
        self._strikes: dict[Key, int] = {}
        self._refused: dict[Key, set[str]] = {}  # request fields the server refuses
        self._missing_routes: set[str] = set()  # surfaces that answered 404 under api="auto"
        self._no_distribution: set[Key] = set()  # Responses routes whose readout carries no distribution
        self._priors: dict[tuple[str, ...], list[list[float]]] = {}  # debias: each prompt's prior answers
        self._scouted: set[str] = set()  # models that answered a call: api="auto" knows their surface

    # -- which surface and method -----------------------------------------------------------------

    def surface_for(self, model: str, method: str, api: str, speaks: Sequence[str]) -> str:
        """api='auto': Responses, then Chat Completions, then Messages, skipping what was learned missing."""
        if api != "auto":
            return api
        if method == "grammar" and CHAT in speaks:
            return CHAT
        with self._lock:
            for surface in speaks:
                # a Responses route that cannot carry logprobs is a compatibility layer (llama.cpp, ollama,
                # LM Studio) that also ignores text.format: once seen, the model's whole traffic moves
                if surface not in self._missing_routes and (model, surface) not in self._no_distribution:
                    return surface
        return speaks[0]  # the verdict only skips a route when there is another to move to

    def needs_scout(self, model: str, api: str, speaks: Sequence[str], n_questions: int) -> bool:
        """api='auto', a model not seen yet: one question finds the surface before the others follow.

        Otherwise every question of the first call would try the Responses route at once, and on a
        server that cannot carry a distribution there (llama.cpp, ollama) each would fail and move.
        """
        with self._lock:
            return api == "auto" and n_questions > 1 and len(speaks) > 1 and model not in self._scouted

    def mark_scouted(self, model: str) -> None:
        """An answered call settled the model's surface: no more scouts."""
        with self._lock:
            self._scouted.add(model)

    def mark_route_missing(self, surface: str) -> None:
        with self._lock:
            self._missing_routes.add(surface)

    def mark_no_distribution(self, key: Key) -> None:
        with self._lock:
            self._no_distribution.add(key)

    def answers_with_structured(self, key: Key) -> bool:
        """method=auto learned that this model and surface give no logprobs."""
        with self._lock:
            return key in self._no_logprobs

    def mark_no_logprobs(self, key: Key) -> None:
        """The server refused a readout field: that is proof, remembered at once."""
        with self._lock:
            self._no_logprobs.add(key)

    def strike(self, key: Key) -> None:
        """Weak evidence (a 200 without logprobs): remembered the second time."""
        with self._lock:
            self._strikes[key] = self._strikes.get(key, 0) + 1
            if self._strikes[key] >= 2:
                self._no_logprobs.add(key)

    def clear_strikes(self, key: Key) -> None:
        """A readable distribution proves the surface can."""
        with self._lock:
            self._strikes.pop(key, None)

    # -- refused request fields -------------------------------------------------------------------

    def refuse(self, key: Key, name: str) -> None:
        with self._lock:
            self._refused.setdefault(key, set()).add(name)

    def refused_on(self, key: Key) -> set[str]:
        with self._lock:
            return set(self._refused.get(key, ()))

    def limits(self, model: str) -> list[str]:
        """Every field any surface of ``model`` refused (``debug["server_limits"]``)."""
        with self._lock:
            return sorted({name for (m, _), names in self._refused.items() if m == model for name in names})

    # -- debias priors ----------------------------------------------------------------------------

    def prior_for(self, key: tuple[str, ...]) -> list[list[float]] | None:
        with self._lock:
            return self._priors.get(key)

    def store_prior(self, key: tuple[str, ...], rows: list[list[float]]) -> None:
        with self._lock:
            self._priors[key] = rows
