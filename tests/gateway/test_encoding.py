"""Compressed request bodies (``Content-Encoding: gzip | deflate | zstd``): decoded within the body limit.

Over real HTTP (uvicorn on loopback) and in process; each test asserts what reached the stub backend:
the decoded state on success, nothing at all on a refusal.
"""

from __future__ import annotations

import gzip
import json
import zlib

import httpx
import pytest
import zstandard

from tests.gateway.conftest import KEY, MODEL, gateway

#: ``want=``/``truth=`` steer the stub; the padding takes the body past typesafe-sdk's 1 KiB threshold.
STATE = "want=billing truth=yes " + "The invoice INV-2041 was paid twice by card. " * 40
QUESTIONS = {"genuine": {"type": "noul", "instructions": "The message is a genuine request."},
             "team": {"type": "choice", "instructions": "Which team?",
                      "criteria": {"billing": "payments", "technical": "bugs"}}}
BODY = json.dumps({"model": MODEL, "state": STATE, "questions": QUESTIONS}).encode()


def raw_deflate(data: bytes) -> bytes:
    co = zlib.compressobj(wbits=-15)
    return co.compress(data) + co.flush()


CODERS = {"gzip": gzip.compress, "deflate": zlib.compress, "zstd": zstandard.ZstdCompressor().compress}


def headers(coding: str) -> dict[str, str]:
    return {"content-encoding": coding, "content-type": "application/json"}


def sent_state(stub) -> str:
    """The prompt the backend got (the state is its last message)."""
    return stub.bodies[-1]["messages"][-1]["content"]


@pytest.mark.slow
@pytest.mark.parametrize("coding", sorted(CODERS))
def test_a_compressed_body_over_real_http(gateway_url, stub, coding):
    packed = CODERS[coding](BODY)
    assert len(packed) < len(BODY) // 4
    resp = httpx.post(f"{gateway_url}/v1/systemone", content=packed, timeout=30,
                      headers={**headers(coding), "authorization": f"Bearer {KEY}"})
    assert resp.status_code == 200, resp.text
    answers = resp.json()["answers"]
    assert answers["genuine"]["noul"] > 0.9 and answers["team"]["choice"] == "billing"
    assert "INV-2041 was paid twice" in sent_state(stub)


in_process = pytest.mark.anyio


@in_process
async def test_raw_deflate_stacked_codings_and_identity(stub):
    async with gateway(stub) as http:
        for coding, body in (("deflate", raw_deflate(BODY)), ("identity", BODY), ("GZIP", gzip.compress(BODY)),
                             ("zstd, gzip", gzip.compress(CODERS["zstd"](BODY)))):
            resp = await http.post("/v1/systemone", content=body, headers=headers(coding))
            assert resp.status_code == 200, (coding, resp.text)
    assert stub.requests == 8 and "INV-2041" in sent_state(stub)


@in_process
@pytest.mark.parametrize("coding", sorted(CODERS))
async def test_a_zip_bomb_is_a_413_at_the_limit(stub, coding):
    """10 MB of zeros packs into at most 10 kB (deflate tops out near 1000:1), under the 20 kB limit: it must
    stop at the limit, not fill memory."""
    bomb = CODERS[coding](b'{"model": "m", "state": "' + b"0" * 10_000_000)
    assert len(bomb) < 20_000
    async with gateway(stub) as http:
        resp = await http.post("/v1/systemone", content=bomb, headers=headers(coding))
    err = resp.json()["error"]
    assert resp.status_code == 413 and err["type"] == "payload_too_large"
    assert f"decompresses ({coding}) past the limit of 20000 bytes" in err["message"]
    assert resp.headers["connection"] == "close" and stub.requests == 0


@in_process
async def test_a_body_over_the_limit_before_decoding_is_still_a_413(stub):
    async with gateway(stub) as http:
        resp = await http.post("/v1/systemone", content=b"x" * 30_000, headers=headers("gzip"))
    assert resp.status_code == 413 and stub.requests == 0


@in_process
async def test_an_unknown_encoding_is_a_415_naming_it(stub):
    async with gateway(stub) as http:
        resp = await http.post("/v1/systemone", content=BODY, headers=headers("br"))
        err = resp.json()["error"]
        assert resp.status_code == 415 and err["type"] == "unsupported_encoding" and "'br'" in err["message"]
        resp = await http.post("/v1/systemone", content=gzip.compress(BODY), headers=headers("gzip, compress"))
        assert resp.status_code == 415 and "'compress'" in resp.json()["error"]["message"]
    assert stub.requests == 0


@in_process
@pytest.mark.parametrize("coding", sorted(CODERS))
async def test_a_corrupt_or_cut_short_body_is_a_400(stub, coding):
    packed = CODERS[coding](BODY)
    async with gateway(stub) as http:
        for body in (b"not compressed at all" * 3, packed[: len(packed) // 2], packed[:-4]):
            resp = await http.post("/v1/systemone", content=body, headers=headers(coding))
            err = resp.json()["error"]
            assert resp.status_code == 400 and err["type"] == "invalid_encoding", (body[:20], resp.text)
            assert f"not valid {coding}" in err["message"] and resp.headers["x-request-id"]
    assert stub.requests == 0
