"""The engine's client-side cost per question against a raw ``chat.completions.create`` loop.

Both run in one process against the same local stub server (fixed latency, so only client-side
work differs), sequentially and with 8 questions concurrent.

    python bench/engine_overhead.py [--n 200] [--latency-ms 20] [--embedded]

``--embedded`` adds the same comparison on the embedded llama.cpp server (SmolLM2).
Aims: the engine within 1.2× of the raw calls; 8 concurrent questions within 1.5× of one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stub_server import StubServer  # noqa: E402

from jev_shared import Choice, SystemOneClient  # noqa: E402
from jev_shared.prompt import render  # noqa: E402
from jev_shared.questions import prepare_question  # noqa: E402

STATE = "My invoice was charged twice, please refund the duplicate payment."
TEAM = Choice(instructions="Which team should handle this ticket?",
              criteria={"billing": "Invoices, refunds", "technical": "Bugs, errors", "sales": "Pricing, plans"})


def timed(fn: Callable[[], object], n: int) -> list[float]:
    fn()  # warm up: connection pool, imports
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def run(base_url: str, model: str, n: int, label: str) -> dict[str, float]:
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    engine = SystemOneClient(client, model=model, method="logprobs", labels="letters")  # the stub answers letters
    messages = render(prepare_question("team", TEAM, "logprobs"), STATE)
    raw_kwargs = dict(model=model, messages=messages, temperature=0, logprobs=True, top_logprobs=20, max_tokens=1)

    def raw_one() -> None:
        client.chat.completions.create(**raw_kwargs)

    def raw_eight() -> None:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: raw_one(), range(8)))

    eight = {f"q{i}": TEAM for i in range(8)}
    results = {
        "raw, 1 question": statistics.median(timed(raw_one, n)),
        "engine, 1 question": statistics.median(timed(lambda: engine.system_one(STATE, {"team": TEAM}), n)),
        "raw, 8 concurrent": statistics.median(timed(raw_eight, max(5, n // 8))),
        "engine, 8 concurrent": statistics.median(timed(lambda: engine.system_one(STATE, eight), max(5, n // 8))),
    }
    print(f"\n{label}  (p50 over {n} calls, ms)")
    for name, ms in results.items():
        print(f"  {name:<22} {ms:8.2f}")
    print(f"  engine / raw, 1 question        {results['engine, 1 question'] / results['raw, 1 question']:.3f}x"
          "   (aim <= 1.2)")
    print(f"  engine / raw, 8 concurrent      {results['engine, 8 concurrent'] / results['raw, 8 concurrent']:.3f}x")
    print(f"  engine 8 concurrent / 1         {results['engine, 8 concurrent'] / results['engine, 1 question']:.3f}x"
          "   (aim <= 1.5)")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--embedded", action="store_true", help="also run on the embedded llama.cpp server")
    args = parser.parse_args()
    print(f"openai {openai.__version__}, python {sys.version.split()[0]}")
    with StubServer(args.latency_ms / 1000.0) as base_url:
        run(base_url, "stub", args.n, f"stub server, fixed latency {args.latency_ms:.0f} ms")
    if args.embedded:
        from jev_shared.local import WIRE_MODEL, LocalServer

        with LocalServer(WIRE_MODEL) as srv:
            run(srv.base_url, srv.model, max(20, args.n // 4), f"embedded llama.cpp, {srv.model}")


if __name__ == "__main__":
    main()
