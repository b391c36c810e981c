"""Memory: what the engine learned about its backends, shared by clients and kept across processes.

One :class:`Memory` holds, per backend (a fingerprint of where the client points, never the URL
itself), the method=auto verdicts, refused request fields, missing routes, debias priors and the
models whose surface is settled. Many clients may share one (questions run on threads and tasks at
once, so every read and write takes one lock); each client works through its backend's
:class:`BackendMemory`. ``save``/``load`` keep it as a small versioned JSON file of numbers,
names of fields and surfaces, and fingerprints: never a state, an example's text, a key or a URL.

:meth:`Memory.user_cache` is the per-user file (``$JEV_MEMORY_FILE``, else ``memory.json`` in
``files.cache_dir()``: ``$JEV_CACHE_DIR``, else the platform's cache folder, ``~/.cache/jev`` on Linux)
that LocalServer clients, ``jev decide`` and ``jev serve`` use by default, saved after each call that
learned something; ``JEV_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backend import Backend, fingerprint
from .files import FileReadError, caching_off, file_lock, memory_file, read_text, write_atomic
from .surfaces.registry import first_with

Key = tuple[str, str]  # (model, surface)
VERSION = 1
#: Debias priors kept per backend, the least recently used dropped first: a service asked ever new
#: questions (a reranker's per-query options, a gateway's callers) would otherwise grow the file, and
#: every save re-reads and re-writes it whole. 1,000 entries are about 0.5 MB.
MAX_PRIORS = 1000
#: The largest memory file read (a bigger one is a warning and an empty memory): 1,000 priors are ~0.5 MB.
MAX_FILE_BYTES = 16 * 1024 * 1024


class MemoryFileWarning(UserWarning):
    """A memory file that cannot be used (corrupt, truncated, another version): a fresh memory is used."""


def backend_fingerprint(client: Any) -> str:
    """Where a client points, as a fingerprint: its :class:`Backend`'s name (LocalServer sets a stable one,
    since its port changes every start), else its base URL without credentials, query or fragment."""
    return Backend.of(client).fingerprint(client)


@dataclass
class _Learned:
    """One backend's facts; the JSON shape of a memory file's entry."""

    no_logprobs: set[Key] = field(default_factory=set)  # method=auto answers these with structured
    strikes: dict[Key, int] = field(default_factory=dict)
    refused: dict[Key, set[str]] = field(default_factory=dict)  # request fields the server refuses
    missing_routes: set[str] = field(default_factory=set)  # surfaces that answered 404 under api="auto"
    no_distribution: set[Key] = field(default_factory=set)  # Responses routes that carry no distribution
    priors: dict[str, list[list[float]]] = field(default_factory=dict)  # prompt fingerprint -> rows
    scouted: set[str] = field(default_factory=set)  # models whose surface a call settled

    def to_json(self) -> dict[str, Any]:
        return {"no_logprobs": sorted(map(list, self.no_logprobs)),
                "strikes": sorted([m, s, n] for (m, s), n in self.strikes.items()),
                "refused": sorted([m, s, sorted(names)] for (m, s), names in self.refused.items()),
                "missing_routes": sorted(self.missing_routes),
                "no_distribution": sorted(map(list, self.no_distribution)),
                "priors": dict(self.priors), "scouted": sorted(self.scouted)}  # priors: least recent first

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> _Learned:
        """Strict: any entry of the wrong shape raises, and the whole file is set aside."""
        return cls(no_logprobs={_key(k) for k in obj["no_logprobs"]},
                   strikes={_key(e[:2]): _count(e[2]) for e in obj["strikes"]},
                   refused={_key(e[:2]): {_name(n) for n in e[2]} for e in obj["refused"]},
                   missing_routes={_name(s) for s in obj["missing_routes"]},
                   no_distribution={_key(k) for k in obj["no_distribution"]},
                   priors=_bounded({_name(fp): _rows(rows) for fp, rows in obj["priors"].items()}),
                   scouted={_name(m) for m in obj["scouted"]})

    def merge(self, other: _Learned) -> None:
        """Union with ``other`` (what another process saved); this side's priors win a tie and count as
        the most recently used."""
        self.no_logprobs |= other.no_logprobs
        for key, n in other.strikes.items():
            self.strikes[key] = max(n, self.strikes.get(key, 0))
        for key, names in other.refused.items():
            self.refused.setdefault(key, set()).update(names)
        self.missing_routes |= other.missing_routes
        self.no_distribution |= other.no_distribution
        theirs_only = {fp: rows for fp, rows in other.priors.items() if fp not in self.priors}
        self.priors = _bounded(theirs_only | self.priors)  # this process's entries the most recent
        self.scouted |= other.scouted


def _bounded(priors: dict[str, list[list[float]]]) -> dict[str, list[list[float]]]:
    """The :data:`MAX_PRIORS` most recent entries (a dict keeps them least recent first)."""
    return priors if len(priors) <= MAX_PRIORS else dict(list(priors.items())[-MAX_PRIORS:])


def _name(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _key(value: Any) -> Key:
    model, surface = value
    return _name(model), _name(surface)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("expected a count")
    return value


def _rows(rows: Any) -> list[list[float]]:
    out = [[float(p) for p in row] for row in rows]
    if not out or any(not row or any(not math.isfinite(p) or p < 0 for p in row) for row in out):
        raise ValueError("a prior row must hold finite probabilities")
    return out


def _fits(rows: list[list[float]], shape: tuple[int, int]) -> bool:
    """Rows of the shape a question needs, each of finite probabilities, none negative."""
    n_rows, width = shape
    return len(rows) == n_rows and all(len(r) == width and all(math.isfinite(p) and p >= 0 for p in r) for r in rows)


class Memory:
    """What the engine learned, per backend; shareable by clients, saved and loaded as a file."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        #: The file :meth:`flush` saves to (set by :meth:`load` and :meth:`user_cache`), or None.
        self.path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self._backends: dict[str, _Learned] = {}
        self._dirty = False

    def for_backend(self, backend: str) -> BackendMemory:
        """The view one client works through (``backend`` is :func:`backend_fingerprint` of its client)."""
        with self._lock:
            learned = self._backends.setdefault(backend, _Learned())
        return BackendMemory(self, learned)

    def __getattr__(self, name: str) -> Any:
        """A Memory answers for its default backend too (``surface_for``, ``prior_for``, ...), so a flow
        driven by hand, without a client, can be given one."""
        if name.startswith("_") or not hasattr(BackendMemory, name):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.for_backend(""), name)

    # -- files ------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"version": VERSION, "backends": {b: v.to_json() for b, v in sorted(self._backends.items())}}

    @classmethod
    def from_json(cls, obj: Any) -> Memory:
        """A memory from :meth:`to_json`'s value (e.g. sent to Ray actors); ValueError if it is not one."""
        if not isinstance(obj, dict) or obj.get("version") != VERSION:
            raise ValueError(f"not a version-{VERSION} memory value")
        memory = cls()
        try:
            memory._backends = {_name(b): _Learned.from_json(v) for b, v in obj["backends"].items()}
        except (TypeError, KeyError, AttributeError, IndexError) as exc:
            raise ValueError(f"not a memory value ({type(exc).__name__}: {exc})") from None
        return memory

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Memory:
        """The memory saved at ``path`` (saved back there by :meth:`flush`); a missing file is an empty
        memory, and one that cannot be used is a :class:`MemoryFileWarning` and an empty memory."""
        memory = cls(path)
        memory._backends = _read(Path(path))
        return memory

    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write atomically (a temporary file renamed over the old one), merged under a file lock with
        whatever another process saved there meanwhile, so two writers never lose or tear each other."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("Memory.save: no path (pass one, or make the memory with Memory.load(path))")
        if target.exists() and not target.is_file():  # /dev/zero, a FIFO, a folder: never replaced
            raise FileReadError(f"{target}: is not a regular file; the memory is not saved there")
        target.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(target), self._lock:
            for backend, theirs in _read(target, quiet=True).items():
                self._backends.setdefault(backend, _Learned()).merge(theirs)
            write_atomic(target, json.dumps(self.to_json(), indent=1) + "\n")
            self._dirty = False

    def flush(self) -> bool:
        """Save to :attr:`path` if something was learned since the last save; True when it wrote."""
        if self.path is None or not self._dirty:
            return False
        try:
            self.save()
        except OSError as exc:  # a read-only or full cache never fails a decision
            warnings.warn(f"jev: could not save memory to {self.path}: {exc}", MemoryFileWarning, stacklevel=2)
            self._dirty = False
            return False
        return True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def _touch(self) -> None:
        self._dirty = True

    @classmethod
    def user_cache(cls) -> Memory:
        """The per-user cache (one object per file in a process), or an in-process memory under JEV_NO_CACHE."""
        if caching_off():
            return cls()
        path = cache_path()
        with _USER_LOCK:
            memory = _USER.get(path)
            if memory is None:
                memory = _USER[path] = cls.load(path)
            return memory


def cache_path() -> Path:
    """``$JEV_MEMORY_FILE``, else ``memory.json`` in the per-user cache folder the embedded models use."""
    return memory_file()


_USER: dict[Path, Memory] = {}
_USER_LOCK = threading.Lock()


def _read(path: Path, *, quiet: bool = False) -> dict[str, _Learned]:
    try:
        text = read_text(path, MAX_FILE_BYTES)  # a regular file, bounded, never blocking (as a FIFO would)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return _set_aside(path, f"cannot be read ({exc})", quiet)
    try:
        obj = json.loads(text)
        if not isinstance(obj, dict) or obj.get("version") != VERSION:
            version = obj.get("version") if isinstance(obj, dict) else None
            return _set_aside(path, f"is version {version!r}, this engine reads version {VERSION}", quiet)
        return {_name(b): _Learned.from_json(v) for b, v in obj["backends"].items()}
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        return _set_aside(path, f"is not a memory file ({type(exc).__name__}: {exc})", quiet)


def _set_aside(path: Path, why: str, quiet: bool) -> dict[str, _Learned]:
    if not quiet:
        warnings.warn(f"jev: the memory file {path} {why}; starting with an empty memory (it is rewritten on the "
                      "next save)", MemoryFileWarning, stacklevel=3)
    return {}


class BackendMemory:
    """One backend's part of a :class:`Memory`: the names flows use, every one taking the lock."""

    def __init__(self, memory: Memory, learned: _Learned) -> None:
        self.memory = memory
        self._lock = memory._lock
        self._m = learned

    @contextmanager
    def _changing(self) -> Iterator[_Learned]:
        with self._lock:
            yield self._m
            self.memory._touch()

    # -- which surface and method -----------------------------------------------------------------

    def surface_for(self, model: str, method: str, api: str, speaks: Sequence[str]) -> str:
        """api='auto': Responses, then Chat Completions, then Messages, skipping what was learned missing."""
        if api != "auto":
            return api
        grammar = first_with(speaks, "grammar") if method == "grammar" else None
        if grammar is not None:
            return grammar
        with self._lock:
            for surface in speaks:
                # a Responses route that cannot carry logprobs is a compatibility layer (llama.cpp, ollama,
                # LM Studio) that also ignores text.format: once seen, the model's whole traffic moves
                if surface not in self._m.missing_routes and (model, surface) not in self._m.no_distribution:
                    return surface
        return speaks[0]  # the verdict only skips a route when there is another to move to

    def needs_scout(self, model: str, api: str, speaks: Sequence[str], n_questions: int) -> bool:
        """api='auto', a model not seen yet: one question finds the surface before the others follow.

        Otherwise every question of the first call would try the Responses route at once, and on a
        server that cannot carry a distribution there (llama.cpp, ollama) each would fail and move.
        """
        with self._lock:
            return api == "auto" and n_questions > 1 and len(speaks) > 1 and model not in self._m.scouted

    def mark_scouted(self, model: str) -> None:
        """An answered call settled the model's surface: no more scouts."""
        with self._lock:
            if model in self._m.scouted:
                return
        with self._changing() as m:
            m.scouted.add(model)

    def mark_route_missing(self, surface: str) -> None:
        with self._changing() as m:
            m.missing_routes.add(surface)

    def mark_no_distribution(self, key: Key) -> None:
        with self._changing() as m:
            m.no_distribution.add(key)

    def answers_with_structured(self, key: Key) -> bool:
        """method=auto learned that this model and surface give no logprobs."""
        with self._lock:
            return key in self._m.no_logprobs

    def mark_no_logprobs(self, key: Key) -> None:
        """The server refused a readout field: that is proof, remembered at once."""
        with self._changing() as m:
            m.no_logprobs.add(key)

    def strike(self, key: Key) -> None:
        """Weak evidence (a 200 without logprobs): remembered the second time."""
        with self._changing() as m:
            m.strikes[key] = m.strikes.get(key, 0) + 1
            if m.strikes[key] >= 2:
                m.no_logprobs.add(key)

    def clear_strikes(self, key: Key) -> None:
        """A readable distribution proves the surface can."""
        with self._lock:
            if key not in self._m.strikes:
                return
        with self._changing() as m:
            m.strikes.pop(key, None)

    # -- refused request fields -------------------------------------------------------------------

    def refuse(self, key: Key, name: str) -> None:
        with self._changing() as m:
            m.refused.setdefault(key, set()).add(name)

    def refused_on(self, key: Key) -> set[str]:
        with self._lock:
            return set(self._m.refused.get(key, ()))

    def limits(self, model: str) -> list[str]:
        """Every field any surface of ``model`` refused (``debug["server_limits"]``)."""
        with self._lock:
            return sorted({name for (m, _), names in self._m.refused.items() if m == model for name in names})

    # -- debias priors ----------------------------------------------------------------------------

    def prior_for(self, key: Sequence[Any], shape: tuple[int, int] | None = None) -> list[list[float]] | None:
        """The rows measured for a prompt (``key`` names model, surface, method, kind and the prompt).

        ``shape`` (rows, options) is what the question needs: rows of another shape (a file edited or
        from another version) are a :class:`MemoryFileWarning`, dropped, and measured again.
        """
        name = fingerprint(*key)
        with self._lock:
            rows = self._m.priors.pop(name, None)
            if rows is None:
                return None
            if shape is not None and not _fits(rows, shape):
                warnings.warn(f"jev: a remembered prior has {len(rows)} rows of {sorted({len(r) for r in rows})} "
                              f"options where the question needs {shape[0]} of {shape[1]}; it is ignored and "
                              "measured again", MemoryFileWarning, stacklevel=2)
                return None
            self._m.priors[name] = rows  # now the most recent (saved with the next change)
            return [list(r) for r in rows]

    def store_prior(self, key: Sequence[Any], rows: list[list[float]]) -> None:
        with self._changing() as m:
            name = fingerprint(*key)
            m.priors.pop(name, None)
            m.priors[name] = [list(r) for r in rows]
            if len(m.priors) > MAX_PRIORS:
                del m.priors[next(iter(m.priors))]
