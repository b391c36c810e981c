"""Replays of traffic recorded from the embedded llama.cpp server (SmolLM2-135M, see cassettes/README.md).

The cassettes match on the request body, so each replay also proves the engine still sends the
request the server answered. SmolLM2's decisions are near chance: these tests check the readout
of the recorded windows, never whether the model was right.
"""

from __future__ import annotations

import math
from pathlib import Path

import openai
import pytest
import yaml

from jev_shared import IncompleteAnswerError, LabelReadoutError, MalformedAnswerError
from tests.scenarios import scenarios

CASSETTES = Path(__file__).resolve().parent.parent / "cassettes"


def run(cassette, name):
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test-not-a-real-key")
    with cassette(name) as cas:
        try:
            return scenarios(client, "smollm2-135m")[name](), cas
        except Exception as exc:  # noqa: BLE001 - returned for the test to inspect
            return exc, cas


def recorded_windows(name):
    """The top_logprobs windows as the server sent them, straight from the cassette file."""
    data = yaml.safe_load((CASSETTES / f"{name}.yaml").read_text())
    import json

    bodies = [json.loads(i["response"]["body"]["string"]) for i in data["interactions"]]
    return [b["choices"][0]["logprobs"]["content"][0]["top_logprobs"] for b in bodies]


def expected(window, labels):
    best = {}
    for alt in window:
        t = alt["token"].strip().upper()
        if t in labels:
            best[t] = max(best.get(t, -math.inf), alt["logprob"])
    z = sum(math.exp(v) for v in best.values())
    return [math.exp(best[lab]) / z if lab in best else 0.0 for lab in labels]


@pytest.mark.parametrize(("name", "qid", "labels"), [
    ("logprobs_choice", "team", "ABC"), ("logprobs_score", "urgency", "ABCD"), ("logprobs_noul", "spam", "AB"),
])
def test_logprob_readout_matches_the_recorded_window(cassette, name, qid, labels):
    resp, cas = run(cassette, name)
    assert cas.all_played and cas.play_count == 1
    answer = resp.answers[qid]
    probs = [answer.noul, 1 - answer.noul] if qid == "spam" else list(answer.probabilities.values())
    assert probs == pytest.approx(expected(recorded_windows(name)[0], list(labels)))
    assert resp.usage.n_calls == 1 and resp.usage.output_tokens == 1 and resp.usage.input_tokens > 0
    assert resp.debug["methods"] == {qid: "logprobs"}


def test_three_questions_keep_their_order(cassette):
    resp, cas = run(cassette, "logprobs_three")
    assert cas.all_played
    assert list(resp.answers) == ["team", "urgency", "spam"]
    assert [a.type for a in resp.answers.values()] == ["choice", "score", "noul"]
    assert resp.usage.n_calls == 3 and resp.usage.output_tokens == 3


def test_names_readout(cassette):
    resp, cas = run(cassette, "logprobs_names")
    assert cas.all_played
    assert resp.debug["labels"] == {"team": "names", "urgency": "names", "spam": "names"}
    assert sum(resp.answers["team"].probabilities.values()) == pytest.approx(1.0)


def test_grammar_uses_the_logprob_readout(cassette):
    resp, cas = run(cassette, "grammar_choice")
    assert cas.all_played
    body = cas.requests[0].body
    assert b'"grammar": "root ::= \\"A\\" | \\"B\\" | \\"C\\""' in body or b'root ::= \\"A\\"' in body
    assert resp.debug["methods"] == {"team": "grammar"}
    assert list(resp.answers["team"].probabilities.values()) == pytest.approx(
        expected(recorded_windows("grammar_choice")[0], list("ABC")))


def test_a_window_that_misses_labels_zeroes_and_lists_them(cassette):
    resp, cas = run(cassette, "window_misses_label")
    missing = resp.debug["labels_missing"]["topic"]
    assert len(missing) >= 20
    probs = resp.answers["topic"].probabilities
    assert all(probs[f"topic_{ord(lab) - 65:02d}"] == 0.0 for lab in missing)
    assert sum(probs.values()) == pytest.approx(1.0)


def test_truncated_json_is_retried_then_reported(cassette):
    exc, cas = run(cassette, "truncated_generation")
    assert isinstance(exc, IncompleteAnswerError) and exc.field == "max_tokens"
    assert "raise max_tokens" in str(exc)
    assert cas.play_count == 2  # one corrective retry within n_retry_malformed=1


def test_a_non_label_reply_gets_one_corrective_retry_then_the_last_reason(cassette):
    exc, cas = run(cassette, "non_label_retry")
    assert isinstance(exc, LabelReadoutError) and "is not one of the labels" in str(exc)
    assert cas.play_count == 2
    assert b"Your previous reply was invalid" in cas.requests[1].body


def test_structured_and_discrete_answers(cassette):
    resp, _ = run(cassette, "structured_choice")
    assert resp.debug["methods"] == {"team": "structured"}
    assert sum(resp.answers["team"].probabilities.values()) == pytest.approx(1.0)
    resp, _ = run(cassette, "discrete_choice")
    assert resp.debug["methods"] == {"team": "discrete", "urgency": "discrete"}
    assert resp.answers["team"].confidence == 1.0 and max(resp.answers["team"].probabilities.values()) == 1.0
    assert resp.answers["urgency"].score == int(resp.answers["urgency"].score)


def test_a_json_value_outside_the_schema_is_a_typed_error_after_one_re_ask(cassette):
    """A real server's {"noul": 2} (the schema says at most 1; llama.cpp's grammar does not bound numbers)."""
    exc, cas = run(cassette, "structured_out_of_range")
    assert isinstance(exc, MalformedAnswerError) and "noul" in str(exc) and "[0, 1]" in str(exc)
    assert cas.all_played and len(cas.requests) == 2  # re-asked once, then the typed error: never clamped


def test_system2_ratings(cassette):
    resp, cas = run(cassette, "system2_ratings")
    assert cas.all_played
    assert resp.debug["passes"] == {"team": "system2", "spam": "system2"}
    assert resp.debug["methods"] == {"team": "ratings", "spam": "ratings"}
    assert b"max_tokens" not in cas.requests[0].body  # no output ceiling on System 2


def test_mode_auto_escalates_only_the_unsure_answer(cassette):
    resp, cas = run(cassette, "mode_auto")
    assert cas.all_played
    esc = resp.debug["escalations"]
    assert esc["team"]["escalated"] and esc["team"]["confidence"] < 0.7
    assert not esc["spam"]["escalated"] and esc["spam"]["confidence"] >= 0.7
    assert resp.debug["passes"] == {"team": "system2", "spam": "system1"}
    assert resp.usage.n_calls == 3


def test_debias_asks_three_content_free_states_once_and_divides_them_out(cassette):
    import json

    from jev_shared.labels import name_fold
    from jev_shared.readout import read_labels

    resp, cas = run(cassette, "logprobs_debias")
    assert cas.all_played and resp.usage.n_calls == 8  # per question: the state, then N/A, "" and [MASK]
    data = yaml.safe_load((CASSETTES / "logprobs_debias.yaml").read_text())
    team = [json.loads(i["response"]["body"]["string"])["choices"][0] for i in data["interactions"][:4]]
    names = ["billing", "technical", "sales"]
    reads = [read_labels(c["logprobs"], names, content=c["message"]["content"], missing="floor",
                         fold=name_fold(names)).probs for c in team]
    prior = [sum(r[i] for r in reads[1:]) / 3 for i in range(3)]
    assert list(resp.debug["priors"]["team"].values()) == pytest.approx(prior)
    ratio = [p / q for p, q in zip(reads[0], prior)]
    assert list(resp.answers["team"].probabilities.values()) == pytest.approx([r / sum(ratio) for r in ratio])
