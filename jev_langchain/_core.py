"""What the router, the gate and the guard share: the engine clients, the state, the traced step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel

from jev_shared import (
    AsyncSystemOneClient,
    Example,
    IncompleteAnswerError,
    InvalidQuestionError,
    LabelReadoutError,
    MalformedAnswerError,
    ModelRefusalError,
    ProviderError,
    SystemOneClient,
    SystemOneResponse,
)

from .chat_model import chat_model_of, jev_async_client_from_chat_model, jev_client_from_chat_model

#: Errors that mean "the model could not decide this time" (as opposed to a misuse, which always raises).
DECISION_ERRORS: tuple[type[Exception], ...] = (
    ProviderError, LabelReadoutError, MalformedAnswerError, ModelRefusalError, IncompleteAnswerError,
)
#: What a failed decision does in a gate or a guard: block (fail closed), allow (fail open) or raise.
ON_ERROR = ("block", "allow", "raise")
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


class Backend:
    """The engine clients one component calls: sync, async, or both (a chat model serves both)."""

    def __init__(self, client: Any, owner: str) -> None:
        self.owner = owner
        self.sync: SystemOneClient | None = None
        self.async_: AsyncSystemOneClient | None = None
        if isinstance(client, SystemOneClient):
            self.sync = client
        elif isinstance(client, AsyncSystemOneClient):
            self.async_ = client
        elif chat_model_of(client) is not None:
            self.sync = jev_client_from_chat_model(client)
            self.async_ = jev_async_client_from_chat_model(client)
        else:
            raise TypeError(
                f"{owner}: client must be a SystemOneClient, an AsyncSystemOneClient or a LangChain chat model, "
                f"got {type(client).__name__}; wrap an OpenAI-compatible client as SystemOneClient(client, model=...)"
            )

    def ask(self, value: Any, state: Callable[[Any], Any] | None, questions: Mapping[str, Any]) -> SystemOneResponse:
        """Ask ``questions`` about the input ``value`` (through ``state`` when given)."""
        if self.sync is None:
            raise TypeError(
                f"{self.owner} was given an AsyncSystemOneClient, which answers async calls only: use "
                "ainvoke/abatch/astream, or pass a SystemOneClient (or a chat model, which serves both)"
            )
        engine_state = state(value) if state is not None else to_state(value)
        try:
            return self.sync.system_one(engine_state, questions)
        except InvalidQuestionError as exc:
            raise self._explain(exc, value, state is not None) from None

    async def aask(self, value: Any, state: Callable[[Any], Any] | None,
                   questions: Mapping[str, Any]) -> SystemOneResponse:
        if self.async_ is None:
            return await run_in_executor(None, self.ask, value, state, questions)  # copies the context: runs nest
        engine_state = state(value) if state is not None else to_state(value)
        try:
            return await self.async_.system_one(engine_state, questions)
        except InvalidQuestionError as exc:
            raise self._explain(exc, value, state is not None) from None

    def _explain(self, exc: InvalidQuestionError, value: Any, custom: bool) -> InvalidQuestionError:
        """Say which component's input was unusable, and how to fix it; other question errors pass."""
        if exc.field != "state":
            return exc
        what = str(exc).removeprefix("state: ")
        if custom:
            return InvalidQuestionError(f"what the {self.owner}'s state= callable returned {what}", field="state")
        return InvalidQuestionError(
            f"the {self.owner} input ({type(value).__name__}) {what}; pass state=<callable> to turn the input "
            "into text, a JSON object or chat turns",
            field="state",
        )


def to_state(value: Any) -> Any:
    """A LangChain input as an engine state: text, a JSON object or list, or chat turns."""
    if isinstance(value, PromptValue):
        value = value.to_messages()
    if isinstance(value, BaseMessage):
        return value.text
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, BaseMessage) for m in value):
        return [_turn(m) for m in value]
    return _jsonable(value)


def _turn(message: BaseMessage) -> dict[str, str]:
    return {"role": _ROLES.get(message.type, message.type), "content": message.text}


def _jsonable(value: Any) -> Any:
    """Messages and pydantic models nested in a dict or list, as plain JSON."""
    if isinstance(value, BaseMessage):
        return _turn(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def signal_or_raise(resp: SystemOneResponse, question_id: str, owner: str) -> None:
    """A readout with no label in its window is a failed decision: its uniform distribution is a
    stand-in, not evidence, and must never open a gate (P(true) = 0.5 meets a 0.5 threshold)."""
    if resp.no_signal(question_id):
        raise LabelReadoutError(f"{owner}: no answer label was in the model's token window, so the model gave no "
                                "signal; the decision failed")


def safe_reason(error: str | None) -> str:
    """What a blocked call tells the agent's model of a failure: its kind, never the provider's raw text."""
    kind = (error or "").split(":", 1)[0].strip()
    return f"the guard could not decide ({kind or 'error'})"


def step(name: str, func: Callable[..., Any], afunc: Callable[..., Awaitable[Any]]) -> RunnableLambda:
    """The decision as its own traced run, so its model calls and its outcome show in a trace."""
    return RunnableLambda(func, afunc=afunc, name=name)


def announce(name: str, decision: BaseModel, config: RunnableConfig) -> None:
    """Dispatch the decision as a custom event (``astream_events``, callback handlers)."""
    dispatch_custom_event(name, decision.model_dump(mode="json"), config=config)


async def aannounce(name: str, decision: BaseModel, config: RunnableConfig) -> None:
    await adispatch_custom_event(name, decision.model_dump(mode="json"), config=config)


def check_threshold(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: must be a number in [0, 1], got {value!r}")
    return float(value)


def check_text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: must be a non-empty string, got {value!r}")
    return value


def check_option(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: must be one of {list(allowed)}, got {value!r}")
    return value


def check_noul_examples(examples: Any) -> list[Example] | None:
    """Yes/no examples answer True/False (or "true"/"false"); checked now, not at the first request."""
    if examples is None:
        return None
    checked = []
    for i, ex in enumerate(examples):
        ex = ex if isinstance(ex, Example) else Example.model_validate(ex)
        if ex.answer not in (True, False, "true", "false") or type(ex.answer) is int:
            raise ValueError(f"examples[{i}].answer: a yes/no example answers True or False, got {ex.answer!r}")
        checked.append(ex)
    return checked


def check_noul_criteria(criteria: Any) -> dict[str, str] | None:
    """Yes/no criteria describe only "true" and "false"; checked now, not at the first request."""
    if criteria is None:
        return None
    if not isinstance(criteria, Mapping) or not set(criteria) <= {"true", "false"}:
        raise ValueError(f"criteria: a yes/no question takes only 'true' and 'false' descriptions, got {criteria!r}")
    return dict(criteria)
