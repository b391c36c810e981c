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

    python -m bench compare_routers                    # SmolLM2-135M, all 120 items (~25 min on 2 cores)
    python -m bench compare_routers --model qwen       # Qwen2.5-Coder-0.5B, 120 items (~35 min on 2 cores)
    python -m bench compare_routers --model qwen --limit 60 --write   # what docs/ holds (~18 min; SmolLM2 ~12)
    python -m bench compare_routers --quick            # the first 24 items; prints, writes nothing
    python -m bench compare_routers --render           # redraw docs/benchmarks.md tables + chart from the JSON

Writes ``docs/benchmarks-<model>.json``, the tables in ``docs/benchmarks.md`` (between markers)
and ``docs/benchmarks.png``. Needs ``langchain-openai``, ``llama-index-llms-openai-like``
(hence ``openai<3``), ``jevper`` and ``matplotlib`` next to the package: see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from routers import BUILDERS, DATA, DEFAULT, MODELS, N_CTX, ROOT, ROUTES, WARMUP, Contender, Meter, load_items, use_set  # noqa: E402


@dataclass
class Outcome:
    item: str
    label: str
    answer: str | None
    latency_ms: float
    calls: int
    output_tokens: int
    error: str | None = None


@dataclass
class Tally:
    key: str
    name: str
    note: str
    outcomes: list[Outcome] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        n = len(self.outcomes)
        lat = sorted(o.latency_ms for o in self.outcomes)
        usable = [o for o in self.outcomes if o.error is None]
        errors: dict[str, int] = {}
        for o in self.outcomes:
            if o.error:
                kind = o.error.split(":", 1)[0]
                errors[kind] = errors.get(kind, 0) + 1
        return {
            "key": self.key, "name": self.name, "note": self.note, "n": n,
            "accuracy": sum(o.answer == o.label for o in self.outcomes) / n,
            "accuracy_usable": (sum(o.answer == o.label for o in usable) / len(usable)) if usable else None,
            "unusable": (n - len(usable)) / n,
            "output_tokens": statistics.fmean(o.output_tokens for o in self.outcomes),
            "output_tokens_p95": percentile(sorted(o.output_tokens for o in self.outcomes), 95),
            "calls": statistics.fmean(o.calls for o in self.outcomes),
            "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95), "mean_ms": statistics.fmean(lat),
            "errors": errors,
        }


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))
    return float(sorted_values[int(rank) - 1])


def run_one(contender: Contender, meter: Meter, item: dict[str, str]) -> Outcome:
    calls0, out0 = meter.snapshot()
    error = answer = None
    start = time.perf_counter()
    try:
        answer = contender.decide(item["text"])
    except Exception as exc:  # every failure is an unusable answer, counted by kind
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    latency = (time.perf_counter() - start) * 1000.0
    calls1, out1 = meter.snapshot()
    return Outcome(item["id"], item["label"], answer, latency, calls1 - calls0, out1 - out0, error)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_start": list(os.getloadavg())}


def versions() -> dict[str, str]:
    out = {}
    for dist in ("jev-integrations", "openai", "langchain-core", "langchain-openai", "llama-index-core",
                 "llama-index-llms-openai-like", "jevper", "xllamacpp", "httpx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def run(model_key: str, keys: list[str], limit: int | None, warmup: int,
        verbose: bool = False, threads: int | None = None) -> dict[str, Any]:
    from jev_shared.local import LocalServer

    items = load_items(limit)
    info = {"model": MODELS[model_key], "items": len(items), "routes": len(ROUTES), "dataset": DATA.name,
            "route_names": list(ROUTES),
            "machine": machine(), "versions": versions(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"{info['model']}: {len(items)} items, {len(ROUTES)} routes; load {info['machine']['loadavg_start']}",
          flush=True)
    with LocalServer(MODELS[model_key], n_ctx=N_CTX, n_parallel=2, n_threads=threads) as srv:
        info["server"] = {"n_threads": srv.n_threads, "n_parallel": srv.n_parallel, "n_ctx_per_slot": srv.n_ctx}
        meters = {k: Meter() for k in keys}
        contenders = {k: BUILDERS[k](srv.base_url, srv.model, meters[k]) for k in keys}
        tallies = {k: Tally(k, c.name, c.note) for k, c in contenders.items()}
        for text in WARMUP[:warmup]:  # connections, api=auto discovery
            for k in keys:
                run_one(contenders[k], meters[k], {"id": "warmup", "text": text, "label": ""})
        started = time.perf_counter()
        size = max(6, len(items) // 10)  # blocks of at least 6 items, at most 10 blocks
        for b, first in enumerate(range(0, len(items), size)):
            block = items[first:first + size]
            # each contender routes a block in a row, as a deployed router would, after one unscored
            # request that puts its prompt prefix in the server's cache; who goes first rotates
            for k in keys[b % len(keys):] + keys[: b % len(keys)]:
                run_one(contenders[k], meters[k], {"id": "prime", "text": WARMUP[-1], "label": ""})
                for item in block:
                    outcome = run_one(contenders[k], meters[k], item)
                    tallies[k].outcomes.append(outcome)
                    if verbose:
                        print(f"    {k:<12} {outcome.label:<10} -> {outcome.answer!s:<10} {outcome.latency_ms:7.0f} ms "
                              f"{outcome.calls} calls {outcome.output_tokens} tok {outcome.error or ''}", flush=True)
            print(f"  {first + len(block)}/{len(items)} items, {time.perf_counter() - started:.0f} s", flush=True)
        info["wall_s"] = time.perf_counter() - started
        info["paths"] = {k: m.paths for k, m in meters.items()}
    info["machine"]["loadavg_end"] = list(os.getloadavg())
    info["results"] = [t.summary() for t in tallies.values()]
    info["outcomes"] = {k: [asdict(o) for o in t.outcomes] for k, t in tallies.items()}
    return info


DOCS = ROOT / "docs"
DOC = DOCS / "benchmarks.md"
CHART = DOCS / "benchmarks.png"


def table(result: dict[str, Any]) -> str:
    rows = result["results"]
    bare = next((r for r in rows if r["key"] == "bare"), None)
    head = ("| router | accuracy | unusable | output tokens / decision | provider calls / decision | p50 | p95 |"
            + (" p50 / bare call |" if bare else ""))
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [r["name"], f"{r['accuracy']:.1%}", f"{r['unusable']:.1%}", f"{r['output_tokens']:.1f}",
                 f"{r['calls']:.2f}", f"{r['p50_ms']:.0f} ms", f"{r['p95_ms']:.0f} ms"]
        if bare:
            cells.append(f"{r['p50_ms'] / bare['p50_ms']:.2f}×")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def errors_line(result: dict[str, Any]) -> str:
    parts = []
    for r in result["results"]:
        if r["errors"]:
            kinds = ", ".join(f"{k} ×{v}" for k, v in sorted(r["errors"].items(), key=lambda kv: -kv[1]))
            parts.append(f"{r['name']}: {kinds}")
    return "Unusable answers by kind: " + ("; ".join(parts) if parts else "none") + "."


def context_line(result: dict[str, Any]) -> str:
    m, v = result["machine"], result["versions"]
    load = f"load average {m['loadavg_start'][0]:.2f} at start, {m['loadavg_end'][0]:.2f} at end"
    vers = ", ".join(f"{k} {val}" for k, val in v.items())
    srv = result.get("server") or {}
    server = (f"llama.cpp with {srv['n_threads']} thread(s), {srv['n_parallel']} slots of {srv['n_ctx_per_slot']} "
              "tokens, " if srv else "")
    return (f"{result['items']} items, {result['routes']} routes, {result['started']}, {m['cpu']} ({m['cores']} cores), "
            f"Python {m['python']}, {server}{load}, {result['wall_s'] / 60:.1f} min. Versions: {vers}.")


def render_section(result: dict[str, Any]) -> str:
    return "\n\n".join([table(result), errors_line(result), context_line(result)])


def replace_section(text: str, key: str, body: str) -> str:
    start, end = f"<!-- bench:{key}:start -->", f"<!-- bench:{key}:end -->"
    if start not in text:
        raise SystemExit(f"{DOC} has no {start} marker")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def chart(results: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [("accuracy", "accuracy", 100, "%"), ("unusable", "unusable answers", 100, "%"),
               ("output_tokens", "output tokens / decision", 1, ""), ("p50_ms", "p50 latency", 1, " ms")]
    fig, axes = plt.subplots(len(results), len(metrics), figsize=(4.2 * len(metrics), 3.4 * len(results)),
                             squeeze=False)
    for row, result in zip(axes, results):
        names = [r["name"] for r in result["results"]]
        colors = ["#888888" if r["key"] == "bare" else "#2b6cb0" if r["key"].startswith("jev-") else "#dd8452"
                  for r in result["results"]]
        for ax, (key, title, scale, unit) in zip(row, metrics):
            values = [r[key] * scale for r in result["results"]]
            ax.barh(range(len(names)), values, color=colors)
            ax.set_yticks(range(len(names)))
            ax.set_yticklabels(names if ax is row[0] else [""] * len(names), fontsize=8)
            ax.invert_yaxis()
            ax.set_title(f"{result['model']}: {title}", fontsize=9)
            for y, val in enumerate(values):
                ax.text(val, y, f" {val:.0f}{unit}" if scale == 100 or key == "p50_ms" else f" {val:.1f}",
                        va="center", fontsize=7)
            ax.margins(x=0.25)
            ax.locator_params(axis="x", nbins=4)
    fig.tight_layout()
    fig.savefig(CHART, dpi=110)
    print(f"wrote {CHART.relative_to(ROOT)}")


def render_docs() -> None:
    results = []
    text = DOC.read_text()
    for key in MODELS:
        path = DOCS / f"benchmarks-{key}.json"
        if path.exists():
            result = json.loads(path.read_text())
            results.append(result)
            text = replace_section(text, key, render_section(result))
    extra = DOCS / "benchmarks-qwen-examples.json"  # --only jev-letters-shots,jev-names-shots --out <this>
    if extra.exists() and "<!-- bench:qwen-examples:start -->" in text:
        text = replace_section(text, "qwen-examples", render_section(json.loads(extra.read_text())))
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    if results:
        chart(results)


#: machine, replace_section and versions are shared with bench/overhead.py.
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
    parser.add_argument("--set", default="distinct", help="route names: distinct, collide, numbered, many (bench/routers.py)")
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
