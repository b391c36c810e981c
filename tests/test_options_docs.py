"""Options in the docs: every choice and default the docs and ``--help`` show is the engine's ``Options``.

Read from the documents as they stand: the option table of docs/engine.md (a row per option, its default,
every value it takes named), the surface tables (every ``api``), the flag tables of docs/gateway.md and
docs/batch.md (each engine option's flag with its default), the gateway's ``request.prompt_layout`` row, and
each command's ``--help``. A drift fails here, naming the document, the row and what ``Options`` says.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from jev_shared import Options
from jev_shared.cli import parser
from jev_shared.keywords import Keywords
from jev_shared.options import CHOICES

from .test_options_choices import APP_DEFAULTS

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: Set per call by the client itself, never by a user: not documented as options.
INTERNAL = {"token_ids", "token_paths", "token_texts"}
#: The engine options the applications take from ``Options`` (flag dest -> option).
APP_OPTIONS = {"method": "method", "layout": "layout", "backend_api": "api", "max_concurrency": "max_concurrency",
               "top_logprobs": "top_logprobs", "max_retries": "max_retries"}
#: Which command each flag table documents.
FLAG_TABLES = {"gateway.md": "serve", "batch.md": "decide"}
CODE = re.compile(r"`([^`]*)`")


def _section(text: str, heading: str) -> str:
    """From ``## heading`` to the next heading of that level (its subsections kept)."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _rows(text: str) -> list[list[str]]:
    """Every row of every table (the header's too, not the rule under it), as its cells."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not set(line) <= set("|-: ")]


def _shown(value: Any) -> str:
    """A default as the option table shows it: a Python literal in code."""
    return f'`"{value}"`' if isinstance(value, str) else f"`{value!r}`"


def _constructor_defaults() -> dict[str, Any]:
    params = inspect.signature(Keywords.__init__).parameters
    return {name: p.default for name, p in params.items() if p.kind is p.KEYWORD_ONLY}


def test_the_constructor_keywords_default_to_the_options() -> None:
    keywords = _constructor_defaults()
    for f in dataclasses.fields(Options):
        if f.name in INTERNAL:
            continue
        expected = None if f.default_factory is not dataclasses.MISSING else f.default  # extra_body: None is {}
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            expected = inspect.Parameter.empty  # model: required
        assert keywords[f.name] == expected, f.name


def test_the_engine_docs_give_every_option_its_default_and_values() -> None:
    table = {CODE.fullmatch(r[0])[1]: r for r in _rows(_section((DOCS / "engine.md").read_text(), "Options"))
             if CODE.fullmatch(r[0])}
    keywords = _constructor_defaults()
    for f in dataclasses.fields(Options):
        if f.name in INTERNAL:
            continue
        assert f.name in table, f"docs/engine.md's option table has no row for {f.name!r}"
        row = table[f.name]
        default = keywords[f.name]
        expected = "required" if default is inspect.Parameter.empty else _shown(default)
        assert row[1] == expected, f"docs/engine.md, option {f.name!r}: default {row[1]}, Options says {expected}"
        if f.name in CHOICES and f.name != "api":  # api: the surface tables below
            named = set(CODE.findall(" | ".join(row[2:])))
            missing = [c for c in Options.choices(f.name) if c not in named]
            assert not missing, f"docs/engine.md, option {f.name!r}: the values {missing} are not named"


def test_the_engine_docs_name_every_surface() -> None:
    surfaces = {CODE.fullmatch(r[0])[1] for r in _rows(_section((DOCS / "engine.md").read_text(), "Surfaces"))
                if CODE.fullmatch(r[0])}
    missing = [api for api in Options.choices("api") if api != "auto" and api not in surfaces]
    assert not missing, f"docs/engine.md's Surfaces tables have no row for api={missing}"


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return dict(sub.choices)


def _expected(option: str) -> Any:
    return APP_DEFAULTS.get(option, Options.default(option))


@pytest.mark.parametrize("doc", sorted(FLAG_TABLES))
def test_the_flag_tables_give_each_engine_option_its_default(doc: str) -> None:
    actions = {s: a for a in _commands()[FLAG_TABLES[doc]]._actions for s in a.option_strings}  # noqa: SLF001
    seen = set()
    for row in _rows((DOCS / doc).read_text()):
        flags = re.findall(r"`(--[a-z-]+)", row[0])
        if len(row) < 2 or not flags:
            continue
        defaults = CODE.findall(row[1])
        for i, flag in enumerate(flags):
            option = APP_OPTIONS.get(actions[flag].dest) if flag in actions else None
            if option is None:
                continue
            seen.add(option)
            assert len(defaults) == len(flags), f"docs/{doc}, {row[0]}: give each flag its default in code"
            assert defaults[i] == str(_expected(option)), (
                f"docs/{doc}, {flag}: default {defaults[i]!r}, Options says {_expected(option)!r}")
    assert {"method", "layout"} <= seen, f"docs/{doc} documents no --method or --layout"


def test_the_gateways_prompt_layout_names_the_wires_values() -> None:
    from jev_shared.gateway.schema import Layout

    row = next(r for r in _rows((DOCS / "gateway.md").read_text()) if r[0] == "`request.prompt_layout`")
    named = [v for v in CODE.findall(row[2]) if not v.startswith("--")]  # the values, not the flag
    assert set(get_args(Layout)) <= set(named) <= set(Options.choices("layout")), row
    assert f"`{_expected('layout')}`" in row[2], "the row names the gateway's default layout"


def _help_entry(text: str, flag: str) -> str:
    """One flag's entry of ``--help``, its lines joined."""
    entry = re.search(rf"^  {re.escape(flag)}[ =].*?(?=^  -|^\S|\Z)", text, re.M | re.S)
    assert entry is not None, flag
    return " ".join(entry[0].split())


def test_every_commands_help_shows_the_options_choices_and_defaults() -> None:
    seen = set()
    for name, command in _commands().items():
        text = command.format_help()
        for action in command._actions:  # noqa: SLF001
            option = APP_OPTIONS.get(action.dest)
            if option is None or not action.option_strings:
                continue
            seen.add(option)
            entry = _help_entry(text, action.option_strings[0])
            if option in CHOICES:
                offered = tuple(action.choices or ())
                assert set(offered) <= set(Options.choices(option)), (name, action.dest)
                if option != "api":  # --backend-api offers the gateway's subset on purpose
                    assert offered == Options.choices(option), (name, action.dest)
                assert "{" + ",".join(offered) + "}" in entry, (name, entry)
            assert f"(default: {_expected(option)})" in entry, (name, entry)
    assert {"method", "layout", "api"} <= seen
