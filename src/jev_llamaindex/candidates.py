"""The candidates (LlamaIndex ``ToolMetadata``) as engine questions: option keys, one Choice, or one Noul each.

What a selection sends is decided here, without I/O, so the sync and async selectors share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.schema import QueryBundle
from llama_index.core.tools.query_engine import DEFAULT_NAME as QUERY_ENGINE_TOOL_NAME
from llama_index.core.tools.retriever_tool import DEFAULT_NAME as RETRIEVER_TOOL_NAME
from llama_index.core.tools.types import ToolMetadata

from jev_shared import MAX_SINGLE_TOKEN_LABELS, TOKEN_METHODS, Choice, InvalidQuestionError, Noul

__all__ = ["QUESTION_ID", "Labels", "Plan", "option_keys", "choice_plan", "noul_plan"]

#: The question id of the single-choice question (what ``resp.method_of`` is asked about).
QUESTION_ID = "route"
Labels = Literal["letters", "names"]
#: The names LlamaIndex gives tools built without one: placeholders, not names.
PLACEHOLDER_NAMES = frozenset({QUERY_ENGINE_TOOL_NAME, RETRIEVER_TOOL_NAME})


@dataclass(frozen=True)
class Plan:
    """One selection's request: the candidates' keys by index, the engine questions, the per-call options."""

    keys: list[str]
    questions: dict[str, Choice | Noul]
    options: dict[str, Any]


def option_keys(choices: Sequence[ToolMetadata]) -> list[str]:
    """Option keys for the candidates: their names, or ``choice_1``... when any name is missing.

    LlamaIndex names unnamed tools ``query_engine_tool`` / ``retriever_tool``; those count as
    missing, so routers built without names (as in LlamaIndex's own router examples) still work.
    Real names are what the model reads beside each description, so duplicates would make two
    candidates indistinguishable: they are rejected rather than silently merged.
    """
    if not choices:
        raise InvalidQuestionError("there are no choices to select from; pass at least one tool", field="choices")
    if not _all_named(choices):
        return [f"choice_{i + 1}" for i in range(len(choices))]
    names = [(c.name or "").strip() for c in choices]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidQuestionError(
            f"duplicate tool names {dupes}: each candidate needs a unique ToolMetadata.name", field="choices"
        )
    return names


def _all_named(choices: Sequence[ToolMetadata]) -> bool:
    return all((c.name or "").strip() not in PLACEHOLDER_NAMES | {""} for c in choices)


def _description(choice: ToolMetadata) -> str:
    return " ".join((choice.description or "").split())


def _call_options(labels: Labels | None) -> dict[str, Any]:
    """Per-call engine options: ``labels`` when the selector sets them, else the client's own setting."""
    return {} if labels is None else {"labels": labels}


def choice_plan(choices: Sequence[ToolMetadata], query: QueryBundle, prompt: BasePromptTemplate, *,
                method: str, labels: Labels | None, **values: Any) -> Plan:
    """The candidates as one Choice; JSON readout past 26 options when the client's method reads one token."""
    keys = option_keys(choices)
    criteria = {k: _description(c) for k, c in zip(keys, choices)}
    context = "\n".join(f"({i + 1}) {k}: {d}" for i, (k, d) in enumerate(criteria.items()))
    text = prompt.format(query_str=query.query_str, num_choices=len(keys), context_list=context, **values)
    options = _call_options(labels)
    if len(keys) > MAX_SINGLE_TOKEN_LABELS and method in TOKEN_METHODS:
        options["method"] = "structured"
    return Plan(keys, {QUESTION_ID: Choice(instructions=text, criteria=criteria)}, options)


def noul_plan(choices: Sequence[ToolMetadata], query: QueryBundle, prompt: BasePromptTemplate, *,
              labels: Labels | None, max_outputs: int) -> Plan:
    """One Noul per candidate ("is this one relevant?"), keyed by its option key."""
    keys = option_keys(choices)
    nouls: dict[str, Choice | Noul] = {
        k: Noul(instructions=prompt.format(query_str=query.query_str, num_choices=len(keys), max_outputs=max_outputs,
                                           choice_name=k, choice_description=_description(c)))
        for k, c in zip(keys, choices)
    }
    return Plan(keys, nouls, _call_options(labels))
