"""The "ask a human" band: an unsure decision pauses the graph for a person instead of being run or refused.

:func:`ask_human` raises LangGraph's ``interrupt``; the graph (an agent made with a checkpointer)
resumes with ``Command(resume=...)``. A guarded tool call asks in the shape of LangChain's
``HumanInTheLoopMiddleware`` per-call request (``type: "tool_approval"``), and reads its answers
(``approve``, ``edit``, ``reject``, ``respond``), so a client that serves one serves both.
"""

from __future__ import annotations

from typing import Any

#: The answers a person may give to a tool-call review, as in HumanInTheLoopMiddleware.
REVIEW_DECISIONS = ("approve", "edit", "reject", "respond")


def ask_human(value: dict[str, Any]) -> Any:
    """Pause for a person (LangGraph's ``interrupt(value)``) and return their answer once resumed."""
    try:
        from langgraph.types import interrupt
    except ImportError as exc:  # pragma: no cover - langgraph comes with langchain
        raise ImportError("the ask-a-human band needs langgraph: pip install 'langchain>=1.0'") from exc
    try:
        return interrupt(value)
    except (RuntimeError, KeyError) as exc:
        raise RuntimeError(
            "the ask-a-human band pauses a LangGraph graph: run this inside one that has a checkpointer "
            "(e.g. create_agent(..., checkpointer=InMemorySaver())), or leave the band unset"
        ) from exc


def review_answer(answer: Any) -> dict[str, Any]:
    """A person's answer to a tool-call review, checked: ``{"type": "approve" | "edit" | "reject" | "respond"}``."""
    if isinstance(answer, str):
        answer = {"type": answer}
    if not isinstance(answer, dict) or answer.get("type") not in REVIEW_DECISIONS:
        raise ValueError(f"a tool-call review answers {{'type': one of {list(REVIEW_DECISIONS)}}}, got {answer!r}")
    if answer["type"] == "edit" and not isinstance((answer.get("edited_action") or {}).get("args"), dict):
        raise ValueError(f"an 'edit' answer carries edited_action={{'name': ..., 'args': {{...}}}}, got {answer!r}")
    if answer["type"] == "respond" and not isinstance(answer.get("message"), str):
        raise ValueError(f"a 'respond' answer carries message='...', got {answer!r}")
    return answer


def reviewer_message(tool: str, answer: dict[str, Any]) -> tuple[str, str]:
    """What the agent reads for a rejected or answered call, and the ToolMessage status."""
    if answer["type"] == "respond":
        return answer["message"], "success"
    reason = answer.get("message")
    text = (f"A person rejected the call to '{tool}': {reason}" if reason else
            f"A person rejected the call to '{tool}'; the tool did not run. Do not retry it unless the user asks.")
    return text, "error"
