"""Run every README / docs code block that runs (tests/readme_blocks.py) and print, for each, the outcomes
its comments state beside what it printed now: re-run after a change of defaults or model and compare.

    python scripts/readme_outcomes.py                  # every runnable block (the embedded Qwen model; a few min)
    python scripts/readme_outcomes.py README.md:102    # the blocks whose name (page:line) contains this
    JEV_NO_CACHE=1 python scripts/readme_outcomes.py   # as a first run would: every prior asked again

The demo's outcomes (README's first paragraphs): `python scripts/timed_lines.py bash scripts/demo.sh`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.readme_blocks import all_blocks, run_block  # noqa: E402

STATED = re.compile(r"#.*(\d\.\d|\d+ s\b|\bblocked\b|\bruns?\b|team:)")


def brief(answer: dict) -> dict:
    """An answer's value: the choice with its probability, the score, or P(true)."""
    if "choice" in answer:
        return {"choice": answer["choice"], "p": round(answer["probabilities"][answer["choice"]], 3)}
    return {k: round(v, 3) for k, v in answer.items() if k in ("score", "noul")}


def summary(out: str) -> list[str]:
    """What a block printed: every System One answer in it, one line each (a `jev` or curl reply spans
    many lines, among server logs), then its last plain lines."""
    answers, i, decoder = [], 0, json.JSONDecoder()
    while (i := out.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(out, i)
        except ValueError:
            i += 1
            continue
        if isinstance(obj, dict) and isinstance(obj.get("answers"), dict):
            answers.append("answers " + json.dumps({q: brief(a) for q, a in obj["answers"].items()})
                           + f" in {obj.get('usage', {}).get('n_calls')} calls")
        i = end if isinstance(obj, dict) else i + 1
    plain = [line for line in out.strip().splitlines() if not line.lstrip().startswith(("{", "}", '"', "]"))]
    return answers + plain[-8:]


def main(argv: list[str]) -> int:
    picked = [b for b in all_blocks() if b.runs and (not argv or any(a in b.name for a in argv))]
    failed = 0
    for block in picked:
        print(f"== {block.name} ({' '.join(sorted(block.tags))})", flush=True)
        for line in block.code.splitlines():
            if STATED.search(line):
                print(f"   states: {line.strip()}")
        if "llamaindex" in block.tags and importlib.util.find_spec("llama_index") is None:
            print("   skipped: needs llama_index; run this script with .venv-openai2/bin/python for it\n")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            try:
                rc, out, err = run_block(block, Path(tmp))
            except Exception as exc:  # a block that cannot run here (a missing extra): say so, go on
                rc, out, err = None, "", repr(exc)
        for line in summary(out):
            print(f"   now:    {line[:200]}")
        if rc != 0:
            failed += 1
            print(f"   FAILED (exit {rc}): {err.strip()[-600:]}")
        print(flush=True)
    print(f"{len(picked)} blocks, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
