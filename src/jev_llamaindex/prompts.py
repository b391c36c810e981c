"""The selectors' prompt templates: the defaults, the variables each selector fills, and the check.

A template is the question's *instructions*; the engine adds the options, the state and the
answer format. A variable the selector cannot fill is rejected when the template is set, rather
than sent to the model as ``{foo}``.
"""

from __future__ import annotations

from typing import Literal

from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.prompt_type import PromptType

__all__ = [
    "DEFAULT_SINGLE_SELECT_TMPL",
    "DEFAULT_MULTI_SELECT_TMPL",
    "DEFAULT_MULTI_NOUL_TMPL",
    "QuestionKind",
    "BASE_VARIABLES",
    "CANDIDATE_VARIABLES",
    "checked_template",
]

QuestionKind = Literal["choice", "noul"]

DEFAULT_SINGLE_SELECT_TMPL = (
    "The options are {num_choices} tools, each with a summary of what it can answer. Which tool is the "
    "most relevant to answer the user's question given as the state?"
)
DEFAULT_MULTI_SELECT_TMPL = (
    "The options are {num_choices} tools, each with a summary of what it can answer. Which tool is the "
    "most relevant to answer the user's question given as the state? More than one may be relevant."
)
DEFAULT_MULTI_NOUL_TMPL = (
    "The tool '{choice_name}' is relevant to answer the user's question given as the state. "
    "The tool's summary: {choice_description}"
)

#: What every selector fills: the query, the number of candidates, the numbered candidates.
BASE_VARIABLES = frozenset({"query_str", "num_choices", "context_list"})
#: What a per-candidate statement (``question="noul"``) fills besides, one of which it must use.
CANDIDATE_VARIABLES = frozenset({"choice_name", "choice_description"})


def checked_template(prompt: BasePromptTemplate | str, *, prompt_type: PromptType, variables: frozenset[str],
                     owner: str, question: QuestionKind) -> BasePromptTemplate:
    """``prompt`` as a template whose every variable the selector fills (and, for a noul, names the candidate)."""
    if isinstance(prompt, str):
        prompt = PromptTemplate(prompt, prompt_type=prompt_type)
    filled = variables | set(prompt.kwargs) | set((prompt.template_var_mappings or {}).values())
    unknown = sorted(set(prompt.template_vars) - filled)
    if unknown:
        raise ValueError(
            f"{owner}: the prompt has template variables {unknown} that the selector cannot "
            f"fill; it fills {sorted(variables)}"
        )
    if question == "noul" and not CANDIDATE_VARIABLES & set(prompt.template_vars):
        raise ValueError(
            "JevMultiSelector(question='noul'): the prompt is one statement per candidate, so it must use "
            "{choice_name} or {choice_description}"
        )
    return prompt
