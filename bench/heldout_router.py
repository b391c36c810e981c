"""Zero-shot on the public sets: the engine's defaults against LangChain's structured router, per model.

Same server (one embedded model, ``--model``), same items, each contender over all of them in turn:

* ``bare``: a one-token ``chat.completions.create`` with the engine's own prompt and answer words, the
  sampled token read as the answer (the latency floor);
* ``jev``: the product defaults as ``LocalServer.client()`` marks its own client (names, debias,
  calibration, the exact readout), the question a new user writes (``heldout.question``: the set's
  own label names, each described by its name in words);
* ``langchain``: LangChain's routing guide, ``prompt | llm.with_structured_output(Schema)``, with a
  TypedDict whose one field is a ``Literal`` of the option names (a choice), of the level names (a
  score), or a ``bool`` (a noul); ``langchain_lit`` (nouls only, not run unless asked): a
  ``Literal["true", "false"]`` instead of the bool.

Output tokens and calls are read off the wire (``routers.Meter``). Every item's answer is saved
(``--out``), so accuracy can be recomputed; ``--table`` prints the markdown table of saved runs: pooled per model and set, so a run continued on
further items (``--offset``) joins the first one; where two runs hold the same contender on the same item, the later
file on the command line wins (a contender rerun at another commit replaces its earlier answers, so one row is at
one commit).

    JEV_NO_CACHE=1 nice -n 5 python -m bench heldout_router --model qwen2.5-coder-1.5b --sets sst2,trec --out /tmp/r.json
    python -m bench heldout_router --table bench/heldout_runs/router-*.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heldout import load_items, load_sets, question  # noqa: E402
from routers import Meter, http_client, openai_client  # noqa: E402

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


GEN_CAP = 256
Decide = Callable[[str], str]
DEFAULT_CONTENDERS = ("bare", "jev", "langchain")


def level_names(meta: dict[str, Any]) -> list[str]:
    """A score's levels in order (sets.json keeps them as a list; a dict's values are the levels)."""
    crit = meta["criteria"]
    return list(crit.values()) if isinstance(crit, dict) else list(crit)


def bare(srv: Any, meter: Meter, meta: dict[str, Any]) -> Decide:
    """The engine's own prompt and answer words (names, digits or yes/no), one token, read as the answer."""
    from jev_shared.labels import named_format
    from jev_shared.prompt import render
    from jev_shared.questions import prepare_question

    client = openai_client(srv.base_url, meter)
    prep = prepare_question("q", question(meta), "logprobs")
    fmt, fold = named_format(prep)
    by_symbol = ({"yes": "true", "no": "false"} if meta["kind"] == "noul"
                 else dict(zip(fmt.symbols or (), prep.keys)))

    def decide(text: str) -> str:
        r = client.chat.completions.create(model=srv.model, messages=render(prep, text, fmt=fmt), temperature=0,
                                           max_tokens=1, logprobs=True, top_logprobs=20)
        return by_symbol.get(fold(r.choices[0].message.content or "") or "", "")

    return decide


def jev(srv: Any, meter: Meter, meta: dict[str, Any]) -> Decide:
    """The product defaults on a metered client marked as LocalServer.client() marks its own."""
    from jev_shared import SystemOneClient

    client = SystemOneClient(srv.mark(openai_client(srv.base_url, meter)), model=srv.model)
    q = question(meta)

    def decide(text: str) -> str:
        a = client.system_one(text, {"q": q}).answers["q"]
        if meta["kind"] == "noul":
            return "true" if a.noul >= 0.5 else "false"  # type: ignore[union-attr]
        if meta["kind"] == "score":
            return max(a.probabilities, key=a.probabilities.get)  # type: ignore[union-attr]
        return a.choice  # type: ignore[union-attr]

    return decide


def _chain(srv: Any, meter: Meter, system: str, schema: Any) -> Any:
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=srv.model, base_url=srv.base_url, api_key="local", temperature=0, max_tokens=GEN_CAP,
                     http_client=http_client(meter))
    prompt = ChatPromptTemplate.from_messages([("system", system.replace("{", "{{").replace("}", "}}")),
                                               ("human", "{input}")])
    return prompt | llm.with_structured_output(schema)


def langchain(srv: Any, meter: Meter, meta: dict[str, Any], noul_literal: bool = False) -> Decide:
    """LangChain's routing guide: a TypedDict with a Literal (or, for a yes/no, a bool) field, structured output."""
    from typing_extensions import TypedDict

    kind = meta["kind"]
    if kind == "choice":
        names = tuple(meta["criteria"])
        schema = TypedDict("RouteQuery", {"destination": Literal[names]})  # type: ignore[misc,valid-type]  # noqa: UP013
        schema.__doc__ = "Route the request to the option that fits it."
        system = (meta["instructions"] + " Route the user's request to one of these options:\n"
                  + "\n".join(f"- {n}: {d}" for n, d in meta["criteria"].items()))
        field, read = "destination", str
    elif kind == "score":
        levels = level_names(meta)
        schema = TypedDict("Rating", {"level": Literal[tuple(levels)]})  # type: ignore[misc,valid-type]  # noqa: UP013
        schema.__doc__ = "Rate the user's text on the scale."
        system = meta["instructions"] + " Rate the user's text with one of these levels:\n" + "\n".join(
            f"- {lv}" for lv in levels)
        field = "level"

        def read(v: Any) -> str:
            return str(levels.index(v)) if v in levels else str(v)
    else:
        about = f"Whether this is true of the user's text: {meta['instructions']}"
        shape: Any = Literal["true", "false"] if noul_literal else bool
        schema = TypedDict("Verdict", {"answer": Annotated[shape, ..., about]})  # type: ignore[misc]  # noqa: UP013
        schema.__doc__ = "Say whether the statement is true of the user's text."
        system = f"Statement: {meta['instructions']}\nSay whether the statement is true of the user's text."
        field = "answer"

        def read(v: Any) -> str:
            return str(v).lower() if isinstance(v, (bool, str)) else ""
    chain = _chain(srv, meter, system, schema)

    def decide(text: str) -> str:
        out = chain.invoke({"input": text})
        return read((out or {}).get(field, ""))

    return decide


CONTENDERS: dict[str, Callable[[Any, Meter, dict[str, Any]], Decide]] = {
    "bare": bare, "jev": jev, "langchain": langchain,
    "langchain_lit": lambda srv, meter, meta: langchain(srv, meter, meta, noul_literal=True),
}


def run_set(srv: Any, name: str, meta: dict[str, Any], items: Sequence[dict[str, Any]],
            contenders: Sequence[str]) -> list[dict[str, Any]]:
    """Every contender over every item in turn (a state another contender just sent would sit in the
    server's cache); one row per contender and item."""
    names = [c for c in contenders if c != "langchain_lit" or meta["kind"] == "noul"]
    meters = {c: Meter() for c in names}
    deciders = {c: CONTENDERS[c](srv, meters[c], meta) for c in names}
    if "jev" in deciders:
        deciders["jev"]("N/A")  # the one-time prior calls, not in an item's latency
    rows = []
    for c, decide in deciders.items():
        for it in items:
            calls0, tok0 = meters[c].snapshot()
            t = time.perf_counter()
            try:
                got = decide(it["text"])
            except Exception as exc:  # noqa: BLE001 - an unusable answer is a miss, named
                got = f"error: {type(exc).__name__}"
            ms = (time.perf_counter() - t) * 1000
            calls, tok = meters[c].snapshot()
            rows.append({"contender": c, "set": name, "item": it["id"], "label": it["label"], "answer": got,
                         "latency_ms": round(ms, 1), "output_tokens": tok - tok0, "calls": calls - calls0})
    return rows


def git_state() -> dict[str, Any]:
    """The engine's commit: the checkout's, or, where ``jev_shared`` is imported from a copy of ``src``
    exported at a commit (``git archive``; a shared checkout's uncommitted edits kept out), ``JEV_ENGINE_COMMIT``."""
    import jev_shared

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=HERE.parent, capture_output=True, text=True).stdout.strip()

    engine = Path(jev_shared.__file__).resolve().parent
    if engine.is_relative_to(HERE.parent / "src"):
        return {"commit": git("rev-parse", "--short", "HEAD"),
                "src_uncommitted": [ln[3:] for ln in git("status", "--porcelain", "src").splitlines()]}
    return {"commit": os.environ.get("JEV_ENGINE_COMMIT", "?"), "engine_src": str(engine), "src_uncommitted": []}


def save(path: Path, meta: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    body = json.dumps({"meta": meta, "summary": summarise(rows), "items": list(rows)}, indent=None)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(body.encode()) if path.suffix == ".gz" else body.encode())
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared.local import DEFAULT_MODEL, LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="the embedded model (jev_shared.local.MODELS)")
    ap.add_argument("--sets", default="", help="comma-separated (default: every set in sets.json)")
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--offset", type=int, default=0, help="skip this many items per set first (a run continued)")
    ap.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS), help=f"of {','.join(CONTENDERS)}")
    ap.add_argument("--out", type=Path, help="the JSON (.json.gz: gzipped), saved after each set")
    ap.add_argument("--table", type=Path, nargs="*", help="print the markdown table of saved runs (pooled per model "
                    "and set, a later file's answers replacing an earlier one's; --sets to choose) and exit")
    args = ap.parse_args(argv)
    if args.table is not None:
        print(table(args.table, load_sets(), [n for n in args.sets.split(",") if n]))
        return 0
    if not args.out:
        ap.error("--out is required")
    sets = load_sets()
    names = args.sets.split(",") if args.sets else list(sets)
    contenders = args.contenders.split(",")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": args.model, "limit": args.limit,
            "offset": args.offset,
            "contenders": contenders, "git": git_state(), "load_at_start": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(), "no_cache": os.environ.get("JEV_NO_CACHE", "")}
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with LocalServer(args.model, n_parallel=1) as srv:
        for name in names:
            rows += run_set(srv, name, sets[name], load_items(name, args.limit, offset=args.offset), contenders)
            load = round(os.getloadavg()[0], 2)
            meta.setdefault("load_by_set", {})[name] = [meta.get("load_now", meta["load_at_start"]), load]
            meta.update(load_now=load, wall_s=round(time.perf_counter() - started, 1))
            save(args.out, meta, rows)
            print(name, {c: f"{r['accuracy']:.1%} {r['p50_ms']:.0f} ms {r['output_tokens']:.1f} tok"
                         for c, r in summarise(rows)[name].items()}, f"load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr, flush=True)
    print(table([args.out], sets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
