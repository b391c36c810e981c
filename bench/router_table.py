"""Summaries and the markdown table of ``heldout_router.py``'s saved runs.

Runs are pooled per model and set, so a run continued on further items (``--offset``) joins the first
one; where two runs hold the same contender on the same item, the later file on the command line wins
(a contender rerun at another commit replaces its earlier answers, so one row is at one commit).
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def summarise(rows: Sequence[Row]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per set and contender: accuracy, p50 latency, output tokens and calls a decision, unusable share."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in dict.fromkeys((r["set"], r["contender"]) for r in rows):
        rs = [r for r in rows if (r["set"], r["contender"]) == key]
        n = len(rs)
        out.setdefault(key[0], {})[key[1]] = {
            "n": n, "right": sum(r["answer"] == r["label"] for r in rs),
            "accuracy": round(sum(r["answer"] == r["label"] for r in rs) / n, 4),
            "p50_ms": round(statistics.median(r["latency_ms"] for r in rs), 1),
            "output_tokens": round(sum(r["output_tokens"] for r in rs) / n, 2),
            "calls": round(sum(r["calls"] for r in rs) / n, 2),
            "unusable": round(sum(r["answer"].startswith("error") or r["answer"] == "" for r in rs) / n, 4)}
    return out


def read(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def _loads(meta: dict[str, Any], name: str) -> list[float]:
    """The load averages a run saw while on this set (per set where saved, else the run's start and end)."""
    per_set = meta.get("load_by_set", {}).get(name)
    if per_set:
        return list(per_set)
    return [v for v in (meta.get("load_at_start"), meta.get("load_now")) if v is not None]


def pool(paths: Sequence[Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (model, set): the rows (one per contender and item, the later file winning), the commits
    each contender's rows ran at, and the load averages seen."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for p in paths:
        run = read(p)
        meta = run["meta"]
        for r in run["items"]:
            entry = out.setdefault((meta["model"], r["set"]), {"rows": {}, "loads": {}})
            entry["rows"][(r["contender"], r["item"])] = {**r, "commit": meta["git"]["commit"], "file": p.name}
            entry["loads"][p.name] = _loads(meta, r["set"])
    for entry in out.values():
        used = {r["file"] for r in entry["rows"].values()}
        entry["loads"] = [v for f, vs in entry["loads"].items() if f in used for v in vs]
    return out


def _cell(s: dict[str, Any], c: str, field: str = "accuracy") -> str:
    """One contender's figure; an accuracy over fewer items than the row's says over how many."""
    if c not in s:
        return "—"
    v = s[c][field]
    if field != "accuracy":
        return f"{v / 1000:.2f}" if field == "p50_ms" else f"{v:.1f}"
    fewer = s[c]["n"] < max(x["n"] for x in s.values())
    return f"{v:.1%}" + (f" (of {s[c]['n']})" if fewer else "")


def _row(model: str, name: str, entry: dict[str, Any], meta: dict[str, Any]) -> str:
    rows = list(entry["rows"].values())
    s = summarise(rows)[name]
    kind = meta.get("kind", "?")
    n_opt = 2 if kind == "noul" else len(meta.get("criteria") or ())
    commits = sorted({r["commit"] for r in rows if r["contender"] == "jev"}) or ["—"]
    below = "jev" in s and "langchain" in s and s["jev"]["accuracy"] < s["langchain"]["accuracy"]
    jev = _cell(s, "jev") if below or "jev" not in s else f"**{_cell(s, 'jev')}**"
    lit = f" (Literal: {_cell(s, 'langchain_lit')})" if "langchain_lit" in s else ""
    loads = entry["loads"]
    load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?"
    return (f"| {name} ({max(v['n'] for v in s.values())}) | {kind} | {n_opt} | {model} | {_cell(s, 'bare')} "
            f"| {jev}{' (below)' if below else ''} ({', '.join(commits)}) | {_cell(s, 'langchain')}{lit} "
            f"| {_cell(s, 'bare', 'p50_ms')} / {_cell(s, 'jev', 'p50_ms')} / {_cell(s, 'langchain', 'p50_ms')} s "
            f"| {_cell(s, 'langchain', 'output_tokens')} | {load} |")


def _total(model: str, entries: list[dict[str, Any]]) -> str:
    rows = [{**r, "set": "all"} for e in entries for r in e["rows"].values()]
    s = summarise(rows)["all"]

    def right(c: str) -> str:
        return f"{s[c]['accuracy']:.1%} ({s[c]['right']}/{s[c]['n']})" if c in s else "—"
    ahead = "jev" in s and s["jev"]["accuracy"] >= s.get("langchain", {}).get("accuracy", 0)
    jev = f"**{right('jev')}**" if ahead else right("jev")
    return (f"| **all {len(entries)} sets** | | | {model} | {right('bare')} | {jev} "
            f"| {right('langchain')} | | | |")


def table(paths: Sequence[Path], sets: dict[str, Any], only: Sequence[str] = ()) -> str:
    """Markdown: one row per model and set over the saved runs (``only`` those sets, where given), then
    each model's pooled row. Jev's accuracy is bold where at or above the router's, marked ``(below)``
    where under it."""
    pooled = {k: e for k, e in pool(paths).items() if not only or k[1] in only}
    lines = ["| set (items) | kind | options | model | bare | Jev (commit) | LangChain router "
             "| p50 bare / Jev / LangChain | LangChain tokens | load average |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for model in dict.fromkeys(m for m, _ in pooled):
        entries = [(name, e) for (m, name), e in pooled.items() if m == model]
        lines += [_row(model, name, e, sets.get(name, {})) for name, e in entries]
        if len(entries) > 1:
            lines.append(_total(model, [e for _, e in entries]))
    return "\n".join(lines)
