"""client.prepare / check / preview and per-call options, over the real openai SDK on a mock transport."""

from __future__ import annotations

import asyncio

import openai
import pytest

from jev_shared import AsyncSystemOneClient, Choice, Example, InvalidQuestionError, Memory, Noul, SystemOneClient
from tests.helpers import Request, aprovider, provider
from tests.test_memory import MODEL, SPAM, TEAM, Counter

SHOTS = [Example(state="refund me please", answer="billing"), Example(state="the app crashes", answer="technical")]


class Recorder(Counter):
    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict] = []

    def __call__(self, request: Request) -> dict:
        self.bodies.append(request.body)
        return super().__call__(request)


def sdk_on(rec: Recorder, **attrs) -> openai.OpenAI:
    return provider(rec, base_url="http://gpu:8000/v1", key="k", surfaces=None, **attrs)


def client_on(rec: Recorder, **kw) -> SystemOneClient:
    sdk = sdk_on(rec)
    return SystemOneClient(sdk, model=MODEL, api="chat_completions", memory=Memory(), **kw)


def test_prepare_pays_the_one_time_costs_so_the_first_decision_is_one_call_a_question() -> None:
    rec = Recorder()
    client = client_on(rec)
    prep = client.prepare({"team": TEAM, "spam": SPAM})
    assert prep.questions == ["team", "spam"] and prep.calls == 2 + 6 and prep.prior_calls == 6
    assert prep.methods == {"team": "logprobs", "spam": "logprobs"} and prep.seconds > 0
    assert "8 call(s), 6 for the priors" in str(prep)
    first = client.system_one("I was charged twice", {"team": TEAM, "spam": SPAM})
    assert first.usage.n_calls == 2 and "prior_calls" not in first.debug
    with_shots = client.prepare({"team": TEAM}, examples=SHOTS)
    assert with_shots.prior_calls == 2  # one a held-out example
    assert client.system_one("x", {"team": TEAM}, examples=SHOTS).usage.n_calls == 1


def test_aprepare_is_the_async_twin() -> None:
    rec = Recorder()

    sdk = aprovider(rec, base_url="http://gpu:8000/v1", key="k", surfaces=None)
    client = AsyncSystemOneClient(sdk, model=MODEL, api="chat_completions", memory=Memory())

    async def run() -> tuple:
        prep = await client.aprepare({"team": TEAM})
        return prep, await client.system_one("x", {"team": TEAM})

    prep, resp = asyncio.run(run())
    assert prep.calls == 4 and prep.prior_calls == 3 and resp.usage.n_calls == 1


def test_check_raises_what_system_one_would_before_any_request() -> None:
    rec = Recorder()
    client = client_on(rec)
    client.check({"team": TEAM})
    with pytest.raises(InvalidQuestionError) as info:
        client.check({"team": {"type": "choice", "instructions": "x", "criteria": {}}})
    assert info.value.question_id == "team"
    with pytest.raises(InvalidQuestionError) as info:
        client.check({"team": TEAM}, layout="sideways")
    assert info.value.field == "layout"
    with pytest.raises(InvalidQuestionError) as info:
        client.check({"team": TEAM}, state="\ud800")
    assert info.value.field == "state"
    assert rec.n == 0


def test_preview_shows_the_requests_without_sending_them() -> None:
    rec = Recorder()
    client = client_on(rec)
    [team, spam] = client.preview("I was charged twice", {"team": TEAM, "spam": SPAM}, top_logprobs=5)
    assert rec.n == 0
    assert team["questions"] == ["team"] and team["surface"] == "chat_completions"
    assert team["request"]["max_tokens"] == 1 and team["request"]["top_logprobs"] == 5
    assert team["request"]["messages"][-1]["content"].endswith("I was charged twice")
    assert "billing" in team["request"]["messages"][0]["content"] and spam["questions"] == ["spam"]
    assert team["input_tokens"] is None  # no tokenizer on this client
    counted = SystemOneClient(_with_tokenizer(rec), model=MODEL, api="chat_completions")
    [one] = counted.preview("abc", {"team": TEAM})
    assert one["input_tokens"] == sum(len(m["content"].split()) for m in one["request"]["messages"])
    assert rec.n == 0


def _with_tokenizer(rec: Recorder):
    return sdk_on(rec, jev_tokenize=lambda text: text.split())  # a stand-in for llama.cpp's /tokenize


def test_per_call_options_reach_the_wire_and_are_checked() -> None:
    rec = Recorder()
    client = client_on(rec, debias=False)
    client.system_one("x", {"team": TEAM}, top_logprobs=7, layout="split")
    body = rec.bodies[-1]
    assert body["top_logprobs"] == 7 and body["messages"][1]["content"].startswith("State")  # its own message first
    client.system_one("x", {"team": TEAM})
    assert rec.bodies[-1]["top_logprobs"] == 20 and len(rec.bodies[-1]["messages"]) == 2  # the client's own again
    for bad in ({"top_logprobs": -1}, {"top_logprobs": True}, {"max_concurrency": 0}, {"layout": 3}):
        with pytest.raises(InvalidQuestionError) as info:
            client.system_one("x", {"team": TEAM}, **bad)
        assert info.value.field == next(iter(bad))
    n = rec.n
    with pytest.raises(TypeError):
        client.system_one("x", {"team": TEAM}, temperature=0.3)  # not an option: a TypeError, as Python says
    assert rec.n == n


def test_model_defaults_follow_the_model_not_who_built_the_client() -> None:
    """The shipped calibration and debias="auto" resolve from the name, in the spellings servers report."""
    for name in ("qwen2.5-coder-0.5b", "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder:0.5b"):
        c = SystemOneClient(openai.OpenAI(base_url="http://gpu:8000/v1", api_key="k"), model=name)
        assert c.options.debias == "auto" and c.calibrator is not None, name
    other = SystemOneClient(openai.OpenAI(base_url="http://gpu:8000/v1", api_key="k"), model="gpt-4o-mini")
    assert other.options.debias is False and other.calibrator is None


def test_noul_and_choice_single_helpers_take_per_call_options() -> None:
    rec = Recorder()
    client = client_on(rec, debias=False)
    client.noul("x", "This is spam.", top_logprobs=3)
    assert rec.bodies[-1]["top_logprobs"] == 3
    assert isinstance(SPAM, Noul) and isinstance(TEAM, Choice)
