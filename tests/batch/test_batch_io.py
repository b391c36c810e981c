"""Batch files: reading states, the answer log's durability rules, the cost preview against the wire."""

from __future__ import annotations

import json

import pytest

from jev_shared.batch import BatchTotals, Item, ItemResult, decide_batch
from jev_shared.batch.files import (
    CHARS_PER_TOKEN,
    TOKENS_PER_MESSAGE,
    AnswerLog,
    InputError,
    estimate,
    read_items,
    read_log,
    repair_tail,
    to_decide,
)
from jev_shared.batch.report import review_rows, summarize
from jev_shared.cli.decide_batch import PlainProgress
from tests.batch.conftest import QUESTIONS
from tests.batch.test_batch_api import sync_client, tickets


def test_jsonl_and_csv_inputs(tmp_path):
    j = tmp_path / "s.jsonl"
    j.write_text('{"id": "a", "state": "x"}\n\n{"id": 2, "state": {"k": "v"}}\n')
    assert read_items(j) == [Item("a", "x"), Item(2, {"k": "v"})]
    c = tmp_path / "s.csv"
    c.write_text("text,other\nhello,1\n\"with, comma\",2\n")
    assert read_items(c) == [Item(1, "hello"), Item(2, "with, comma")]  # no id column: row numbers


@pytest.mark.parametrize("body,words", [
    ('{"id": "a"}\n', "expected"), ("not json\n", "not JSON"), ('{"id": true, "state": "x"}\n', "string or an integer"),
    ('{"id": 1, "state": "x"}\n{"id": "1", "state": "y"}\n', "ids must be unique"),
])
def test_bad_jsonl_names_the_line(tmp_path, body, words):
    p = tmp_path / "s.jsonl"
    p.write_text(body)
    with pytest.raises(InputError, match=words):
        read_items(p)


def result(id_, choice="billing", conf=0.9) -> ItemResult:
    from jev_shared import ChoiceAnswer, SystemOneResponse

    resp = SystemOneResponse(model="m", answers={"team": ChoiceAnswer(choice=choice, probabilities={choice: 1.0},
                                                                      confidence=conf)})
    return ItemResult(id_, 0, response=resp)


def test_the_log_appends_durable_lines_and_cuts_a_torn_tail(tmp_path):
    path = tmp_path / "a.jsonl"
    with AnswerLog(path) as log:
        log.write(result("a"))
        log.write(result(2))
    path.write_bytes(path.read_bytes() + b'{"id": "c", "answ')
    assert set(read_log(path)) == {"a", "2"}  # the torn line is never read as an answer
    assert repair_tail(path) == len(b'{"id": "c", "answ') and path.read_bytes().endswith(b"\n")
    with AnswerLog(path) as log:
        log.write(result("c"))
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["a", 2, "c"]


def test_what_is_left_to_decide(tmp_path):
    done = {"a": {"id": "a", "answers": {}, "error": None}, "2": {"id": 2, "answers": None, "error": {"type": "x"}}}
    items = [Item("a", "s"), Item(2, "s"), Item("n", "s")]
    assert [i.id for i in to_decide(items, done)] == ["n"]
    assert [i.id for i in to_decide(items, done, retry_failed=True)] == [2, "n"]


def test_the_estimate_measures_the_messages_the_engine_sends(stub):
    items = [Item(i, s) for i, s in tickets(4)]
    client = sync_client(stub)
    est = estimate(client, items, QUESTIONS)
    assert stub.requests == 0  # the preview sends nothing
    decide_batch(client, items, QUESTIONS)
    sent = [m for body in stub.bodies for m in body["messages"]]
    assert est["requests"] == stub.requests == 8 and est["output_tokens"] == 8
    assert est["input_tokens"] == int(sum(len(m["content"]) for m in sent) / CHARS_PER_TOKEN) \
        + TOKENS_PER_MESSAGE * len(sent)


def test_summary_and_review_queue_over_the_whole_log():
    records = {"a": result("a", conf=0.9).to_json(), "b": result("b", conf=0.2).to_json(),
               "c": {"id": "c", "answers": None, "error": {"type": "backend_error"}}}
    questions = {"team": {"type": "choice"}, "spam": {"type": "noul"}}
    s = summarize(records, questions, BatchTotals(), n_input=4, skipped=1, threshold=0.5)
    assert (s["answered"], s["failed"], s["missing"]) == (2, {"backend_error": 1}, 1)
    assert s["below_threshold"] == {"team": {"answered": 2, "below": 1, "share": 0.5}}
    assert [r["id"] for r in review_rows(records, questions, 0.5)] == ["b"]


def test_the_plain_progress_line_has_rate_and_eta(capsys):
    bar = PlainProgress(total=4, initial=1, every_s=0)
    bar.update(1)
    bar.update(2)
    err = capsys.readouterr().err
    assert "2/4" in err and "item/s" in err and "ETA" in err and "4/4" in err
