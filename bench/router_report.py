"""compare_routers' report: the markdown table, the lines under it, the docs sections and the chart."""

from __future__ import annotations

import json
from typing import Any

from router_data import MODELS, ROOT

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
