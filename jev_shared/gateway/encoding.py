"""Compressed request bodies: ``Content-Encoding: gzip``, ``deflate`` and ``zstd``, decoded within a bound.

typesafe-sdk zstd-compresses a body of 1 KiB or more wherever zstd is available, so a System One
service has to read one. The decoded size is held to the same ``max_body_bytes`` as a plain body,
and each decoder is asked for at most one byte past it: a small body that expands without end (a
"zip bomb") costs the limit and a 413, never the memory. An encoding not listed is a 415 naming
it; a body its encoding cannot read (corrupt or cut short) a 400.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from types import ModuleType

from .errors import ApiError


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


class _Corrupt(Exception):
    """The body is not what its encoding says (bad header, bad checksum, cut short)."""


class _TooLarge(Exception):
    """The body decodes past the limit."""


def encodings(header: str | None) -> list[str]:
    """The codings of a ``Content-Encoding`` header, lowercased, ``identity`` dropped."""
    if not header:
        return []
    return [c for c in (p.strip().lower() for p in header.split(",")) if c and c != "identity"]


def decode(body: bytes, header: str | None, limit: int) -> bytes:
    """``body`` with every coding of ``header`` undone, at most ``limit`` bytes after each step.

    Raises the gateway's ``ApiError``: 415 (a coding it does not read), 413 (past ``limit``), 400 (corrupt).
    """
    codings = encodings(header)
    for coding in codings:  # refuse an unknown one before decoding anything
        if coding not in SUPPORTED:
            raise ApiError(415, "unsupported_encoding", f"Content-Encoding {coding!r} is not supported; the gateway "
                                                        "decodes gzip, deflate and zstd request bodies")
        if coding == "zstd" and zstandard is None:
            raise ApiError(415, "unsupported_encoding", "Content-Encoding 'zstd' needs the zstandard package "
                                                        "(pip install 'jev[serve]')")
    for coding in reversed(codings):
        try:
            body = _DECODERS[coding](body, limit)
        except _TooLarge:
            raise ApiError(413, "payload_too_large", f"the request body decompresses ({coding}) past the limit of "
                                                     f"{limit} bytes (--max-body-bytes)",
                           headers={"connection": "close"}) from None
        except _Corrupt as exc:
            raise ApiError(400, "invalid_encoding", f"the request body is not valid {coding}: {exc}") from None
    return body


def _zlib(body: bytes, limit: int, wbits: int) -> bytes:
    """One zlib stream (or gzip members, one after another) decoded to at most ``limit`` bytes."""
    out, rest = bytearray(), body
    while True:
        d = zlib.decompressobj(wbits)
        try:
            out += d.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise _Corrupt(str(exc)) from None
        if len(out) > limit:
            raise _TooLarge
        if not d.eof:
            # output stopped at the bound with input left, or the stream ended early
            raise _TooLarge if d.unconsumed_tail else _Corrupt("the stream ends before its end marker")
        rest = d.unused_data
        if wbits != 31 or not rest.strip(b"\0"):  # gzip may hold several members; trailing zeros are padding
            return bytes(out)


def _gzip(body: bytes, limit: int) -> bytes:
    return _zlib(body, limit, 31)


def _deflate(body: bytes, limit: int) -> bytes:
    """HTTP's deflate is a zlib stream (RFC 9110); some clients send raw deflate, which is read too."""
    if len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0:
        return _zlib(body, limit, 15)
    return _zlib(body, limit, -15)


def _zstd(body: bytes, limit: int) -> bytes:
    """A reader bounded at ``limit`` + 1 bytes measures the size; a cut-short frame it reads without a word,
    so within the bound the frames are decoded again, each to its end marker."""
    assert zstandard is not None  # checked in decode()
    dctx = zstandard.ZstdDecompressor()
    try:
        with dctx.stream_reader(io.BytesIO(body), read_across_frames=True) as reader:
            if len(reader.read(limit + 1)) > limit:
                raise _TooLarge
        out, rest = bytearray(), body
        while rest:
            d = dctx.decompressobj()
            out += d.decompress(rest)
            if not d.eof:
                raise _Corrupt("the frame ends before its end marker")
            rest = d.unused_data
    except zstandard.ZstdError as exc:
        raise _Corrupt(str(exc)) from None
    if not out and body:
        raise _Corrupt("no complete zstd frame")
    return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {"gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate,
                                                         "zstd": _zstd}
