"""The surface registry: a wire is one module and one registry line; no engine module names one."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import jev_shared
from jev_shared import Choice, SystemOneClient
from jev_shared.backend import describe
from jev_shared.calls import Call
from jev_shared.options import Options
from jev_shared.surfaces import registry
from jev_shared.surfaces.chat import parse_chat
from jev_shared.surfaces.wire import Surface

from .helpers.replies import chat_tokens

ENGINE = Path(jev_shared.__file__).parent
#: the package that defines and lists the wires; every other engine module asks the registry
WIRES = ENGINE / "surfaces"


def test_no_engine_module_names_a_per_question_surface() -> None:
    named = re.compile(r"\b(CHAT|RESPONSES|MESSAGES)\b|surface == \"")
    offenders = [str(p.relative_to(ENGINE)) for p in ENGINE.rglob("*.py")
                 if WIRES not in p.parents and named.search(p.read_text())]
    assert offenders == []


def test_registry_lists_every_api_and_its_routes() -> None:
    assert registry.APIS == ("auto", *registry.SURFACES)
    assert all(Options(model="m", api=api).api == api for api in registry.APIS)
    assert registry.AUTO_ORDER == ("responses", "chat_completions", "messages")
    assert registry.HOSTED == ("systemone", "decisions") and registry.APIS[-2:] == registry.HOSTED
    assert registry.ROUTES["chat_completions"] == "/chat/completions"
    assert registry.fallback_of("responses", ("responses", "chat_completions")) == "chat_completions"
    assert registry.fallback_of("responses", ("responses",)) is None
    assert registry.fallback_of("chat_completions", ("responses", "chat_completions")) is None


def _toy_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
              user_extra: dict[str, Any] | None = None) -> Call:
    return Call("toy", {"model": model, "messages": copy.deepcopy(messages), **fields, **extra}, ("toy", "create"))


def test_a_new_surface_is_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wire the engine never heard of, registered by one entry and named by the backend, answers a decision."""
    monkeypatch.setitem(registry.SURFACES, "toy", Surface("toy", ("toy", "create"), None, _toy_call, parse_chat))
    sent: list[dict[str, Any]] = []

    def create(**kwargs: Any) -> dict[str, Any]:
        sent.append(kwargs)
        return chat_tokens({"billing": -0.1, "sales": -2.5})

    client = describe(SimpleNamespace(toy=SimpleNamespace(create=create)), surfaces=("toy",))
    engine = SystemOneClient(client, model="m", method="logprobs", debias=False)
    resp = engine.system_one(state="my invoice", questions={
        "q": Choice(instructions="route", criteria={"billing": "money", "sales": "buy"})})
    assert resp.answers["q"].choice == "billing"  # type: ignore[union-attr]
    assert len(sent) == 1 and sent[0]["max_tokens"] == 1
    assert resp.debug["apis"] == {"q": "toy"}
