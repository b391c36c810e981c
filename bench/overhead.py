"""The engine's client-side cost against the peer engine (``jevper``) and a raw ``chat.completions.create`` loop.

All three run in one process against one local stub server with a fixed latency, so only the
client-side work differs: building the prompt and the request, the SDK call, reading the reply,
assembling the answer. Measured sequentially (one question a call) and with 8 questions at once
(the engines' own concurrency; the raw loop on a persistent pool of 8 threads). The contenders
take turns call by call, so a drift in machine load hits them alike.

    python -m bench overhead [--n 300] [--latency-ms 20] [--write]

Both engines use ``method="logprobs"`` and ``api="chat_completions"`` (the stub speaks only Chat
Completions). The stub answers every request with the one-token reply ``A`` (``finish_reason:
"stop"``, a 20-entry logprob window), which every contender accepts. ``--write`` saves
``docs/benchmarks-overhead.json`` and the table in ``docs/benchmarks.md``.
Aims: the engine no slower than jevper, and within 1.2× of the raw calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from processes import StubServer, reply_body  # noqa: E402

from jev_shared import Choice, SystemOneClient  # noqa: E402
from jev_shared.prompt import render  # noqa: E402
from jev_shared.questions import prepare_question  # noqa: E402

DOCS = ROOT / "docs"
STATE = "My invoice was charged twice, please refund the duplicate payment."
TEAM = Choice(instructions="Which team should handle this ticket?",
              criteria={"billing": "Invoices, refunds", "technical": "Bugs, errors", "sales": "Pricing, plans"})
#: A finished one-token reply: what a model that answers with just the label sends back.
BODY = reply_body("stop")


def contenders(base_url: str) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """name -> (one question, 8 questions at once)."""
    import jevper

    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    messages = render(prepare_question("team", TEAM, "logprobs"), STATE)
    raw_kwargs = dict(model="stub", messages=messages, temperature=0, logprobs=True, top_logprobs=20, max_tokens=1)
    pool = ThreadPoolExecutor(8)

    def raw_one() -> Any:
        return client.chat.completions.create(**raw_kwargs)

    def raw_eight() -> Any:
        return list(pool.map(lambda _: raw_one(), range(8)))

    jev = SystemOneClient(client, model="stub", method="logprobs", api="chat_completions",
                          labels="letters")  # the stub answers letters, as jevper reads them
    peer = jevper.SystemOneClient(client, model="stub", method="logprobs", api="chat_completions", temperature=0)
    peer_team = jevper.Choice(instructions=TEAM.instructions, criteria=dict(TEAM.criteria))
    eight_jev = {f"q{i}": TEAM for i in range(8)}
    eight_peer = {f"q{i}": peer_team for i in range(8)}
    return {
        "raw chat.completions.create": (raw_one, raw_eight),
        "Jev engine": (lambda: jev.system_one(STATE, {"team": TEAM}), lambda: jev.system_one(STATE, eight_jev)),
        "jevper": (lambda: peer.system_one(state=STATE, questions={"team": peer_team}),
                   lambda: peer.system_one(state=STATE, questions=eight_peer)),
    }


def measure(fns: dict[str, Callable[[], Any]], n: int, warmup: int = 5) -> dict[str, list[float]]:
    """Round-robin: each round times every contender once, in a rotating order."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    names = list(fns)
    out: dict[str, list[float]] = {k: [] for k in names}
    for i in range(n):
        for k in names[i % len(names):] + names[: i % len(names)]:
            start = time.perf_counter()
            fns[k]()
            out[k].append((time.perf_counter() - start) * 1000.0)
    return out


def p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


def table(result: dict[str, Any]) -> str:
    lat = result["latency_ms"]
    lines = ["| | 1 question p50 | p95 | client-side (p50 − stub) | 8 concurrent p50 | p95 | vs raw (1 / 8) |",
             "|---|---|---|---|---|---|---|"]
    raw = result["rows"]["raw chat.completions.create"]
    for name, row in result["rows"].items():
        lines.append(
            f"| {name} | {row['one_p50']:.1f} ms | {row['one_p95']:.1f} ms | {row['one_p50'] - lat:.1f} ms | "
            f"{row['eight_p50']:.1f} ms | {row['eight_p95']:.1f} ms | "
            f"{row['one_p50'] / raw['one_p50']:.2f}× / {row['eight_p50'] / raw['eight_p50']:.2f}× |")
    m = result["machine"]
    lines += ["", f"Stub latency {lat:.0f} ms; {result['n']} rounds (1 question) and {result['n_eight']} rounds "
              f"(8 questions), contenders taking turns. {m['cpu']} ({m['cores']} cores), Python {m['python']}, "
              f"load average {m['loadavg_start'][0]:.2f} at start, {m['loadavg_end'][0]:.2f} at end. "
              + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="rounds of one question")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--write", action="store_true", help="save docs/benchmarks-overhead.json and the doc table")
    args = parser.parse_args()
    from compare_routers import machine, replace_section, versions  # noqa: E402 - shared reporting helpers

    info: dict[str, Any] = {"latency_ms": args.latency_ms, "n": args.n, "n_eight": max(20, args.n // 4),
                            "machine": machine(), "versions": {k: v for k, v in versions().items()
                                                               if k in ("jev-integrations", "openai", "jevper", "httpx")}}
    with StubServer(args.latency_ms / 1000.0, BODY) as base_url:
        fns = contenders(base_url)
        one = measure({k: v[0] for k, v in fns.items()}, args.n)
        eight = measure({k: v[1] for k, v in fns.items()}, info["n_eight"])
    info["machine"]["loadavg_end"] = list(os.getloadavg())
    info["rows"] = {k: {"one_p50": statistics.median(one[k]), "one_p95": p(one[k], 95),
                        "eight_p50": statistics.median(eight[k]), "eight_p95": p(eight[k], 95)} for k in fns}
    print(table(info))
    jev, peer, raw = (info["rows"][k] for k in ("Jev engine", "jevper", "raw chat.completions.create"))
    print(f"\nJev / jevper: {jev['one_p50'] / peer['one_p50']:.2f}× (1), {jev['eight_p50'] / peer['eight_p50']:.2f}× (8)"
          f"   aim <= 1.0\nJev / raw:    {jev['one_p50'] / raw['one_p50']:.2f}× (1), "
          f"{jev['eight_p50'] / raw['eight_p50']:.2f}× (8)   aim <= 1.2")
    if args.write:
        (DOCS / "benchmarks-overhead.json").write_text(json.dumps(info, indent=1) + "\n")
        doc = DOCS / "benchmarks.md"
        doc.write_text(replace_section(doc.read_text(), "overhead", table(info)))
        print(f"wrote docs/benchmarks-overhead.json and {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
