"""The benches' meter: every HTTP exchange goes through one counting transport.

Provider calls and output tokens (``usage.completion_tokens``) are read off the wire, so they are
counted the same way for every contender, failures included.
"""

from __future__ import annotations

import re
from typing import Any

import httpx


class Meter:
    """Provider calls and output tokens, read off the wire (the same for every contender)."""

    def __init__(self) -> None:
        self.calls = 0
        self.output_tokens = 0
        self.paths: dict[str, int] = {}

    def snapshot(self) -> tuple[int, int]:
        return self.calls, self.output_tokens


_COMPLETION = re.compile(rb'"(?:completion_tokens|output_tokens)"\s*:\s*(\d+)')


def buffered(inner: httpx.BaseTransport, request: httpx.Request) -> tuple[bytes, httpx.Response]:
    """Send ``request`` through ``inner`` and read the whole body: (the body, a response that carries it),
    so a meter can read the usage a reply reports and the SDK still gets its response."""
    resp = inner.handle_request(request)
    try:
        body = resp.read()
    finally:
        resp.close()
    headers = [(k, v) for k, v in resp.headers.items() if k.lower() not in ("content-length", "transfer-encoding")]
    return body, httpx.Response(resp.status_code, headers=headers, content=body, request=request,
                                extensions={"http_version": resp.extensions.get("http_version", b"HTTP/1.1")})


class MeteredTransport(httpx.BaseTransport):
    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body, resp = buffered(self.inner, request)
        self.meter.calls += 1
        path = request.url.path
        self.meter.paths[path] = self.meter.paths.get(path, 0) + 1
        m = _COMPLETION.search(body)
        if m:
            self.meter.output_tokens += int(m.group(1))
        return resp

    def close(self) -> None:
        self.inner.close()


def http_client(meter: Meter) -> httpx.Client:
    return httpx.Client(transport=MeteredTransport(meter), timeout=httpx.Timeout(300.0))


def openai_client(base_url: str, meter: Meter) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url, api_key="local", http_client=http_client(meter))
