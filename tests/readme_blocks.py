"""The fenced code blocks of README.md and docs/*.md, and how each is tested (tests/test_readme.py).

A block is tested as the HTML comment on the line just above its fence says (invisible when rendered):

    <!-- readme-test: qwen -->                 run it on the embedded Qwen model (python: as a script; bash: below)
    <!-- readme-test: qwen llamaindex -->      ... needing llama_index (the suite's second pass, .venv-openai2)
    <!-- readme-test: qwen serve -->           ... a bash block that starts `jev serve` (on a free port instead of 8000)
    <!-- readme-test: structure -->            checked, not run: the scripts it names exist and parse
    <!-- readme-test: qwen (expects "^billing ") -->  ... and what it prints must match ^billing (re.M)

Every python and bash block of README.md carries one. A docs/*.md python block without one runs offline, as
written (tests/test_docs_blocks.py), unless `<!-- docs-test: fragment (why) -->` marks it a fragment on purpose
(it uses names the page defines around it, or a provider key); a docs bash block without one is not run. Every
block's install lines and `jev` flags are checked. `pip install` lines are never run; they are checked against
pyproject.toml.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
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
    why: str = ""                 # the marker's words in parentheses

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return "qwen" in self.tags

    @property
    def expects(self) -> str | None:
        """What a runnable block must print, a regular expression (multi-line): `expects "..."` in its marker."""
        m = re.search(r'expects "([^"]+)"', self.why)
        return m[1] if m else None


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
            why = (marker["why"] or "") if marker else ""
            out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", tags, why))
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


def env() -> dict[str, str]:
    """A block's environment: this checkout first, this interpreter's scripts (`jev`) on PATH."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_block(block: Block, workdir: Path, timeout: float = 420) -> tuple[int | None, str, str]:
    """Run a block as a script in ``workdir`` (with ``examples/`` linked in): python as it is; bash under
    ``set -euo pipefail``, its `pip install` lines left out, a `serve` block on a free port instead of 8000.
    Whatever it started in the background is stopped after. Returns (exit status, stdout, stderr)."""
    if not (workdir / "examples").exists():
        (workdir / "examples").symlink_to(ROOT / "examples")
    if block.lang == "python":
        script = workdir / "block.py"
        script.write_text(block.code)
        cmd = [sys.executable, str(script)]
    else:
        code = block.code.replace("8000", str(free_port())) if "serve" in block.tags else block.code
        kept = [line for line in code.splitlines() if not line.lstrip().startswith("pip install")]
        script = workdir / "block.sh"
        script.write_text("set -euo pipefail\n" + "\n".join(kept) + "\n")
        cmd = ["bash", str(script)]
    proc = subprocess.Popen(cmd, cwd=workdir, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:  # a block that started a server in the background (and failed) leaves it behind: stop its group
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if proc.returncode is None:
            proc.communicate()
    return proc.returncode, stdout, stderr
