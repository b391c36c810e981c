"""LangChain's shapes to the engine's and back: states, decision questions, decision responses.

LangChain's question types (``langchain_core.decisions``) allow JSON wherever the engine takes
text; JSON is rendered as compact JSON text, so the model reads the same structure. The engine reads
text only: a ``Box`` question or a media block anywhere is refused by name before any request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.decisions import Box, ClassifierResponse, NoulCriteria
from langchain_core.decisions import Choice as LcChoice
from langchain_core.decisions import ChoiceAnswer as LcChoiceAnswer
from langchain_core.decisions import Noul as LcNoul
from langchain_core.decisions import NoulAnswer as LcNoulAnswer
from langchain_core.decisions import Score as LcScore
from langchain_core.decisions import ScoreAnswer as LcScoreAnswer
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.prompt_values import PromptValue
from pydantic import BaseModel

from jev_shared import (
    Choice,
    ChoiceAnswer,
    InvalidQuestionError,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
    SystemOneResponse,
    Usage,
)

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
#: LangChain's standard content blocks that carry media rather than text.
MEDIA_BLOCKS = frozenset({"image", "image_url", "audio", "input_audio", "video", "file"})
#: The method a foreign decision model's answers are reported under (it does not say how it read them).
FOREIGN_METHOD = "decision_model"


# -- states -----------------------------------------------------------------------------------------

def to_state(value: Any) -> Any:
    """A LangChain input as an engine state: text, a JSON object or list, or chat turns."""
    if isinstance(value, PromptValue):
        value = value.to_messages()
    if isinstance(value, BaseMessage):
        return value.text
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, BaseMessage) for m in value):
        return [turn(m) for m in value]
    return _jsonable(value)


def turn(message: BaseMessage) -> dict[str, Any]:
    """One message as a chat turn; an AI message keeps the tool calls it asked for."""
    out: dict[str, Any] = {"role": _ROLES.get(message.type, message.type), "content": message.text}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    return out


def _jsonable(value: Any) -> Any:
    """Messages and pydantic models nested in a dict or list, as plain JSON."""
    if isinstance(value, BaseMessage):
        return turn(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def refuse_media(value: Any, where: str) -> None:
    """Raise, naming the place, when a media block sits anywhere in ``value`` (messages included)."""
    if isinstance(value, BaseMessage):
        refuse_media(value.content, f"{where}.content")
    elif isinstance(value, Mapping):
        kind = value.get("type")
        if isinstance(kind, str) and kind in MEDIA_BLOCKS:
            raise InvalidQuestionError(f"{where}: a {kind!r} block; the jev engine reads text only, so media "
                                       "cannot be sent (describe it in text, or use a multimodal decision model)",
                                       field=where.split(".", 1)[0].split("[", 1)[0])
        for k, v in value.items():
            refuse_media(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            refuse_media(v, f"{where}[{i}]")


# -- questions --------------------------------------------------------------------------------------

def text_of(value: Any) -> str | None:
    """LangChain ``Content`` / ``JsonValue`` as the engine's text: strings as they are, JSON as JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def engine_question(qid: str, question: Any) -> Choice | Score | Noul:
    """One LangChain decision question as the engine's; Box (and media) refused by name."""
    if isinstance(question, Mapping):
        question = _LC_TYPES.get(question.get("type"), LcNoul).model_validate(question)
    if isinstance(question, Box):
        raise InvalidQuestionError("a Box question (locate something in an image) cannot be answered: the jev "
                                   "engine reads text only; ask Noul, Choice or Score", question_id=qid, field="type")
    refuse_media(question.model_dump(), f"questions[{qid!r}]")
    instructions = text_of(question.instructions) or ""
    if isinstance(question, LcChoice):
        options: dict[str, Any] = {k: text_of(v) for k, v in question.criteria.items()}  # a null: Choice refuses it
        return Choice(instructions=instructions, criteria=options)
    if isinstance(question, LcScore):
        return Score(instructions=instructions, criteria=[text_of(v) or "" for v in question.criteria])
    if isinstance(question, LcNoul):
        criteria = question.criteria
        sides = {} if criteria is None else {k: text_of(getattr(criteria, k)) for k in ("true", "false")}
        return Noul(instructions=instructions, criteria={k: v for k, v in sides.items() if v is not None} or None)
    raise InvalidQuestionError(f"not a decision question: {type(question).__name__}", question_id=qid, field="type")


_LC_TYPES: dict[Any, type[BaseModel]] = {"noul": LcNoul, "choice": LcChoice, "score": LcScore, "box": Box}


def lc_question(question: Choice | Score | Noul) -> Any:
    """The engine's question as LangChain's, for another provider's decision model (examples stay behind)."""
    if isinstance(question, Choice):
        return LcChoice(instructions=question.instructions, criteria={k: v or None for k, v in question.criteria.items()})
    if isinstance(question, Score):
        levels = question.criteria.values() if isinstance(question.criteria, dict) else question.criteria
        return LcScore(instructions=question.instructions, criteria=list(levels))
    criteria = NoulCriteria(**question.criteria) if question.criteria else None
    return LcNoul(instructions=question.instructions, criteria=criteria)


# -- responses --------------------------------------------------------------------------------------

def lc_answer(answer: Any, question: Any) -> Any:
    """One engine answer as LangChain's; a score's legend is the rubric as the caller gave it."""
    if isinstance(answer, NoulAnswer):
        return LcNoulAnswer(type="noul", noul=answer.noul)
    if isinstance(answer, ChoiceAnswer):
        return LcChoiceAnswer(type="choice", choice=answer.choice, probabilities=answer.probabilities,
                              confidence=answer.confidence)
    legend = list(question.criteria) if isinstance(question, LcScore) else list(answer.legend.values())
    return LcScoreAnswer(type="score", score=answer.score, legend=dict(enumerate(legend)),
                         probabilities={int(k): p for k, p in answer.probabilities.items()},
                         confidence=answer.confidence)


def lc_usage(usage: Usage) -> UsageMetadata | None:
    """The engine's token counts as LangChain's usage (None when the provider gave none)."""
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    n_in, n_out = usage.input_tokens or 0, usage.output_tokens or 0
    return UsageMetadata(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)


def engine_response(resp: ClassifierResponse, started: float) -> SystemOneResponse:
    """Another provider's answers as the engine's, so our doors read them as they read ours."""
    answers: dict[str, Any] = {}
    for qid, a in resp.answers.items():
        if isinstance(a, LcNoulAnswer):
            answers[qid] = NoulAnswer(noul=a.noul)
        elif isinstance(a, LcChoiceAnswer):
            answers[qid] = ChoiceAnswer(choice=a.choice, probabilities=a.probabilities, confidence=a.confidence)
        elif isinstance(a, LcScoreAnswer):
            answers[qid] = ScoreAnswer(score=a.score, legend={str(k): text_of(v) or "" for k, v in a.legend.items()},
                                       probabilities={str(k): p for k, p in a.probabilities.items()},
                                       confidence=a.confidence)
    usage: Mapping[str, Any] = resp.usage or {}
    return SystemOneResponse(
        model=resp.model, answers=answers,
        usage=Usage(input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"), n_calls=1,
                    latency_ms=(time.perf_counter() - started) * 1000.0),
        debug={"methods": dict.fromkeys(answers, FOREIGN_METHOD), "request_id": resp.request_id})
