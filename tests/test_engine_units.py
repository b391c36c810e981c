"""Engine decisions that need an exact logprob window, which no real model can be made to produce.

The provider double (``tests.helpers``) is the real openai client whose every reply carries a fixed
window; everything else (prompt, method, surface, transport, SDK, readout) is real, and each test
reads the requests off the wire (``client.wire``: the JSON bodies as sent, extra_body merged in).
"""

from __future__ import annotations

import math

import pytest

from jev_shared import Choice, SystemOneClient
from jev_shared.backend import describe
from jev_shared.readout import PRIOR_SHARE
from tests.helpers import aprovider, fails, provider, windows
from tests.helpers import replies as r

TEAM = Choice(instructions="Which team?", criteria={"billing": "", "technical": "", "sales": ""})


def FixedWindow(*windows_: list[tuple[str, float]], **attrs):  # noqa: N802 - read as the double it is
    """The real openai client answering each call with the next (token, logprob) window, the last repeated."""
    return provider(windows(*windows_), **attrs)


def test_a_missing_name_is_floored_not_read_as_zero():
    fake = FixedWindow([("The", -0.5), ("b", -3.0), ("You", -4.0)])
    resp = SystemOneClient(fake, model="m", labels="names").system_one("x", {"team": TEAM})
    answer = resp.answers["team"]
    assert answer.choice == "billing" and answer.confidence < 0.9
    assert answer.probabilities["technical"] > 0 and resp.debug["truncated"] == ["team"]


def test_a_shared_prefix_is_read_on_by_a_continuation_call():
    """"bill" starts both names: a second one-token call with "bill" prefilled reads the rest."""
    q = Choice(instructions="Which?", criteria={"billing": "", "bills": ""})
    fake = FixedWindow([("bill", -0.1), ("x", -3.0)], [("s", -0.2), ("ing", -2.0)])
    resp = SystemOneClient(fake, model="m", labels="names").system_one("x", {"q": q})
    answer = resp.answers["q"]
    assert answer.choice == "bills" and resp.usage.n_calls == 2
    assert fake.wire[1]["messages"][-1] == {"role": "assistant", "content": "bill"}
    assert fake.wire[1].body.items() >= {"continue_final_message": True, "add_generation_prompt": False}.items()
    assert "continue_final_message" not in fake.wire[0]
    assert fake.wire[1]["max_tokens"] == 1
    ratio = math.exp(-0.2) / math.exp(-2.0)  # P(bill)·P(s|bill) against P(bill)·P(ing|bill)
    assert math.isclose(answer.probabilities["bills"] / answer.probabilities["billing"], ratio, rel_tol=1e-6)
    assert math.isclose(sum(answer.probabilities.values()), 1.0)


def test_names_sharing_a_first_word_are_answered_by_what_differs():
    q = Choice(instructions="Which?", criteria={"order_status": "Where is my order", "order_cancel": "Cancel it",
                                                "refund": "Money back"})
    fake = FixedWindow([("cancel", -0.1), ("status", -2.5), ("ref", -3.0)])
    resp = SystemOneClient(fake, model="m", labels="names").system_one("x", {"q": q})
    assert resp.answers["q"].choice == "order_cancel" and resp.usage.n_calls == 1
    system = fake.wire[0]["messages"][0]["content"]
    assert "status: Where is my order" in system and "cancel: Cancel it" in system and "order_status" not in system
    assert resp.answers["q"].probabilities["refund"] > 0


def test_forty_options_are_read_by_name_in_one_token():
    q = Choice(instructions="Which?", criteria={f"{w}": "" for w in (
        "apple banana cherry date elder fig grape honeydew iris jasmine kale lemon mango nectar olive "
        "peach quince radish spinach tomato ugli vanilla walnut xigua yam zucchini acorn basil chive dill "
        "endive fennel garlic hazel ivy juniper kiwi leek mint oat").split()})
    fake = FixedWindow([("mint", -0.2), ("leek", -2.0), ("The", -3.0)])
    resp = SystemOneClient(fake, model="m").system_one("x", {"q": q})
    answer = resp.answers["q"]
    assert answer.choice == "mint" and resp.usage.n_calls == 1 and len(answer.probabilities) == 40
    assert resp.method_of("q") == "logprobs" and fake.wire[0]["max_tokens"] == 1


def test_letters_keep_missing_labels_at_zero():
    fake = FixedWindow([("A", -0.1), ("B", -2.0), ("The", -3.0)])
    resp = SystemOneClient(fake, model="m", labels="letters").system_one("x", {"team": TEAM})
    assert resp.answers["team"].probabilities["sales"] == 0.0
    assert resp.debug["labels_missing"] == {"team": ["C"]}


def test_strict_labels_retry_once_with_the_reason():
    fake = FixedWindow([("The", -0.1), ("Sure", -1.0)], [("A", -0.1), ("B", -2.0)])
    resp = SystemOneClient(fake, model="m", strict_labels=True).system_one("x", {"team": TEAM})
    assert resp.usage.n_calls == 2 and resp.answers["team"].choice == "billing"
    assert "is not one of the labels" in resp.debug["retry_reasons"]["team"][0]
    assert "Your previous reply was invalid" in fake.wire[1]["messages"][-1]["content"]


def test_request_fields_for_a_token_method():
    fake = FixedWindow([("A", -0.1), ("B", -2.0)])
    SystemOneClient(fake, model="m", method="logprobs", top_logprobs=7).system_one("x", {"team": TEAM})
    kw = fake.wire[0]
    assert kw["temperature"] == 0 and kw["logprobs"] is True and kw["top_logprobs"] == 7 and kw["max_tokens"] == 1
    assert kw["chat_template_kwargs"] == {"enable_thinking": False}  # extra_body, as it reaches the server
    fake = FixedWindow([("A", -0.1), ("B", -2.0)])
    SystemOneClient(fake, model="m", method="logprobs", thinking=True).system_one("x", {"team": TEAM})
    assert "max_tokens" not in fake.wire[0] and "chat_template_kwargs" not in fake.wire[0]
    assert set(fake.wire[0].body) <= {"model", "messages", "temperature", "logprobs", "top_logprobs"}  # no extra_body


@pytest.mark.parametrize("thinking", [None, True, False])
def test_system2_sends_the_reasoning_switch_only_when_thinking_is_false(thinking):
    fake = provider(r.chat('{"billing": 7, "technical": 2, "sales": 1}'))
    resp = SystemOneClient(fake, model="m", mode="system2", thinking=thinking).system_one("x", {"team": TEAM})
    assert resp.answers["team"].probabilities["billing"] == pytest.approx(0.7)
    assert ("reasoning_effort" in fake.wire[0]) is (thinking is False)
    assert "max_tokens" not in fake.wire[0]


def test_debias_divides_by_the_content_free_answer_and_remembers_it():
    real = [("billing", -0.3), ("technical", -1.5), ("sales", -3.0)]
    empty = [("billing", -0.1), ("technical", -3.0), ("sales", -3.0)]  # the model leans to billing anyway
    fake = FixedWindow(real, empty, empty, empty, real)
    client = SystemOneClient(fake, model="m", debias=True, api="chat_completions")
    resp = client.system_one("my app crashes", {"team": TEAM})
    assert resp.usage.n_calls == 4
    assert [r["messages"][-1]["content"].split("<state>\n")[1] for r in fake.wire[1:]] == [
        "N/A", "", "[MASK]"]
    z_real = sum(math.exp(lp) for _, lp in real)
    z_empty = sum(math.exp(lp) for _, lp in empty)
    floor = PRIOR_SHARE / 3  # a prior under 0.3/n is not divided by in full (an empty state's own answer)
    ratio = [math.exp(a) / z_real / max(math.exp(b) / z_empty, floor) for (_, a), (_, b) in zip(real, empty)]
    assert list(resp.answers["team"].probabilities.values()) == pytest.approx([r / sum(ratio) for r in ratio])
    assert resp.answers["team"].choice == "technical"  # billing's lead was the model's lean, not the ticket
    assert resp.debug["priors"]["team"]["billing"] == pytest.approx(math.exp(-0.1) / z_empty)
    again = client.system_one("my app crashes", {"team": TEAM})
    assert again.usage.n_calls == 1 and again.answers == resp.answers  # the prior is asked once per prompt


def test_debias_must_be_a_bool():
    with pytest.raises(ValueError, match="debias"):
        SystemOneClient(FixedWindow([("A", 0.0)]), model="m", debias="yes")


@pytest.mark.parametrize("run_async", [False, True])
def test_a_failing_scout_question_stops_the_call_before_the_others_are_sent(run_async):
    from jev_shared import AsyncSystemOneClient, Noul, ProviderError

    # the real client speaks Responses and Chat Completions; every request is refused (HTTP 400, not retried)
    fake = (aprovider if run_async else provider)(fails(400, "bad request"), surfaces=None)
    questions = {q: Noul(instructions=q) for q in ("a", "b", "c")}
    with pytest.raises(ProviderError, match="bad request"):
        if run_async:
            import asyncio

            asyncio.run(AsyncSystemOneClient(fake, model="m", method="logprobs").system_one("x", questions))
        else:
            SystemOneClient(fake, model="m", method="logprobs").system_one("x", questions)
    assert len(fake.wire) == 1 and fake.wire[0].path == "/v1/responses"  # api="auto", a new model: a goes first, alone


def test_layout_auto_shares_a_long_state_and_asks_the_questions_in_turn():
    from jev_shared import Noul

    questions = {"team": TEAM, "spam": Noul(instructions="This is spam.")}
    long_state = "The customer wrote a long message. " * 120
    fake = provider(windows([("billing", -0.1), ("yes", -0.2)]), delay=0.02)
    client = SystemOneClient(fake, model="m", debug=True)
    resp = client.system_one(long_state, questions)
    assert resp.debug["layout"]["layout"] == "split"
    assert resp.debug["layout"]["tokens_split"] < resp.debug["layout"]["tokens_state_last"]
    for req in fake.wire:  # shared rules, then the state, then the question: one prefix for both
        system, state, question = req["messages"]
        assert "Question" not in system["content"] and "Statement" not in system["content"]
        assert state["content"].startswith("State (data") and "<state>" in state["content"]
        assert question["content"].split(":")[0] in ("Question", "Statement")
    assert fake.wire[0]["messages"][:2] == fake.wire[1]["messages"][:2]
    assert fake.wire.peak == 1  # one at a time: the second question must reach the slot holding the state
    short = FixedWindow([("billing", -0.1), ("yes", -0.2)])
    resp = SystemOneClient(short, model="m", debug=True).system_one("I was charged twice", questions)
    assert resp.debug["layout"]["layout"] == "state_last"
    assert all("Question" in r["messages"][0]["content"] or "Statement" in r["messages"][0]["content"]
               for r in short.wire)


def test_layout_auto_asks_the_tokenizer_when_the_estimate_is_close():
    counted: list[str] = []

    def jev_tokenize(text):
        counted.append(text)
        return text.split()

    from jev_shared import Noul

    questions = {"team": TEAM, "spam": Noul(instructions="This is spam.")}
    counting = FixedWindow([("billing", -0.1), ("yes", -0.5)], jev_tokenize=jev_tokenize)
    resp = SystemOneClient(counting, model="m", debug=True).system_one("word " * 40, questions)
    assert resp.debug["layout"]["counted"] == "tokenizer" and counted


def test_debias_auto_is_on_for_zero_shot_on_the_model_it_was_measured_on():
    """The default belongs to the model, in any spelling a server reports, not to who built the client."""
    from jev_shared import Example

    fake = FixedWindow([("billing", -0.1), ("sales", -1.0)])
    resp = SystemOneClient(fake, model="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", debug=True).system_one(
        "I was charged twice", {"team": TEAM})
    states = [r["messages"][-1]["content"] for r in fake.wire]
    assert resp.usage.n_calls == 4 and "team" in resp.debug["priors"]  # the answer, then N/A, "" and [MASK]
    assert "N/A" in states[1] and "[MASK]" in states[3]
    shots = FixedWindow([("billing", -0.1), ("sales", -1.0)])
    SystemOneClient(shots, model=MEASURED).system_one("x", {"team": TEAM}, examples=[Example(state="s", answer="sales")])
    assert len(shots.wire) == 1  # examples already remove the lean: no prior
    plain = FixedWindow([("billing", -0.1), ("sales", -1.0)])
    SystemOneClient(plain, model="m").system_one("x", {"team": TEAM})
    assert len(plain.wire) == 1  # a client nobody measured: off


def test_names_the_tokenizer_cannot_tell_apart_are_answered_by_description_words():
    """"shipping" and "shipment" differ as words but share their first token: with the server's
    tokenizer the engine knows before asking, and answers by words it does tell apart (one call)."""
    q = Choice(instructions="Which?", criteria={"shipping": "delivery and tracking of parcels",
                                                "shipment": "returns of goods sent back", "billing": "invoices"})
    fake = FixedWindow([("returns", -0.1), ("delivery", -2.0), ("invoices", -3.0)])
    asked: list[str] = []

    def tokenize(text: str) -> list[int]:  # a stand-in for llama.cpp's /tokenize: "ship" is one token
        asked.append(text)
        return [hash(text[:4]), hash(text[4:])]

    describe(fake, tokenize=tokenize)
    client = SystemOneClient(fake, model="m", labels="names", debug=True)
    resp = client.system_one("x", {"q": q})
    assert resp.answers["q"].choice == "shipment" and resp.usage.n_calls == 1
    system = fake.wire[0]["messages"][0]["content"]
    assert "returns: returns of goods sent back" in system and "delivery: delivery and tracking" in system
    assert "server's tokenizer" in resp.debug["labels_fallback"]["q"]
    n = len(asked)
    client.system_one("y", {"q": q})
    assert len(asked) == n  # checked once per option set


def test_names_the_tokenizer_tells_apart_keep_their_own_words():
    fake = FixedWindow([("billing", -0.1), ("technical", -2.0)])
    describe(fake, tokenize=lambda text: [hash(text)])
    client = SystemOneClient(fake, model="m", labels="names")
    assert client.system_one("x", {"team": TEAM}).answers["team"].choice == "billing"
    assert "billing, technical, sales" in fake.wire[0]["messages"][0]["content"]


MEASURED = "qwen2.5-coder-0.5b"


def _probs(window):
    z = sum(math.exp(lp) for _, lp in window)
    return [math.exp(lp) / z for _, lp in window]


def test_examples_that_show_every_option_are_their_own_calibration_set():
    """Each example asked with the others as its examples (leave one out): the mean answer is the
    model's lean on in-domain states, divided out like the content-free prior (docs/decisions.md)."""
    from jev_shared import Example
    from jev_shared.readout import divide_prior

    shots = [Example(state="refund me", answer="billing"), Example(state="app crashes", answer="technical"),
             Example(state="buy more seats", answer="sales")]
    real = [("billing", -0.4), ("technical", -1.5), ("sales", -2.0)]
    loo = [[("billing", -0.2), ("technical", -2.5), ("sales", -3.0)],  # billing's own example: leans billing
           [("billing", -0.9), ("technical", -0.8), ("sales", -3.0)],
           [("billing", -0.7), ("technical", -2.5), ("sales", -1.0)]]
    fake = FixedWindow(real, *loo[::-1], real)  # asked last example first (priors.asking_order)
    client = SystemOneClient(fake, model=MEASURED, debug=True, calibrator=None)  # debias="auto" was measured on it
    resp = client.system_one("my invoice is wrong", {"team": TEAM}, examples=shots)
    assert resp.usage.n_calls == 4
    # the first prior's prompt is the answer's own up to its state: a server's prompt cache serves it
    assert fake.wire[1]["messages"] == fake.wire[0]["messages"][:-2]
    for req, held in zip(fake.wire[1:], shots[::-1]):
        msgs = req["messages"]
        assert sum(m["role"] == "assistant" for m in msgs) == 2  # the other two examples
        assert msgs[-1]["content"].endswith(held.state) and held.state not in "".join(m["content"] for m in msgs[:-1])
    prior = [sum(col) / 3 for col in zip(*(_probs(w) for w in loo))]
    expected = divide_prior(_probs(real), prior)
    assert list(resp.answers["team"].probabilities.values()) == pytest.approx(expected)
    assert resp.debug["priors"]["team"] == pytest.approx(dict(zip(["billing", "technical", "sales"], prior)))
    again = client.system_one("another ticket", {"team": TEAM}, examples=shots)
    assert again.usage.n_calls == 1  # remembered for the prompt


def test_examples_that_leave_an_option_out_are_not_debiased_by_default():
    from jev_shared import Example

    shots = [Example(state="refund me", answer="billing"), Example(state="app crashes", answer="technical")]
    fake = FixedWindow([("billing", -0.4), ("technical", -1.5), ("sales", -2.0)])
    resp = SystemOneClient(fake, model=MEASURED).system_one("x", {"team": TEAM}, examples=shots)
    assert resp.usage.n_calls == 1 and "priors" not in resp.debug
    off = SystemOneClient(fake, model="m", debias=False).system_one(
        "x", {"team": TEAM}, examples=[*shots, Example(state="seats", answer="sales")])
    assert off.usage.n_calls == 1
