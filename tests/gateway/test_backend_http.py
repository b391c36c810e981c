"""The gateway's lean backend transport (``jev_shared.gateway.backend_http``) on the wire: keep-alive,
chunked and close-delimited bodies, a kept-alive connection the server dropped, refused and slow servers."""

from __future__ import annotations

import asyncio
import gzip

import pytest

from jev_shared.gateway.backend_http import LeanTransport, httpx
from jev_shared.local import free_port

OK = b'{"ok": true}'


class Server:
    """A raw asyncio HTTP server whose answer per request is chosen by the request path."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length")), b"0"))
                body = await reader.readexactly(length)
                path = head.split(b" ")[1]
                self.requests.append(path + b" " + body)
                if not await self.answer(path, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def answer(self, path: bytes, writer: asyncio.StreamWriter) -> bool:
        """Write the response; False closes the connection after it."""
        if path == b"/hang":
            await asyncio.sleep(5)
            return False
        if path == b"/chunked":
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n")
            return True
        if path == b"/gzip":
            packed = gzip.compress(OK)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n%s" % (len(packed), packed))
            return True
        if path == b"/eof":  # no length: the body ends with the connection
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + OK)
            return False
        status = b"429 Too Many" if path == b"/429" else b"200 OK"
        writer.write(b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nretry-after: 3\r\ncontent-length: %d\r\n\r\n%s"
                     % (status, len(OK), OK))
        await writer.drain()
        return path != b"/drop"  # /drop: a keep-alive answer, then the server closes the idle connection


async def serving(test, *args):
    server = Server()
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(transport=LeanTransport(), base_url=f"http://127.0.0.1:{port}") as http:
            return await test(http, server, *args)
    finally:
        srv.close()


def run(test):
    return asyncio.run(serving(test))


def test_keep_alive_reuses_one_connection_for_sequential_requests():
    async def test(http, server):
        for i in range(20):
            resp = await http.post("/x", content=b"n=%d" % i)
            assert resp.status_code == 200 and resp.json() == {"ok": True}
        return server

    server = run(test)
    assert server.connections == 1
    assert server.requests == [b"/x n=%d" % i for i in range(20)]


def test_concurrent_requests_each_get_their_own_answer_and_connection():
    async def test(http, server):
        resps = await asyncio.gather(*(http.post("/x", content=b"%d" % i) for i in range(8)))
        return server, [r.status_code for r in resps]

    server, statuses = run(test)
    assert statuses == [200] * 8
    assert server.connections == 8


def test_chunked_and_close_delimited_bodies_and_status_headers():
    async def test(http, server):
        chunked = await http.post("/chunked", content=b"")
        throttled = await http.post("/429", content=b"")
        packed = await http.post("/gzip", content=b"")
        eof = await http.post("/eof", content=b"")
        return chunked, throttled, eof, packed

    chunked, throttled, eof, packed = run(test)
    assert packed.json() == {"ok": True}
    assert chunked.json() == {"a": 1}
    assert throttled.status_code == 429 and throttled.headers["retry-after"] == "3"
    assert eof.json() == {"ok": True}


def test_a_dropped_keep_alive_connection_is_replaced():
    async def test(http, server):
        first = await http.post("/drop", content=b"1")
        await asyncio.sleep(0.1)  # the server has closed it by now
        second = await http.post("/x", content=b"2")
        return server, first.status_code, second.status_code

    server, first, second = run(test)
    assert (first, second) == (200, 200)
    assert server.connections == 2


def test_a_slow_backend_is_a_read_timeout():
    async def test(http, server):
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/hang", content=b"", timeout=0.2)
        return (await http.post("/x", content=b"after")).status_code  # the pool recovers

    assert run(test) == 200


def test_a_refused_connection_is_a_connect_error():
    async def test():
        async with httpx.AsyncClient(transport=LeanTransport()) as http:
            with pytest.raises(httpx.ConnectError):
                await http.post(f"http://127.0.0.1:{free_port()}/x", content=b"")

    asyncio.run(test())


@pytest.mark.parametrize("transport", ["lean", "httpx"])
def test_the_gateway_answers_on_either_backend_transport(stub, transport):
    from tests.gateway.conftest import MODEL, gateway

    async def go():
        async with gateway(stub, backend_transport=transport) as http:
            resp = await http.post("/v1/systemone", json={"model": MODEL, "state": "want=k7 truth=yes", "questions": {
                "route": {"type": "choice", "instructions": "Which?", "criteria": {"k7": "this", "other": "that"}},
                "flag": {"type": "noul", "instructions": "The flag is set."}}})
            base = http._transport.app.gateway.pool._openai[MODEL]  # type: ignore[attr-defined]
            return resp, type(base._client._transport).__name__

    resp, used = asyncio.run(go())
    assert resp.status_code == 200, resp.text
    assert resp.json()["answers"]["route"]["choice"] == "k7" and resp.json()["answers"]["flag"]["noul"] > 0.5
    assert (used == "LeanTransport") == (transport == "lean")
