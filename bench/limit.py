"""How close each decision on the embedded model comes to the hardware's limit, and what N questions cost.

One run, one embedded server (the default model unless ``--model``), every figure read off the wire:
the server's ``timings`` (``prompt_n``: tokens prefilled, i.e. not in its prompt cache; ``prompt_ms``)
for each request, the wall time of each decision from the client, and the state's own token count
from the server's ``/tokenize``.

1. *bare*: the minimal possible call, the state alone as the user message, one output token. The floor.
2. *one question*: the engine's default client (``SystemOneClient(srv.client(), model=srv.model)``)
   on the same new states: uncached tokens − state tokens (the prompt's own tokens the server reads
   anew, target ≤ 8), and p50 against the bare call (target ≤ 1.1×).
3. *three questions about one short state* (the demo's questions), against one.
4. *a new ~400-token state* (a thread of 24 messages, new for each trial): one question, then five
   questions under ``layout="state_last"``, ``"split"`` and ``"auto"`` (the default; target ≤ 2.5× one).
5. *the demo's first ticket* on a fresh client: provider calls beyond one per question (target 0).

    python -m bench limit                      # ~5 min on 2 busy cores
    python -m bench limit --threads 1,2        # the same with 1 and with 2 llama.cpp threads
    python -m bench limit --out docs/benchmarks-limit.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from jev_shared import Choice, Noul, Score, SystemOneClient  # noqa: E402
from jev_shared.local import DEFAULT_MODEL, LocalServer  # noqa: E402
from jev_shared.prompt import render_state  # noqa: E402

DATA = ROOT / "bench" / "data" / "routing.jsonl"
TEAM = Choice(instructions="Which team should handle this support ticket?",
              criteria={"billing": "charges, refunds, invoices, payment methods, plans and prices",
                        "technical": "bugs, errors, crashes, slowness, integrations and the API",
                        "account": "login, passwords, two-factor authentication, profile, team members and permissions",
                        "shipping": "delivery, tracking, damaged or missing parcels, sending goods back"})
FIVE = {
    "team": TEAM,
    "urgency": Score(instructions="How urgent is this conversation?", criteria=["can wait", "this week", "today", "now"]),
    "angry": Noul(instructions="The customer is angry."),
    "resolved": Noul(instructions="The customer's problem was solved in this conversation."),
    "escalate": Noul(instructions="This conversation should be escalated to a manager."),
}


class Wire(httpx.BaseTransport):
    """Keeps the server's ``timings`` of every chat completion."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.timings: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self.inner.handle_request(request)
        body = resp.read()
        resp.close()
        if request.url.path.endswith("/chat/completions"):
            self.timings.append(json.loads(body).get("timings") or {})
        headers = [(k, v) for k, v in resp.headers.items() if k.lower() not in ("content-length", "transfer-encoding")]
        return httpx.Response(resp.status_code, headers=headers, content=body, request=request)


def texts() -> list[str]:
    return [json.loads(line)["text"] for line in DATA.read_text().splitlines() if line.strip()]


def thread(i: int, pool: list[str]) -> list[dict[str, str]]:
    """A new 24-message support thread (~400 tokens): customer turns from the data, short agent replies."""
    turns = []
    for j in range(12):
        turns.append({"role": "user", "content": pool[(i * 12 + j) % len(pool)]})
        turns.append({"role": "assistant", "content": f"Thanks, I have noted point {j + 1}; anything else?"})
    return turns


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def timed(fn: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1000.0


def measure(srv: LocalServer, n: int, trials: int) -> dict[str, Any]:
    import openai

    wire = Wire()
    raw = srv.mark(openai.OpenAI(base_url=srv.base_url, api_key="local", http_client=httpx.Client(transport=wire)))
    engine = SystemOneClient(raw, model=srv.model)
    pool = texts()
    out: dict[str, Any] = {}

    def bare(text: str) -> Any:
        return raw.chat.completions.create(model=srv.model, messages=[{"role": "user", "content": text}], max_tokens=1,
                                           logprobs=True, top_logprobs=20, temperature=0)

    bare(pool[-1])
    engine.system_one(pool[-2], {"team": TEAM})  # the prompt prefix (and the debias prior) into the cache
    rows = []
    for text in pool[:n]:  # new states, interleaved so load drifts hit both alike
        _, b_ms = timed(lambda t=text: bare(t))
        b_t = wire.timings[-1]
        k = len(wire.timings)
        _, e_ms = timed(lambda t=text: engine.system_one(t, {"team": TEAM}))
        e_t = wire.timings[k:]
        rows.append({"state_tokens": len(srv.tokenize(text)), "bare_ms": b_ms, "bare_prefill": b_t.get("prompt_n"),
                     "one_ms": e_ms, "one_prefill": sum(t.get("prompt_n", 0) for t in e_t), "one_calls": len(e_t),
                     "one_prefill_ms": sum(t.get("prompt_ms", 0.0) for t in e_t)})
    out["one"] = rows
    from quickstart import QUESTIONS, TICKETS

    engine.system_one(TICKETS[0], QUESTIONS)
    out["three_short_ms"] = [timed(lambda t=t: engine.system_one(t, QUESTIONS))[1] for t in pool[n:n + n // 2]]
    out["one_short_ms"] = [timed(lambda t=t: engine.system_one(t, {"team": QUESTIONS["team"]}))[1]
                           for t in pool[n + n // 2:2 * n]]
    out["long"] = long_state(srv, raw, wire, pool, trials)
    out["first_ticket"] = first_ticket(srv, TICKETS[0], QUESTIONS)
    return out


def first_ticket(srv: LocalServer, ticket: str, questions: dict[str, Any]) -> dict[str, Any]:
    """The demo's first ticket on fresh clients: discovery calls (none expected) apart from the
    debias priors (the examples' own lean, asked once per client and question)."""
    plain = SystemOneClient(srv.client(), model=srv.model, debias=False).system_one(ticket, questions)
    full = SystemOneClient(srv.client(), model=srv.model).system_one(ticket, questions)
    return {"calls": plain.usage.n_calls, "questions": len(questions), "ms": plain.usage.latency_ms,
            "calls_with_priors": full.usage.n_calls, "ms_with_priors": full.usage.latency_ms}


def long_state(srv: LocalServer, raw: Any, wire: Wire, pool: list[str], trials: int) -> dict[str, Any]:
    """One and five questions about a new ~400-token thread, per layout; each trial a thread never sent."""
    clients = {layout: SystemOneClient(raw, model=srv.model, layout=layout, debug=True)
               for layout in ("state_last", "split", "auto")}
    warm = thread(99, pool)
    for c in clients.values():
        c.system_one(warm, FIVE)  # prompts and priors cached; the threads below are new
    res: dict[str, Any] = {"state_tokens": [], "one_ms": []}
    for layout in clients:
        res[f"five_{layout}_ms"], res[f"five_{layout}_prefill"] = [], []
    res["auto_chose"] = []
    seq = 0
    for _ in range(trials):
        seq += 1
        state = thread(seq, pool)
        res["state_tokens"].append(len(srv.tokenize(render_state(state))))
        res["one_ms"].append(timed(lambda s=state: clients["auto"].system_one(s, {"team": TEAM}))[1])
        for layout, c in clients.items():
            seq += 1
            state = thread(seq, pool)
            k = len(wire.timings)
            resp, ms = timed(lambda s=state, c=c: c.system_one(s, FIVE))
            res[f"five_{layout}_ms"].append(ms)
            res[f"five_{layout}_prefill"].append(sum(t.get("prompt_n", 0) for t in wire.timings[k:]))
            if layout == "auto":
                res["auto_chose"].append((resp.debug.get("layout") or {}).get("layout"))
    return res


def report(model: str, threads: int, load: tuple[float, float], m: dict[str, Any]) -> str:
    one = m["one"]
    over = [r["one_prefill"] - r["state_tokens"] for r in one]
    lg = m["long"]
    one_long = p50(lg["one_ms"])
    lines = [f"### {model}, {threads} llama.cpp thread(s); load average {load[0]:.2f} at start, {load[1]:.2f} at end", "",
             "| figure | value | target |", "|---|---|---|",
             f"| state tokens per decision (p50) | {p50([r['state_tokens'] for r in one]):.0f} | |",
             f"| uncached tokens − state tokens, one question (max / p50) | {max(over)} / {p50(over):.0f} | ≤ 8 |",
             f"| uncached tokens − state tokens, bare call (p50) | "
             f"{p50([r['bare_prefill'] - r['state_tokens'] for r in one]):.0f} | |",
             f"| calls per decision | {p50([r['one_calls'] for r in one]):.0f} | 1 |",
             f"| prefill time, one question (p50) | {p50([r['one_prefill_ms'] for r in one]):.0f} ms | |",
             f"| bare minimal call, wall (p50) | {p50([r['bare_ms'] for r in one]):.0f} ms | |",
             f"| one question, wall (p50) | {p50([r['one_ms'] for r in one]):.0f} ms | |",
             f"| one question / bare call (p50 ratio) | {p50([r['one_ms'] for r in one]) / p50([r['bare_ms'] for r in one]):.2f}× | ≤ 1.1× |",
             f"| three questions, short state (p50) | {p50(m['three_short_ms']):.0f} ms "
             f"({p50(m['three_short_ms']) / p50(m['one_short_ms']):.1f}× one: {p50(m['one_short_ms']):.0f} ms) | |",
             f"| new ~{p50(lg['state_tokens']):.0f}-token thread, one question (p50) | {one_long:.0f} ms | |"]
    for layout in ("state_last", "split", "auto"):
        ms = p50(lg[f"five_{layout}_ms"])
        lines.append(f"| same, five questions, layout={layout} (p50) | {ms:.0f} ms ({ms / one_long:.1f}× one; "
                     f"{p50(lg[f'five_{layout}_prefill']):.0f} tokens prefilled) | {'≤ 2.5×' if layout == 'auto' else ''} |")
    lines.append(f"| layout=\"auto\" chose | {', '.join(sorted(set(map(str, lg['auto_chose']))))} | |")
    ft = m["first_ticket"]
    lines.append(f"| demo's first ticket on a fresh client, debias=False | {ft['calls']} calls for {ft['questions']} "
                 f"questions ({ft['calls'] - ft['questions']} extra), {ft['ms']:.0f} ms | 0 extra |")
    lines.append(f"| the same with the defaults (the examples' priors, once per client) | {ft['calls_with_priors']} calls, "
                 f"{ft['ms_with_priors']:.0f} ms | |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--threads", default="", help="comma-separated llama.cpp thread counts (default: the server's)")
    ap.add_argument("-n", type=int, default=16, help="new states for the one-question figures")
    ap.add_argument("--trials", type=int, default=3, help="new long threads per layout")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    runs = []
    for threads in [int(t) for t in args.threads.split(",") if t] or [None]:
        start = os.getloadavg()[0]
        with LocalServer(args.model, n_threads=threads) as srv:
            m = measure(srv, args.n, args.trials)
            n_threads = srv.n_threads
        load = (start, os.getloadavg()[0])
        print(report(args.model, n_threads, load, m) + "\n", flush=True)
        runs.append({"model": args.model, "threads": n_threads, "load": load, "date": time.strftime("%Y-%m-%d %H:%M"),
                     **m})
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
