"""Labels: ``jev decide --label`` checks each row's true answer before any request and writes it on the row's
line; ``jev calibrate`` reads those lines as they are (the loop from a labelled file to a calibration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jev_shared import ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse
from jev_shared.batch import Item, ItemResult
from jev_shared.batch.files import InputError, read_items
from jev_shared.batch.labels import LabelError, labeler, labelled_records
from jev_shared.cli import main
from tests.batch.conftest import QUESTIONS
from tests.batch.test_cli_batch import decide, log_lines, write_jsonl

URGENCY = {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]}
THREE = {**QUESTIONS, "urgency": URGENCY}


def test_a_bare_column_labels_the_only_question_and_qid_equals_names_one_of_several():
    one = labeler(["label"], {"team": QUESTIONS["team"]})
    assert one is not None and [(c.question_id, c.column) for c in one.columns] == [("team", "label")]
    several = labeler(["team=t", "spam=is_spam"], QUESTIONS)
    assert several is not None and [(c.question_id, c.kind, c.column) for c in several.columns] == [
        ("team", "choice", "t"), ("spam", "noul", "is_spam")]
    assert labeler(None, QUESTIONS) is None


@pytest.mark.parametrize("flags,words", [
    (["label"], "the questions are 'team', 'spam'; name the one this column labels: --label QUESTION_ID=label"),
    (["team=a", "team=b"], "question 'team' is labelled twice"),
    (["team="], "no column after team="),
])
def test_a_label_flag_that_names_no_one_question_is_refused(flags, words):
    with pytest.raises(LabelError, match=words.replace("(", r"\(")):
        labeler(flags, QUESTIONS)


@pytest.mark.parametrize("qid,value,label", [
    ("team", "billing", "billing"), ("team", " technical ", "technical"),
    ("spam", True, True), ("spam", "No", False), ("spam", "YES", True), ("spam", "false", False),
    ("spam", 1, True), ("spam", "0", False),
    ("urgency", 2, 2), ("urgency", "0", 0),
    ("team", "", None), ("spam", None, None),                     # unlabelled rows
])
def test_labels_in_the_form_calibrate_reads(qid, value, label):
    lab = labeler([f"{qid}=c"], THREE)
    assert lab is not None
    assert lab.read({"c": value}, "in.csv: row 1") == (None if label is None else {qid: label})


@pytest.mark.parametrize("qid,value,expected", [
    ("team", "biling", "expected one of its options: billing, technical"),
    ("team", "Billing", "expected one of its options"),
    ("urgency", 3, "expected a level's index, 0 to 2"), ("urgency", "high", "0 to 2"), ("urgency", True, "0 to 2"),
    ("urgency", 1.0, "0 to 2"), ("spam", "maybe", "expected true or false"), ("spam", 2, "true or false"),
])
def test_a_label_that_is_not_one_of_the_questions_answers_names_the_row_and_column(qid, value, expected):
    lab = labeler([f"{qid}=truth"], THREE)
    assert lab is not None
    with pytest.raises(LabelError) as exc:
        lab.read({"truth": value}, "in.jsonl:7")
    assert str(exc.value).startswith(f"in.jsonl:7: column 'truth': {value!r} is not a label of question {qid!r}")
    assert expected in str(exc.value)


def test_csv_and_jsonl_rows_carry_their_labels_and_jsonl_takes_column(tmp_path):
    lab = labeler(["label"], {"team": QUESTIONS["team"]})
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("id,text,label\nt1,refund me,billing\nt2,it crashes,\n")
    assert read_items(csv_in, column="text", labels=lab) == [Item("t1", "refund me", {"team": "billing"}),
                                                             Item("t2", "it crashes", None)]
    jsonl_in = write_jsonl(tmp_path / "in.jsonl", [{"text": "refund me", "label": "billing"},
                                                   {"text": "it crashes", "label": "technical", "id": "x"}])
    assert read_items(jsonl_in, column="text", labels=lab) == [Item(1, "refund me", {"team": "billing"}),
                                                               Item("x", "it crashes", {"team": "technical"})]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"text": "a", "label": "billing"}, {"text": "b", "label": "sales"}])
    with pytest.raises(LabelError, match=r"bad.jsonl:2: column 'label': 'sales' is not a label of question 'team'"):
        read_items(bad, column="text", labels=lab)
    with pytest.raises(InputError, match=r"bad.jsonl:1: expected a 'body' key \(--column\)"):
        read_items(bad, column="body")


def test_a_label_column_the_input_lacks_is_refused(tmp_path):
    lab = labeler(["truth"], {"team": QUESTIONS["team"]})
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("id,text,label\nt1,refund me,billing\n")
    with pytest.raises(InputError, match=r"no column 'truth' for --label \(columns: \['id', 'text', 'label'\]\)"):
        read_items(csv_in, labels=lab)
    jsonl_in = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "refund me", "label": "billing"}])
    with pytest.raises(InputError, match="no row has a label in 'truth'"):
        read_items(jsonl_in, labels=lab)


def test_a_bad_label_stops_the_run_before_any_request(stub, tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "want=billing", "label": "billing"},
                                              {"id": "b", "text": "want=sales", "label": "sales"}])
    out = decide(stub, tmp_path, inp, "--column", "text", "--label", "label", questions={"team": QUESTIONS["team"]})
    assert out.returncode == 2 and stub.requests == 0 and not (tmp_path / "answers.jsonl").exists()
    assert "in.jsonl:2: column 'label': 'sales' is not a label of question 'team'" in out.stderr


def stub_rows(n: int) -> list[dict]:
    """Rows the stub answers from their own text; every fourth one's labels disagree with its answer."""
    rows = []
    for i in range(n):
        team, truth = ("billing", "yes") if i % 2 else ("technical", "no")
        wrong = i % 4 == 0
        rows.append({"id": f"r{i}", "text": f"want={team} truth={truth}",
                     "team": ("billing" if team == "technical" else "technical") if wrong else team,
                     "spam": {"yes": "no", "no": "yes"}[truth] if wrong else truth})
    return rows


def test_decide_writes_labels_that_calibrate_reads_unchanged(stub, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", stub_rows(24))
    out = decide(stub, tmp_path, inp, "--column", "text", "--label", "team=team", "--label", "spam=spam")
    assert out.returncode == 0, out.stderr
    lines = log_lines(tmp_path / "answers.jsonl")
    assert len(lines) == 24 and all(set(line["labels"]) == {"team", "spam"} for line in lines)
    r1 = next(line for line in lines if line["id"] == "r1")
    assert r1["labels"] == {"team": "billing", "spam": True} and r1["answers"]["team"]["choice"] == "billing"
    assert main(["calibrate", str(tmp_path / "answers.jsonl"), "--out", str(tmp_path / "cal.json"),
                 "--target", "0.5"]) == 0
    report = capsys.readouterr().out
    assert report.startswith("48 labelled answers")  # 24 lines, two labelled questions each
    assert "accuracy        75.0% ->" in report       # the stub's answers, judged by the rows' own labels


def test_calibrate_says_what_to_do_with_a_log_without_labels(stub, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", stub_rows(4))
    assert decide(stub, tmp_path, inp, "--column", "text", questions={"team": QUESTIONS["team"]}).returncode == 0
    assert "labels" not in log_lines(tmp_path / "answers.jsonl")[0]  # a line without --label is as it always was
    assert main(["calibrate", str(tmp_path / "answers.jsonl"), "--out", str(tmp_path / "cal.json")]) == 2
    err = capsys.readouterr().err
    assert "4 lines from jev decide (0 failed), none with an answer and a label" in err and "--label COLUMN" in err


def response(**answers) -> SystemOneResponse:
    return SystemOneResponse(model="m", answers=answers)


def test_labelled_records_for_each_kind_and_none_for_an_error():
    resp = response(team=ChoiceAnswer(choice="billing", probabilities={"billing": 0.8, "technical": 0.2},
                                      confidence=0.6),
                    spam=NoulAnswer(noul=0.3),
                    urgency=ScoreAnswer(score=1.2, legend={"0": "low", "1": "medium", "2": "high"},
                                        probabilities={"0": 0.2, "1": 0.4, "2": 0.4}, confidence=0.1))
    line = ItemResult("a", 0, response=resp, labels={"team": "technical", "spam": False, "urgency": 2}).to_json()
    line = json.loads(json.dumps(line))  # as the log holds it
    recs = {r.question_id: r for r in labelled_records(line)}
    assert recs["team"].label == "technical" and recs["team"].probabilities == {"billing": 0.8, "technical": 0.2}
    assert recs["spam"].label == "false" and recs["spam"].probabilities == pytest.approx({"true": 0.3, "false": 0.7})
    assert recs["urgency"].label == "2" and recs["urgency"].probabilities["2"] == 0.4
    failed = ItemResult("b", 1, error=RuntimeError("x"), labels={"team": "billing"}).to_json()
    assert failed["labels"] == {"team": "billing"} and labelled_records(failed) == []


def test_calibrate_leaves_out_a_torn_last_line_and_names_a_bad_one(tmp_path, capsys):
    good = [json.dumps({"probabilities": {"a": 0.9, "b": 0.1}, "label": "a" if i % 3 else "b"}) for i in range(8)]
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(good) + '\n{"id": "x", "answ')
    assert main(["calibrate", str(path), "--out", str(tmp_path / "c.json")]) == 0
    assert "labelled.jsonl:9: a torn last line" in capsys.readouterr().err
    path.write_text('{"id": "x", "answ\n' + "\n".join(good) + "\n")
    assert main(["calibrate", str(path), "--out", str(tmp_path / "c.json")]) == 2
    assert "labelled.jsonl:1: not JSON" in capsys.readouterr().err


def test_the_log_line_without_labels_is_unchanged(tmp_path: Path):
    resp = response(spam=NoulAnswer(noul=0.3))
    assert set(ItemResult("a", 0, response=resp).to_json()) == {"id", "answers", "error", "usage"}


def test_calibrate_names_the_line_whose_label_its_answer_lacks(tmp_path, capsys):
    resp = response(team=ChoiceAnswer(choice="billing", probabilities={"billing": 0.8, "technical": 0.2},
                                      confidence=0.6))
    lines = [ItemResult(f"r{i}", i, response=resp, labels={"team": "billing"}).to_json() for i in range(5)]
    lines.append(ItemResult("odd", 5, response=resp, labels={"team": "sales"}).to_json())  # the questions changed
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["calibrate", str(path), "--out", str(tmp_path / "c.json")]) == 2
    assert "answers.jsonl: the line of id 'odd': label 'sales' is not one of the answer's keys" in capsys.readouterr().err


def test_a_label_without_an_input_file_is_refused(capsys):
    assert main(["decide", "--state", "hello", "--questions", json.dumps(QUESTIONS), "--label", "label"]) == 2
    assert "--label names a column of --input's rows" in capsys.readouterr().err


def test_the_batch_api_carries_an_items_labels_onto_its_result(stub):
    from jev_shared.batch import decide_batch
    from tests.batch.test_batch_api import sync_client

    items = [{"id": "a", "state": "want=billing", "labels": {"team": "billing"}},
             Item("b", "want=technical", {"team": "billing"}), ("c", "want=technical")]
    result = decide_batch(sync_client(stub), items, {"team": QUESTIONS["team"]})
    lines = [r.to_json() for r in result.results]
    assert [line.get("labels") for line in lines] == [{"team": "billing"}, {"team": "billing"}, None]
    assert [r.label for line in lines for r in labelled_records(line)] == ["billing", "billing"]
