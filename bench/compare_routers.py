"""Routers side by side on the embedded llama.cpp server: accuracy, unusable answers, tokens, calls, latency.

One process, one real server, one labelled routing set (``bench/data/routing_compare.jsonl``: 120
internal-helpdesk requests, six routes, 20 each). Every contender routes every item, one decision
at a time. The items go in blocks (at most ten, at least 6 items); each contender routes a block in a row (as a deployed router
serves one prompt over and over, so its prompt prefix stays in the server's cache), after one
unscored request that puts its prefix there; who goes first rotates from block to block, so drifts
in machine load spread over everyone.

Contenders (all at temperature 0, all given the same route names and descriptions):

* ``bare one-token call``: one ``chat.completions.create`` with Jev's prompt, ``max_tokens=1``;
  the sampled token is the answer. The latency floor, not a router.
* ``Jev router``: :class:`jev_langchain.JevRouter` over ``SystemOneClient(method="logprobs")``,
  with letter labels and with the routes' own names; and with ``mode="auto"`` (System 1, then one
  System 2 ratings pass when confidence < 0.7).
* ``LangChain structured router``: the pattern of LangChain's routing guide (the replacement the
  ``LLMRouterChain`` deprecation notice gives): ``prompt | llm.with_structured_output(RouteQuery) |
  itemgetter("destination")`` where ``RouteQuery.destination`` is a ``Literal`` of the route names,
  then a ``RunnableLambda`` that picks the branch.
* ``LlamaIndex LLMSingleSelector``: ``LLMSingleSelector.from_defaults(llm=OpenAILike(...))``, its
  ``select(tools, query)``.
* ``jevper``: the closest peer engine on PyPI, ``SystemOneClient(method="logprobs",
  temperature=0)`` (its docs' advice for a server that returns logprobs).

The three generative contenders get a 256-token output cap (``GEN_CAP``; none sends one by
default), which only cuts replies that run on. ``jev-letters-shots`` / ``jev-names-shots`` (not in
the default set) add one worked example per route to the Jev router.

Every HTTP exchange goes through one counting transport, so provider calls and output tokens
(``usage.completion_tokens``) are counted the same way for everyone, failures included.

    python bench/compare_routers.py                    # SmolLM2-135M, all 120 items (~25 min on 2 cores)
    python bench/compare_routers.py --model qwen       # Qwen2.5-Coder-0.5B, 120 items (~35 min on 2 cores)
    python bench/compare_routers.py --model qwen --limit 60 --write   # what docs/ holds (~18 min; SmolLM2 ~12)
    python bench/compare_routers.py --quick            # the first 24 items; prints, writes nothing
    python bench/compare_routers.py --render           # redraw docs/benchmarks.md tables + chart from the JSON

Writes ``docs/benchmarks-<model>.json``, the tables in ``docs/benchmarks.md`` (between markers)
and ``docs/benchmarks.png``. Needs ``langchain-openai``, ``llama-index-llms-openai-like``
(hence ``openai<3``), ``jevper`` and ``matplotlib`` next to the package: see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from router_contenders import BUILDERS, DEFAULT  # noqa: E402
from router_data import MODELS, ROOT, WARMUP, use_set  # noqa: E402
from router_report import DOCS, render_docs, render_section, replace_section  # noqa: E402
from router_run import machine, run, versions  # noqa: E402

#: machine, replace_section and versions are shared with bench/peer_overhead.py.
__all__ = ["machine", "main", "replace_section", "versions"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    parser.add_argument("--quick", action="store_true", help="the first 24 items (4 a route); prints only, unless --write")
    parser.add_argument("--limit", type=int, default=None, help="the first N items (a multiple of 6 is balanced)")
    parser.add_argument("--only", default=",".join(DEFAULT), help=f"contenders, comma-separated: {','.join(BUILDERS)}")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here (and leave the docs alone)")
    parser.add_argument("--warmup", type=int, default=2, help=f"unscored requests each contender sends first (0-{len(WARMUP)})")
    parser.add_argument("--render", action="store_true", help="only redraw docs from the saved JSON results")
    parser.add_argument("--no-write", action="store_true", help="print the table, write nothing")
    parser.add_argument("--write", action="store_true", help="write the results even of a --quick or --limit run")
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp threads (default: the server's, min(4, cores)); 1 is steadier on a busy machine")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every decision")
    parser.add_argument("--set", default="distinct", help="route names: distinct, collide, numbered, many (bench/sets.py)")
    args = parser.parse_args()
    if args.set != "distinct":
        use_set(args.set)
    if args.render:
        render_docs()
        return
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in BUILDERS]
    if unknown:
        parser.error(f"unknown contenders {unknown}; choose from {list(BUILDERS)}")
    result = run(args.model, keys, 24 if args.quick else args.limit, args.warmup, args.verbose, args.threads)
    print()
    print(render_section(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
        return
    if args.no_write or ((args.quick or args.limit) and not args.write):
        return
    out = DOCS / f"benchmarks-{args.model}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    render_docs()


if __name__ == "__main__":
    main()
