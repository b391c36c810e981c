"""Every python block of docs/*.md runs as written, or says on purpose why it does not.

The comment on the line above a block's fence says how it is tested (invisible when rendered):

    (none)                                      runs here as written, offline: no model, no network, no key
    <!-- readme-test: qwen ... -->              runs on the embedded model: tests/test_readme.py runs it (its
                                                `llamaindex` blocks in the second pass, .venv-openai2)
    <!-- docs-test: fragment (why) -->          not run: a piece of the page's story (names the page defines
                                                around it, a provider key, an index of your own); `why` says so

An offline block that imports llama_index runs where llama_index is installed (the second pass), one that
imports LangChain or LangGraph where they are (the first).
"""

from __future__ import annotations

import importlib.util
import re
import typing

import pytest

from tests.readme_blocks import ROOT, Block, blocks, run_block

DOCS = sorted((ROOT / "docs").glob("*.md"))
FRAGMENT = re.compile(r"<!--\s*docs-test:\s*(?P<what>[a-z]+)\s*(\((?P<why>[^)]*)\))?\s*-->")
#: The optional packages an offline block may need, by the name it imports.
OPTIONAL = {"llama_index": "llama_index", "langchain": "langchain", "langchain_core": "langchain_core",
            "langchain_openai": "langchain_openai", "langgraph": "langgraph"}
TIMEOUT = 120


def python_blocks() -> list[Block]:
    return [b for page in DOCS for b in blocks(page) if b.lang == "python"]


def docs_marker(block: Block) -> re.Match[str] | None:
    """The ``docs-test`` comment on the line just above the block's fence, if any."""
    above = block.page.read_text(encoding="utf-8").splitlines()[block.line - 2] if block.line > 1 else ""
    return FRAGMENT.search(above)


def needs(block: Block) -> set[str]:
    """The optional packages the block imports."""
    found = re.findall(r"^\s*(?:from|import)\s+([a-z_]+)", block.code, re.M)
    return {OPTIONAL[name] for name in found if name in OPTIONAL}


def offline(block: Block) -> bool:
    return not block.tags and docs_marker(block) is None


BLOCKS = python_blocks()
OFFLINE = [b for b in BLOCKS if offline(b)]


def marks(block: Block) -> list[pytest.MarkDecorator]:
    return [pytest.mark.llamaindex] if "llama_index" in needs(block) else []


def test_every_docs_python_block_runs_or_is_a_fragment_on_purpose():
    assert len(BLOCKS) >= 15, [b.name for b in BLOCKS]
    for b in BLOCKS:
        marker = docs_marker(b)
        if marker is None:
            continue
        assert not b.tags, f"{b.name}: marked both to run (readme-test) and as a docs-test {marker['what']}"
        assert marker["what"] == "fragment", f"{b.name}: unknown docs-test marker {marker['what']!r}"
        assert (marker["why"] or "").strip(), f"{b.name}: a fragment says why it does not run: (why)"
    runs = [b for b in BLOCKS if b.runs or offline(b)]
    assert len(runs) * 2 >= len(BLOCKS), f"most docs blocks run: {len(runs)} of {len(BLOCKS)}"
    for page in ("langchain.md", "llamaindex.md", "engine.md"):
        assert any(b.runs and b.page.name == page for b in BLOCKS), f"docs/{page}: no block runs on the model"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT + 30)
@pytest.mark.parametrize("block", [pytest.param(b, marks=marks(b), id=b.name) for b in OFFLINE])
def test_offline_block_runs_as_written(block, tmp_path):
    missing = sorted(p for p in needs(block) if importlib.util.find_spec(p) is None)
    if missing:
        pytest.skip(f"needs {missing}: the other pass of scripts/test.sh runs it")
    rc, stdout, stderr = run_block(block, tmp_path, TIMEOUT)
    assert rc == 0, f"{block.name} failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr[-3000:]


def test_a_response_debug_is_typed_as_always_set():
    """docs/engine.md indexes ``resp.debug[...]``: it is a dict on every response, and typed so."""
    from jev_shared import SystemOneResponse

    assert typing.get_type_hints(SystemOneResponse)["debug"] == dict[str, typing.Any]
    assert SystemOneResponse(model="m", answers={}).debug == {}
