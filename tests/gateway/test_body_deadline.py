"""BodyLimit's body deadline on one ``loop.call_at`` keeps ``asyncio.timeout``'s semantics: the 408 when
the body is late, any other cancellation passed on, the task's cancel count as it was."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jev_shared.gateway import Backend, GatewayConfig
from jev_shared.gateway.middleware import BodyLimit


def layer(timeout_s: float, answered: list[bytes]) -> BodyLimit:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        answered.append((await receive())["body"])

    return BodyLimit(app, GatewayConfig(backends={"m": Backend("http://127.0.0.1:9/v1", "m")},
                                        body_timeout_s=timeout_s))


def scope() -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/systemone", "headers": [(b"content-length", b"4")]}


def run(limit: BodyLimit, receive: Any) -> tuple[list[dict[str, Any]], int]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> int:
        await limit(scope(), receive, send)
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    return sent, asyncio.run(main())


def test_a_late_body_is_a_408_and_the_cancel_count_is_back() -> None:
    async def never() -> dict[str, Any]:
        await asyncio.sleep(10)
        raise AssertionError("not reached")

    answered: list[bytes] = []
    sent, cancelling = run(layer(0.05, answered), never)
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"]["type"] == "request_timeout"
    assert cancelling == 0 and not answered


def test_a_body_in_time_is_replayed_and_the_timer_is_gone() -> None:
    parts = iter([{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"cd"}])

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0)
        return next(parts)

    answered: list[bytes] = []
    sent, cancelling = run(layer(0.2, answered), receive)
    assert answered == [b"abcd"] and not sent and cancelling == 0


def test_another_cancellation_passes_through_not_as_a_408() -> None:
    async def main() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def never() -> dict[str, Any]:
            await asyncio.sleep(10)
            raise AssertionError("not reached")

        task = asyncio.create_task(layer(5.0, [])(scope(), never, send))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sent

    assert asyncio.run(main()) == []
