"""The fenced code blocks of README.md and docs/*.md, and how each is tested (tests/test_readme.py).

A block is tested as the HTML comment on the line just above its fence says (invisible when rendered):

    <!-- readme-test: qwen -->                 run it on the embedded Qwen model (python: as a script; bash: below)
    <!-- readme-test: qwen llamaindex -->      ... needing llama_index (the suite's second pass, .venv-openai2)
    <!-- readme-test: qwen serve -->           ... a bash block that starts `jev serve` (on a free port instead of 8000)
    <!-- readme-test: structure -->            checked, not run: the scripts it names exist and parse

Every python and bash block of README.md carries one. A docs/*.md block without one is a fragment (it uses
names the page defines around it, or a provider key): it is not run, but its install lines and `jev` flags are
checked like every other block's. `pip install` lines are never run; they are checked against pyproject.toml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*readme-test:\s*(?P<tags>[a-z ]+?)\s*(\((?P<why>[^)]*)\))?\s*-->")
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\s*$")
TAGS = {"qwen", "llamaindex", "serve", "structure"}


@dataclass
class Block:
    page: Path
    line: int                     # the fence's line, 1-based
    lang: str
    code: str
    tags: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return "qwen" in self.tags


def blocks(page: Path) -> list[Block]:
    """The python and bash blocks of one page, with the tags of the marker above each."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m["lang"]
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if lang in ("python", "bash"):
            marker = MARKER.search(lines[start - 1]) if start else None
            tags = set(marker["tags"].split()) if marker else set()
            out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", tags))
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def commands(code: str) -> list[str]:
    """A bash block's commands: continuations joined, a quoted string may span lines, comments dropped."""
    out, cur, quote, comment = [], [], None, False
    for ch in re.sub(r"\\\n\s*", " ", code):
        if ch == "\n" and quote is None:
            out.append("".join(cur).strip())
            cur, comment = [], False
        elif comment:
            continue
        elif quote:
            quote = None if ch == quote else quote
            cur.append(ch)
        elif ch == "#" and (not cur or cur[-1].isspace()):
            comment = True
        else:
            quote = ch if ch in "'\"" else None
            cur.append(ch)
    out.append("".join(cur).strip())
    return [c for c in out if c]
