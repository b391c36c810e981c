"""What the client learns from a fault, asserted on the wire: what the next calls send.

A transient outage is not evidence about logprobs; a refused logprobs field is, and is
remembered; a complaint about a value is not remembered.
"""

from __future__ import annotations

from typing import Any

import pytest

from jev_shared import ProviderError

from . import kinds as k
from .cells import LOGPROBS_REFUSED, TOKEN, TOP_VALUE
from .conftest import STATE, engine, questions
from .replies import wants_tokens
from .server import FaultServer

MODES = [(s, sync) for s in TOKEN for sync in (True, False)]
IDS = [f"{s}|{'sync' if sync else 'async'}" for s, sync in MODES]


@pytest.mark.parametrize(("surface", "sync"), MODES, ids=IDS)
def test_an_outage_never_switches_the_model_to_structured(fault_server: FaultServer, ask: Any, surface: str,
                                                           sync: bool) -> None:
    client = engine(fault_server.url, surface, sync, max_retries=1)
    for _ in range(2):  # two outages: the old engine struck (model, surface) twice and moved for good
        fault_server.arm([k.error(503, "Service unavailable")], forever=True)
        before = len(fault_server.marked())
        with pytest.raises(ProviderError) as info:
            ask(client, STATE, questions(), method="auto")
        assert info.value.status_code == 503
        sent = fault_server.marked()[before:]
        assert len(sent) == 2 and all(wants_tokens(r) for r in sent)  # no structured re-ask of a down server
    fault_server.arm([])
    resp = ask(client, STATE, questions(), method="auto")
    assert resp.debug["methods"] == {"q": "logprobs", "ok": "logprobs"}
    assert wants_tokens(fault_server.marked()[-1])


@pytest.mark.parametrize(("surface", "sync"), MODES, ids=IDS)
def test_a_refused_logprobs_field_is_remembered(fault_server: FaultServer, ask: Any, surface: str,
                                                sync: bool) -> None:
    client = engine(fault_server.url, surface, sync)
    fault_server.arm([LOGPROBS_REFUSED])
    first = ask(client, STATE, {"q": questions()["q"]}, method="auto")
    assert first.debug["methods"] == {"q": "structured"} and len(fault_server.marked()) == 2
    second = ask(client, STATE, {"q": questions()["q"]}, method="auto")
    assert second.debug["methods"] == {"q": "structured"}
    assert len(fault_server.marked()) == 3 and not wants_tokens(fault_server.marked()[-1])


@pytest.mark.parametrize(("surface", "sync"), MODES, ids=IDS)
def test_a_value_complaint_is_not_remembered(fault_server: FaultServer, ask: Any, surface: str, sync: bool) -> None:
    client = engine(fault_server.url, surface, sync)
    fault_server.arm([TOP_VALUE])
    assert ask(client, STATE, questions(), method="auto").debug["methods"]["q"] == "structured"
    assert ask(client, STATE, questions(), method="auto").debug["methods"]["q"] == "logprobs"
    assert wants_tokens(fault_server.marked()[-1])
