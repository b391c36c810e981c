"""A backend whose logprobs are above 0 (probabilities above 1: yes +5, no +1) has failed: its window is no
distribution, so the engine raises a typed error rather than reading it relative to itself (P(yes) = 0.982),
and a gate on it stays shut. A loopback backend and the real openai SDK; every method that reads a window."""

from __future__ import annotations

import openai
import pytest

from jev_shared import Choice, LabelReadoutError, Noul, SystemOneClient
from tests.helpers.replies import chat, window
from tests.hostile.fast_stub import FastStub

pytestmark = pytest.mark.timeout(60)
ABOVE_ZERO = chat("Yes", {"content": window({"Yes": 5.0, "No": 1.0})}, "length")
ROUNDING = chat("Yes", {"content": window({"Yes": 0.0004, "No": -3.0})}, "length")


def _client(stub: FastStub, **kw) -> SystemOneClient:
    sdk = openai.OpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
    return SystemOneClient(sdk, model="m", api="chat_completions", method="logprobs", max_retries=0, **kw)


@pytest.mark.parametrize("question", [Noul(instructions="This is spam."),
                                      Choice(instructions="Which?", criteria={"Yes": "one", "No": "other"})])
def test_logprobs_above_zero_are_a_provider_fault_not_a_distribution(question):
    with FastStub(ABOVE_ZERO) as stub, pytest.raises(LabelReadoutError, match="above 0"):
        _client(stub).system_one("x", {"q": question})


def test_a_gate_on_logprobs_above_zero_stays_shut():
    pytest.importorskip("langchain_core")  # the langchain extra: the first pass of scripts/test.sh --full
    from jev_langchain import JevGate
    from jev_langchain.errors import GateBlocked

    with FastStub(ABOVE_ZERO) as stub:
        gate = JevGate(_client(stub), "The text is safe to forward.", threshold=0.9)
        with pytest.raises(GateBlocked):
            gate.invoke("forward this")


def test_a_logprob_a_rounding_above_zero_is_still_read():
    with FastStub(ROUNDING) as stub:
        resp = _client(stub).system_one("x", {"q": Noul(instructions="This is spam.")})
    assert resp.answers["q"].noul > 0.9
