"""A flow driven by hand, with no client and no driver: the engine's decisions are plain generators.

The flow yields each request as a Call and is sent each reply (or thrown the ProviderError the
transport would raise); nothing here does I/O. One test per fallback the flows hold: the surface
move (Responses → Chat Completions, on an empty window or a 404), names → letters, the continuation
read of a shared prefix, a refused field dropped and re-asked (and a refused readout field answered
with structured), the repair turn (labels and JSON), and mode="auto" escalation.
"""

from __future__ import annotations

import json
import math

import pytest

from jev_shared import Choice, Noul, ProviderError
from jev_shared.calls import Call, Reply
from jev_shared.flows import Ask, answer
from jev_shared.memory import Memory
from jev_shared.options import Options
from jev_shared.questions import prepare_question
from jev_shared.record import Record
from tests.helpers import replies as r

TEAM = Choice(instructions="Which team?", criteria={"billing": "", "technical": "", "sales": ""})
SPEAKS = ("responses", "chat_completions")


def ask(memory: Memory | None = None, question=TEAM, **options) -> Ask:
    prep = prepare_question("q", question, options.get("method", "auto"))
    options.setdefault("debias", False)  # the client resolves "auto"; a flow driven by hand sets it
    return Ask(prep, "I was charged twice", Options(model="m", **options), memory or Memory(), SPEAKS, Record(True))


def tokens(surface: str, pairs: list[tuple[str, float]]) -> Reply:
    """A one-token reply carrying the window, in the surface's own shape."""
    return Reply(r.responses_tokens(pairs) if surface == "responses" else r.chat_tokens(pairs), 0.0)


def finish(flow, reply: Reply):
    """Send the last reply: the flow must stop there, and hand back its Answer."""
    with pytest.raises(StopIteration) as done:
        flow.send(reply)
    return done.value.value


def refused(status: int, message: str, **fields) -> ProviderError:
    """The error the transport raises for a provider's 4xx (the SDK's inner error object as the body)."""
    return ProviderError(f"provider error {status}: {message}", status_code=status, provider_message=message,
                         body=r.error(message, **fields)["error"])


def chat_reply(content: str, window: list[tuple[str, float]] | None = None) -> Reply:
    """A Chat Completions reply: ``content`` as the answer's text, or one token (``content``) and its window."""
    return Reply(r.chat_tokens(window) if window else r.chat(content), 0.0)


def test_responses_without_logprobs_moves_to_chat_then_a_refused_field_falls_back_to_structured():
    memory = Memory()
    flow = answer(ask(memory))
    first = next(flow)
    assert first.surface == "responses" and first.kwargs["include"] == ["message.output_text.logprobs"]
    # llama.cpp's Responses route: a 200 whose logprobs list is empty
    empty = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "billing", "logprobs": []}]}]}
    second = flow.send(Reply(empty, 0.0))
    assert second.surface == "chat_completions" and second.kwargs["max_tokens"] == 1
    # the server refuses logprobs by name: the readout field cannot be dropped, so structured answers
    refusal = ProviderError("provider error 400", status_code=400, provider_message="logprobs is not supported",
                            body={"error": {"param": "logprobs", "code": "unsupported_parameter"}})
    third = flow.throw(refusal)
    assert third.kwargs["response_format"]["type"] == "json_schema" and "logprobs" not in third.kwargs
    with pytest.raises(StopIteration) as done:
        flow.send(chat_reply('{"probabilities": {"billing": 0.8, "technical": 0.15, "sales": 0.05}}'))
    assert done.value.value.choice == "billing"
    assert memory.answers_with_structured(("m", "chat_completions"))  # remembered for the next call
    assert memory.surface_for("m", "logprobs", "auto", SPEAKS) == "chat_completions"


def test_a_window_read_by_name_in_one_step():
    flow = answer(ask(api="chat_completions", method="logprobs"))
    call = next(flow)
    assert call.kwargs["top_logprobs"] == 20 and "billing" in call.kwargs["messages"][0]["content"]
    with pytest.raises(StopIteration) as done:
        flow.send(chat_reply("billing", [("billing", -0.1), ("technical", -2.5), ("sales", -4.0)]))
    assert done.value.value.choice == "billing" and done.value.value.confidence > 0.8


def test_a_404_from_the_responses_route_moves_the_call_to_chat_and_is_remembered():
    memory = Memory()
    flow = answer(ask(memory, method="logprobs"))
    first = next(flow)
    assert first.surface == "responses"
    moved = flow.throw(refused(404, "Not Found", type="not_found"))  # no model named: the route is missing
    assert moved.surface == "chat_completions" and moved.kwargs["logprobs"] is True
    assert [(m["role"], m["content"]) for m in moved.kwargs["messages"]] == [
        (m["role"], m["content"]) for m in first.kwargs["input"]]  # the same turns, re-asked
    done = finish(flow, tokens("chat_completions", [("billing", -0.1), ("technical", -2.5), ("sales", -4.0)]))
    assert done.choice == "billing"
    assert memory.surface_for("m", "logprobs", "auto", SPEAKS) == "chat_completions"


def test_a_404_naming_the_model_is_raised_not_moved():
    flow = answer(ask(method="logprobs"))
    next(flow)
    with pytest.raises(ProviderError, match="does not exist"):
        flow.throw(refused(404, "The model `m` does not exist", code="model_not_found"))


def test_names_sharing_a_prefix_fall_back_to_letters_where_no_prefill_is_possible():
    """On Responses there is no assistant prefill to read on from, so the question is re-asked with letters."""
    q = Choice(instructions="Which?", criteria={"billing": "", "bills": ""})
    flow = answer(ask(question=q, api="responses", method="logprobs"))
    by_name = next(flow)
    assert "billing, bills" in json.dumps(by_name.kwargs["input"])
    by_letter = flow.send(tokens("responses", [("bill", -0.1), ("x", -3.0)]))  # "bill" starts both names
    assert by_letter.surface == "responses" and "(A, B)" in json.dumps(by_letter.kwargs["input"])
    done = finish(flow, tokens("responses", [("B", -0.1), ("A", -2.0)]))
    assert done.choice == "bills"
    assert done.probabilities["bills"] < 0.9  # letters standing in for names are trusted less


def test_a_shared_prefix_is_read_on_by_a_continuation_call_with_the_prefix_prefilled():
    q = Choice(instructions="Which?", criteria={"billing": "", "bills": ""})
    a = ask(question=q, api="chat_completions", method="logprobs")
    flow = answer(a)
    first = next(flow)
    second = flow.send(tokens("chat_completions", [("bill", -0.1), ("x", -3.0)]))
    assert second.kwargs["messages"] == first.kwargs["messages"] + [{"role": "assistant", "content": "bill"}]
    assert second.kwargs["extra_body"]["continue_final_message"] is True and second.kwargs["max_tokens"] == 1
    done = finish(flow, tokens("chat_completions", [("s", -0.2), ("ing", -2.0)]))
    assert done.choice == "bills"
    ratio = math.exp(-0.2) / math.exp(-2.0)  # P(bill)·P(s | bill) against P(bill)·P(ing | bill)
    assert math.isclose(done.probabilities["bills"] / done.probabilities["billing"], ratio, rel_tol=1e-6)
    assert a.record.readout["source"] == "logprobs+continuation"


def test_a_refused_optional_field_is_dropped_and_the_same_question_re_asked():
    memory = Memory()
    flow = answer(ask(memory, api="chat_completions", method="logprobs"))
    first = next(flow)
    assert "chat_template_kwargs" in first.kwargs["extra_body"]
    again = flow.throw(refused(400, "Unrecognized request argument supplied: chat_template_kwargs"))
    assert "chat_template_kwargs" not in (again.kwargs.get("extra_body") or {})
    assert {k: v for k, v in again.kwargs.items() if k != "extra_body"} == {
        k: v for k, v in first.kwargs.items() if k != "extra_body"}  # only the refused field changed
    assert finish(flow, tokens("chat_completions", [("billing", -0.1), ("sales", -3.0)])).choice == "billing"
    # the next question on this client never sends it
    later = next(answer(ask(memory, api="chat_completions", method="logprobs")))
    assert "chat_template_kwargs" not in (later.kwargs.get("extra_body") or {})


def test_a_refused_readout_field_cannot_be_dropped_and_falls_back_to_structured():
    flow = answer(ask(api="chat_completions"))
    next(flow)
    structured = flow.throw(refused(400, "logprobs is not supported with this model.", param="logprobs",
                                    code="unsupported_parameter"))
    assert structured.kwargs["response_format"]["type"] == "json_schema" and "logprobs" not in structured.kwargs
    done = finish(flow, Reply(r.chat_json({"probabilities": {"billing": 0.1, "technical": 0.8, "sales": 0.1}}), 0.0))
    assert done.choice == "technical"


def test_a_reply_with_no_label_earns_one_repair_turn_saying_why():
    a = ask(api="chat_completions", method="logprobs", strict_labels=True)
    flow = answer(a)
    first = next(flow)
    repair = flow.send(tokens("chat_completions", [("The", -0.1), ("Sure", -1.0)]))
    turns = repair.kwargs["messages"]
    assert turns[:-2] == first.kwargs["messages"] and turns[-2] == {"role": "assistant", "content": "The"}
    assert turns[-1]["role"] == "user" and "Your previous reply was invalid" in turns[-1]["content"]
    assert "billing, technical, sales" in turns[-1]["content"]
    assert finish(flow, tokens("chat_completions", [("sales", -0.1), ("billing", -3.0)])).choice == "sales"
    assert "is not one of the labels" in a.record.retry_reasons[0]


def test_a_malformed_json_answer_earns_one_repair_turn_then_raises():
    from jev_shared import MalformedAnswerError

    flow = answer(ask(api="chat_completions", method="structured"))
    next(flow)
    repair = flow.send(Reply(r.chat("I think billing."), 0.0))
    assert "Return only a JSON object matching the schema." in repair.kwargs["messages"][-1]["content"]
    with pytest.raises(MalformedAnswerError):
        flow.send(Reply(r.chat("Still billing."), 0.0))  # n_retry_malformed=1: one repair, then the typed error


def test_mode_auto_escalates_a_low_confidence_answer_to_one_system2_pass():
    a = ask(api="chat_completions", method="logprobs", mode="auto")
    flow = answer(a)
    next(flow)
    ratings = flow.send(tokens("chat_completions", [("billing", -0.69), ("technical", -0.70), ("sales", -5.0)]))
    assert isinstance(ratings, Call) and "max_tokens" not in ratings.kwargs and "logprobs" not in ratings.kwargs
    done = finish(flow, Reply(r.chat_json({"billing": 2, "technical": 8, "sales": 0}), 0.0))
    assert done.choice == "technical" and done.probabilities["technical"] == pytest.approx(0.8)
    assert a.record.escalation["escalated"] and a.record.passed == "system2"


def test_mode_auto_keeps_a_confident_answer_in_one_call():
    a = ask(question=Noul(instructions="This is spam."), api="chat_completions", method="logprobs", mode="auto")
    flow = answer(a)
    next(flow)
    done = finish(flow, tokens("chat_completions", [("yes", -0.01), ("no", -6.0)]))
    assert done.noul > 0.99 and a.record.escalation["escalated"] is False
