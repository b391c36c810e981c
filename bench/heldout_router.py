"""Zero-shot routing on the public choice sets: the engine's defaults against LangChain's structured router.

Same server (the embedded default model), same items, each contender over all of them in turn: a bare
one-token ``chat.completions.create`` (the latency floor), the Jev router with the product defaults
(names, ``debias="auto"``, the shipped calibration), and LangChain's routing guide
(``with_structured_output`` over a ``Literal`` of the option names). Output tokens and calls are read
off the wire (``router_meter``).

    JEV_NO_CACHE=1 nice -n 10 python bench/heldout_router.py --limit 30 --out bench/heldout_runs/router.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heldout import load_items, load_sets  # noqa: E402
from router_meter import Meter, http_client, openai_client  # noqa: E402

GEN_CAP = 256
Decide = Callable[[str], str]


def bare(base_url: str, model: str, meter: Meter, meta: dict[str, Any]) -> Decide:
    """The engine's own prompt, one token, the sampled token read as a name: the latency floor."""
    from jev_shared import Choice
    from jev_shared.labels import aliases_for, name_fold
    from jev_shared.prompt import AnswerFormat, render
    from jev_shared.questions import prepare_question

    client = openai_client(base_url, meter)
    prep = prepare_question("q", Choice(instructions=meta["instructions"], criteria=meta["criteria"]), "logprobs")
    aliases = aliases_for(prep.keys, prep.descriptions)
    fmt, fold = AnswerFormat(symbols=aliases), name_fold(aliases)
    by_alias = dict(zip(aliases, prep.keys))

    def decide(text: str) -> str:
        r = client.chat.completions.create(model=model, messages=render(prep, text, fmt=fmt), temperature=0,
                                           max_tokens=1, logprobs=True, top_logprobs=20)
        return by_alias.get(fold(r.choices[0].message.content or "") or "", "")

    return decide


def jev(base_url: str, model: str, meter: Meter, meta: dict[str, Any]) -> Decide:
    """The product defaults on a client marked as LocalServer.client() marks its own."""
    from jev_shared import Choice, SystemOneClient
    from jev_shared.backend import describe

    raw = describe(openai_client(base_url, meter), surfaces=("chat_completions",))
    client = SystemOneClient(raw, model=model)
    q = Choice(instructions=meta["instructions"], criteria=meta["criteria"])

    def decide(text: str) -> str:
        return client.system_one(text, {"q": q}).answers["q"].choice  # type: ignore[union-attr]

    return decide


def langchain(base_url: str, model: str, meter: Meter, meta: dict[str, Any]) -> Decide:
    """LangChain's routing guide: a TypedDict with a Literal destination, structured output, then a branch."""
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI
    from typing_extensions import TypedDict

    names = tuple(meta["criteria"])
    route = TypedDict("RouteQuery", {"destination": Literal[names]})  # type: ignore[misc,valid-type]  # noqa: UP013
    route.__doc__ = "Route the request to the option that fits it."
    llm = ChatOpenAI(model=model, base_url=base_url, api_key="local", temperature=0, max_tokens=GEN_CAP,
                     http_client=http_client(meter))
    system = (meta["instructions"] + " Route the user's request to one of these options:\n"
              + "\n".join(f"- {n}: {d}" for n, d in meta["criteria"].items()))
    prompt = ChatPromptTemplate.from_messages([("system", system.replace("{", "{{").replace("}", "}}")),
                                               ("human", "{input}")])
    chain = prompt | llm.with_structured_output(route)

    def decide(text: str) -> str:
        out = chain.invoke({"input": text})
        return str((out or {}).get("destination", ""))

    return decide


CONTENDERS = {"bare": bare, "jev": jev, "langchain": langchain}


def run(srv: Any, names: Sequence[str], limit: int) -> dict[str, Any]:
    sets = load_sets()
    results: dict[str, Any] = {}
    for name in names:
        meta, items = sets[name], load_items(name, limit)
        meters = {c: Meter() for c in CONTENDERS}
        deciders = {c: build(srv.base_url, srv.model, meters[c], meta) for c, build in CONTENDERS.items()}
        rows: dict[str, list[tuple[bool, float, str]]] = {c: [] for c in CONTENDERS}
        deciders["jev"]("N/A")  # the one-time prior calls, not in an item's latency
        calls0 = {c: meters[c].snapshot() for c in CONTENDERS}
        for c, decide in deciders.items():  # each contender over every item in turn: a state another
            for it in items:                 # contender just sent would sit in the server's cache
                t = time.perf_counter()
                try:
                    got = decide(it["text"])
                except Exception as exc:  # noqa: BLE001 - an unusable answer is a miss, named
                    got = f"error: {type(exc).__name__}"
                rows[c].append((got == it["label"], (time.perf_counter() - t) * 1000, got))
        results[name] = {c: summary(rows[c], meters[c], calls0[c], len(items)) for c in CONTENDERS}
        print(name, {c: f"{r['accuracy']:.1%} {r['p50_ms']:.0f} ms {r['output_tokens']:.1f} tok"
                     for c, r in results[name].items()}, file=sys.stderr)
    return results


def summary(rows: list[tuple[bool, float, str]], meter: Meter, start: tuple[int, int], n: int) -> dict[str, Any]:
    calls, tokens = meter.snapshot()
    return {"n": n, "accuracy": sum(r[0] for r in rows) / n, "p50_ms": statistics.median(r[1] for r in rows),
            "output_tokens": (tokens - start[1]) / n, "calls": (calls - start[0]) / n,
            "unusable": sum(r[2].startswith("error") or r[2] == "" for r in rows) / n,
            "answers": [r[2] for r in rows]}


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="trec,agnews,atis,banking77,clinc150")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    with LocalServer(n_parallel=1) as srv:
        results = run(srv, args.sets.split(","), args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
