"""Question validation: every bad question fails before any request, naming the id and the field."""

from __future__ import annotations

import math

import pytest

from jev_shared import Choice, Example, InvalidQuestionError, Noul, Score, SystemOneClient
from jev_shared.questions import check_state, labels_for, prepare_question
from tests.helpers import provider

#: Every provider double a test here made: validation must stop bad input before any of them hears a request.
MADE: list = []


def never_called(req):
    raise AssertionError(f"a request was sent for invalid input: {req.body}")


@pytest.fixture(autouse=True)
def no_request_is_sent():
    MADE.clear()
    yield
    assert [f.wire for f in MADE if f.wire] == [], "a request was sent for invalid input"


def client(**kw):
    fake = provider(never_called)
    MADE.append(fake)
    return SystemOneClient(fake, model="m", **kw)


@pytest.mark.parametrize(
    ("question", "field", "match"),
    [
        (Choice(instructions="pick", criteria={}), "criteria", "1 to 255 options"),
        (Choice(instructions="pick", criteria={f"o{i}": "" for i in range(256)}), "criteria", "1 to 255 options"),
        (Choice(instructions="pick", criteria={"a": "", " ": ""}), "criteria", "non-empty"),
        (Choice(instructions="pick", criteria={"a": "", " a": ""}), "criteria", "duplicate"),
        (Choice(instructions="  ", criteria={"a": ""}), "instructions", "empty"),
        (Score(instructions="rate", criteria=["only one"]), "criteria", "2 to 10 levels"),
        (Score(instructions="rate", criteria=[str(i) for i in range(11)]), "criteria", "2 to 10 levels"),
        (Noul(instructions="is it", criteria={"true": "yes", "maybe": "?"}), "criteria", "only 'true' and 'false'"),
    ],
)
def test_invalid_question_names_id_and_field(question, field, match):
    with pytest.raises(InvalidQuestionError, match=match) as info:
        client().system_one("some state", {"q1": question})
    assert info.value.question_id == "q1"
    assert info.value.field == field
    assert str(info.value).startswith(f"q1.{field}:")


def test_dict_questions_are_validated_with_the_field_named():
    with pytest.raises(InvalidQuestionError) as info:
        client().system_one("s", {"team": {"type": "choice", "instructions": "x", "criteria": "not a dict"}})
    assert info.value.question_id == "team" and info.value.field == "criteria"


def test_more_than_26_options_on_a_token_method_with_letters_names_the_json_methods():
    q = Choice(instructions="pick", criteria={f"o{i}": "" for i in range(27)})
    for method in ("logprobs", "grammar"):
        with pytest.raises(InvalidQuestionError, match="labels='names'.*structured.*discrete"):
            client(method=method, labels="letters").system_one("state", {"q": q})
    assert prepare_question("q", q, "logprobs", (), "names").keys[-1] == "o26"  # names read past 26
    prep = prepare_question("q", q, "structured")
    assert prep.labels[:3] == ("AA", "AB", "AC") and len(set(prep.labels)) == 27


def test_labels_run_a_to_z_then_two_letters():
    assert labels_for(3) == ["A", "B", "C"]
    assert labels_for(26)[-1] == "Z"
    assert labels_for(255)[-1] == "JU" and len(set(labels_for(255))) == 255


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ({}, "empty"),
        ([], "empty"),
        ({"x": math.nan}, "NaN or Infinity at state.x"),
        ({"x": [1, math.inf]}, r"NaN or Infinity at state.x\[1\]"),
        (object(), "must be text"),
        (42, "must be text"),
        ({"x": {1, 2}}, "not JSON-serialisable"),
    ],
)
def test_bad_state_is_refused_before_any_request(state, match):
    with pytest.raises(InvalidQuestionError, match=match) as info:
        client().system_one(state, {"q": Noul(instructions="is it")})
    assert info.value.field == "state"


def test_accepted_states():
    for state in ("text", {"a": 1}, [1, 2], [{"role": "user", "content": "hi"}]):
        check_state(state)


def test_examples_must_answer_with_an_option():
    q = Choice(instructions="pick", criteria={"a": "", "b": ""}, examples=[Example(state="s", answer="c")])
    with pytest.raises(InvalidQuestionError, match="not one of the options") as info:
        client().system_one("state", {"q": q})
    assert info.value.field == "examples[0].answer"
    with pytest.raises(InvalidQuestionError, match="empty"):
        client().system_one("state", {"q": Noul(instructions="x", examples=[Example(state="", answer=True)])})


def test_no_questions_and_bad_options_are_refused():
    with pytest.raises(InvalidQuestionError, match="non-empty mapping"):
        client().system_one("state", {})
    with pytest.raises(ValueError, match="auto_threshold"):
        client(auto_threshold=1.5)
    with pytest.raises(ValueError, match="layout"):
        client(layout="sideways")
    with pytest.raises(ValueError, match="method"):
        client(method="telepathy")


def test_a_choice_description_may_be_none_as_in_langchain():
    from jev_shared import Choice
    from jev_shared.prompt import render
    from jev_shared.questions import prepare_question

    prep = prepare_question("team", Choice(instructions="Which team?", criteria={"billing": None, "sales": "deals"}),
                            "logprobs")
    assert prep.descriptions == ("", "deals")
    system = render(prep, "x")[0]["content"]
    assert "A: billing\nB: sales — deals" in system
