"""Every credential the client carries is redacted wherever an error, a log or debug output
shows it: a proxy header (``default_headers``), a cookie, a base URL's ``user:password`` and the ``Basic``
credential httpx makes of it. The provider here echoes every header it was sent, as some proxies do."""

from __future__ import annotations

import base64
import io
import json
import logging
import secrets
import traceback

import openai
import pytest

from jev_shared import Noul, ProviderError, SystemOneClient
from jev_shared.redact import redact_text
from tests.helpers import Request, json_reply
from tests.helpers import replies as r
from tests.helpers.provider import http_client

TOKEN = "proxy-" + secrets.token_hex(12)
COOKIE = "sess" + secrets.token_hex(12)
USER, PASSWORD = "alice", "pw-" + secrets.token_hex(8)
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SECRETS = (TOKEN, COOKIE, PASSWORD, BASIC)
SPAM = {"spam": Noul(instructions="This is spam.")}
WIRES: list = []  # each client's recorded requests, the latest last


def _echo(status: int):
    def handle(req: Request):
        said = "; ".join(f"{k}={v}" for k, v in req.headers.items())
        if status == 200:
            return r.chat_tokens({"yes": -0.1, "no": -2.0}) | {"echo": said}
        return json_reply(r.error(f"denied, you sent: {said}"), status)
    return handle


def _client(status: int, **kw: object) -> SystemOneClient:
    http = http_client(_echo(status))
    sdk = openai.OpenAI(base_url=f"http://{USER}:{PASSWORD}@provider.test/v1", api_key="k", max_retries=0,
                        http_client=http, default_headers={"X-Proxy-Token": TOKEN, "Cookie": f"session={COOKIE}"})
    WIRES.append(http.wire)
    return SystemOneClient(sdk, model="m", api="chat_completions", method="logprobs", max_retries=0, **kw)


def _clean(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], (leaked, text[:2000])


def test_the_echoing_provider_really_receives_every_credential():
    client = _client(401)
    with pytest.raises(ProviderError):
        client.system_one("a ticket", SPAM)
    headers = {k.lower(): v for k, v in WIRES[-1][0].headers.items()}
    assert headers["x-proxy-token"] == TOKEN and COOKIE in headers["cookie"]
    assert headers["authorization"] == f"Basic {BASIC}"


def test_no_credential_in_the_error_its_chain_or_a_log():
    with pytest.raises(ProviderError) as info:
        _client(401).system_one("a ticket", SPAM)
    exc = info.value
    assert exc.status_code == 401 and "[REDACTED]" in str(exc)
    _clean(str(exc))
    _clean(repr(exc))
    _clean("".join(traceback.format_exception(exc)))
    _clean(repr(exc.__cause__) + str(exc.__cause__) + json.dumps(exc.body, default=str))
    out = io.StringIO()
    log = logging.getLogger("tests.hostile.secrets")
    handler = logging.StreamHandler(out)
    log.addHandler(handler)
    try:
        log.exception("failed", exc_info=exc)
    finally:
        log.removeHandler(handler)
    _clean(out.getvalue())


def test_no_credential_in_debug_output_or_the_debug_log(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.DEBUG, logger="jev_shared"):
        resp = _client(200, debug=True).system_one("a ticket", SPAM)
    dumped = json.dumps(resp.debug, default=str)
    assert "echo" in dumped  # the echo is there, redacted
    _clean(dumped)
    _clean(caplog.text)


def test_redact_text_knows_basic_credentials_and_url_passwords():
    assert redact_text("Authorization: Basic dXNlcjpzZWNyZXQ=") == "Authorization: [REDACTED]"
    assert "s3cr3t" not in redact_text("see http://bob:s3cr3t@host/v1 now")


@pytest.mark.anyio
async def test_the_gateways_502_body_carries_no_credential_of_the_backend_url():
    pytest.importorskip("fastapi", reason="the serve extra (the llama_index pass's venv has none)")
    from jev_shared.gateway import Backend, GatewayConfig
    from jev_shared.gateway.app import create_app
    from tests.gateway.conftest import KEY, client
    from tests.helpers.server import Loopback

    with Loopback(_echo(401)) as srv:
        url = srv.base_url.replace("http://", f"http://{USER}:{PASSWORD}@")
        config = GatewayConfig(backends={"m": Backend(url, "m")}, api_keys=frozenset({KEY}), max_retries=0,
                               cache=False)
        async with client(create_app(config)) as http:
            resp = await http.post("/v1/systemone", json={"model": "m", "state": "a ticket", "questions": {
                "spam": {"type": "noul", "instructions": "This is spam."}}})
        sent = {k.lower(): v for k, v in srv.log[0].headers.items()} if srv.log else {}
    assert resp.status_code == 502, resp.text
    assert sent.get("authorization") == f"Basic {BASIC}"  # the credential really went, and was echoed
    _clean(resp.text)


@pytest.fixture
def anyio_backend():
    return "asyncio"
