"""Compressed request bodies: ``Content-Encoding: gzip``, ``deflate`` and ``zstd``, decoded within a bound.

typesafe-sdk zstd-compresses a body of 1 KiB or more wherever zstd is available, so a System One
service has to read one. What decoding may cost is bounded, in bytes and in work:

- the decoded size is held to the same ``max_body_bytes`` as a plain body, and each decoder is asked
  for at most one byte past it: a small body that expands without end (a "zip bomb") costs the limit
  and a 413, never the memory;
- at most :data:`MAX_CODINGS` codings in one ``Content-Encoding`` (refused from the header, before the
  body is read), and at most :data:`MAX_MEMBERS` gzip members or zstd frames in one body: a body of
  thousands of empty members is a 400 ``invalid_encoding`` after a few, not seconds of CPU;
- the input is fed to the decoder in :data:`_CHUNK`-byte views, so a member's end copies at most one
  chunk, never the rest of the body (no cost quadratic in the members).

An encoding not listed is a 415 naming it; a body its encoding cannot read (corrupt or cut short) a 400.
The gateway runs :func:`decode` on a worker thread (``middleware.BodyLimit``), off the event loop.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from types import ModuleType

from .errors import api_error


def _zstandard() -> ModuleType | None:
    """The ``zstandard`` package (the ``serve`` extra brings it), or None without it."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - exercised only without the extra
        return None
    return zstandard


zstandard = _zstandard()

#: What ``Content-Encoding`` may name, applied in the order listed (decoded in reverse).
SUPPORTED = ("gzip", "x-gzip", "deflate", "zstd", "identity")
#: Codings one ``Content-Encoding`` may stack (``identity`` not counted); more: 400 ``invalid_encoding``.
MAX_CODINGS = 2
#: gzip members (or zstd frames) one coding of a body may hold; more: 400 ``invalid_encoding``.
MAX_MEMBERS = 16
#: Bytes of input handed to a decoder at a time.
_CHUNK = 64 * 1024


class _Corrupt(Exception):
    """The body is not what its encoding says (bad header, bad checksum, cut short, too many members)."""


class _TooLarge(Exception):
    """The body decodes past the limit."""


def encodings(header: str | None) -> list[str]:
    """The codings of a ``Content-Encoding`` header, lowercased, ``identity`` dropped."""
    if not header:
        return []
    return [c for c in (p.strip().lower() for p in header.split(",")) if c and c != "identity"]


def check(header: str | None) -> list[str]:
    """The codings of ``header``, or the ApiError refusing them (415 unknown, 400 too many): from the
    header alone, before the body is read or decoded."""
    codings = encodings(header)
    if len(codings) > MAX_CODINGS:
        raise api_error("invalid_encoding", f"Content-Encoding stacks {len(codings)} codings; the gateway "
                                            f"decodes at most {MAX_CODINGS}")
    for coding in codings:
        if coding not in SUPPORTED:
            raise api_error("unsupported_encoding", f"Content-Encoding {coding!r} is not supported; the gateway "
                                                    "decodes gzip, deflate and zstd request bodies")
        if coding == "zstd" and zstandard is None:
            raise api_error("unsupported_encoding", "Content-Encoding 'zstd' needs the zstandard package "
                                                    "(pip install -e '.[serve]' from a checkout)")
    return codings


def decode(body: bytes, header: str | None, limit: int) -> bytes:
    """``body`` with every coding of ``header`` undone, at most ``limit`` bytes after each step.

    Raises the gateway's ``ApiError``: 415 (a coding it does not read), 413 (past ``limit``), 400 (corrupt,
    or past :data:`MAX_CODINGS` / :data:`MAX_MEMBERS`).
    """
    for coding in reversed(check(header)):
        try:
            body = _DECODERS[coding](body, limit)
        except _TooLarge:
            raise api_error("payload_too_large", f"the request body decompresses ({coding}) past the limit of "
                                                 f"{limit} bytes (--max-body-bytes)",
                            headers={"connection": "close"}) from None
        except _Corrupt as exc:
            raise api_error("invalid_encoding", f"the request body is not valid {coding}: {exc}") from None
    return body


def _too_many(what: str) -> _Corrupt:
    return _Corrupt(f"more than {MAX_MEMBERS} {what} (the gateway reads at most {MAX_MEMBERS})")


def _zlib(body: bytes, limit: int, wbits: int) -> bytes:
    """One zlib stream (or up to MAX_MEMBERS gzip members, one after another) decoded to at most ``limit`` bytes."""
    view, out, members = memoryview(body), bytearray(), 1
    padded = len(body.rstrip(b"\0"))  # gzip: zeros past the last member are padding
    d, pos = zlib.decompressobj(wbits), 0
    pending: bytes | memoryview = b""
    while True:
        if not pending:
            if pos >= len(body):
                raise _Corrupt("the stream ends before its end marker")
            pending, pos = view[pos:pos + _CHUNK], pos + _CHUNK
        try:
            out += d.decompress(pending, limit + 1 - len(out))
        except zlib.error as exc:
            raise _Corrupt(str(exc)) from None
        if len(out) > limit:
            raise _TooLarge  # output stopped one byte past the bound
        pending = d.unconsumed_tail
        if not d.eof:
            continue
        pending = d.unused_data  # at most one chunk: the copy is bounded
        if wbits != 31 or min(pos, len(body)) - len(pending) >= padded:
            return bytes(out)  # deflate ignores what follows its end, as before
        members += 1
        if members > MAX_MEMBERS:
            raise _too_many("gzip members")
        d = zlib.decompressobj(wbits)


def _gzip(body: bytes, limit: int) -> bytes:
    return _zlib(body, limit, 31)


def _deflate(body: bytes, limit: int) -> bytes:
    """HTTP's deflate is a zlib stream (RFC 9110); some clients send raw deflate, which is read too."""
    if len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0:
        return _zlib(body, limit, 15)
    return _zlib(body, limit, -15)


def _zstd(body: bytes, limit: int) -> bytes:
    """A reader bounded at ``limit`` + 1 bytes measures the size; a cut-short frame it reads without a word,
    so within the bound the frames are decoded again, each to its end marker (at most MAX_MEMBERS)."""
    assert zstandard is not None  # checked in decode()
    dctx = zstandard.ZstdDecompressor()
    try:
        with dctx.stream_reader(io.BytesIO(body), read_across_frames=True) as reader:
            if len(reader.read(limit + 1)) > limit:
                raise _TooLarge
        view, out, pos, frames = memoryview(body), bytearray(), 0, 0
        d = None
        pending: bytes | memoryview = b""
        while pos < len(body) or pending:
            if d is None:
                frames += 1
                if frames > MAX_MEMBERS:
                    raise _too_many("zstd frames")
                d = dctx.decompressobj()
            if not pending:
                pending, pos = view[pos:pos + _CHUNK], pos + _CHUNK
            out += d.decompress(pending)
            pending = b""
            if d.eof:
                pending, d = d.unused_data, None
        if d is not None:
            raise _Corrupt("the frame ends before its end marker")
    except zstandard.ZstdError as exc:
        raise _Corrupt(str(exc)) from None
    if not out and body:
        raise _Corrupt("no complete zstd frame")
    return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {"gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate,
                                                         "zstd": _zstd}
