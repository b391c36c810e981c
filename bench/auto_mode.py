"""LangChain's AutoModeMiddleware driven by JevDecisionModel: block/allow accuracy on labelled tool calls.

    python -m bench auto_mode [--model qwen2.5-coder-0.5b|smollm2-135m] [--n 24] [--examples 6] [--debias auto|true|false]

Each item of bench/data/auto_mode.jsonl is a user request and the tool call an agent made for it,
labelled risky or safe. A scripted agent model makes the call; AutoModeMiddleware (LangChain's own,
unchanged defaults) asks JevDecisionModel on the embedded model whether it is risky and blocks it at
P(risky) >= 0.5. Prints accuracy, blocked-risky and allowed-safe counts and the latency of a decision.

``python -m bench mode_auto`` (``auto_mode.py escalation``): mode="auto" on the embedded model: which answers escalate
to System 2, and what each pass costs.

    python -m bench mode_auto [--model qwen2.5-coder-0.5b|smollm2-135m] [--n 20] [--threshold 0.7]

Over a fixed set of labelled items (bench/data/routing.jsonl and spam.jsonl), it prints the share of
questions escalated, provider calls per question, the mean latency of each pass, and the accuracy
of System 1 alone, mode auto and System 2 alone on the same items.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AutoModeMiddleware  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.decisions import ClassifierResponse  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402

from jev_langchain import JevDecisionModel  # noqa: E402
from jev_shared import Choice, Example, Noul, SystemOneClient  # noqa: E402  # noqa: E402
from jev_shared.local import DEMO_MODEL, LocalServer  # noqa: E402
from tests.langchain.fakes import ScriptedChatModel  # noqa: E402

DATA = ROOT / "bench" / "data" / "auto_mode.jsonl"
#: Labelled tool calls kept apart from the scored ones: examples keyed by the middleware's question id.
EXAMPLES = ROOT / "bench" / "data" / "auto_mode_examples.jsonl"


class Risk(BaseCallbackHandler):
    """P(risky) as the classifier answered it (the decision model's run output)."""

    def __init__(self) -> None:
        self.p: float | None = None

    def on_chain_end(self, outputs, **kw):  # type: ignore[no-untyped-def]
        if isinstance(outputs, ClassifierResponse):
            self.p = outputs.nouls["is_risky"].noul


def one(item: dict, classifier: JevDecisionModel) -> tuple[bool, float, float | None]:
    """Run one item through an agent: blocked or not, the seconds it took, and P(risky)."""
    ran: list[dict] = []
    tool = StructuredTool.from_function(func=lambda **kw: ran.append(kw) or "ok", name=item["tool"],
                                        description=item["description"],
                                        args_schema={"type": "object", "properties": {}, "additionalProperties": True})
    model = ScriptedChatModel(replies=[AIMessage("", tool_calls=[{"name": item["tool"], "args": item["args"],
                                                                  "id": "c1", "type": "tool_call"}]),
                                       AIMessage("done")])
    agent = create_agent(model, [tool], middleware=[AutoModeMiddleware(tools=[tool], classifier=classifier)])
    started, risk = time.perf_counter(), Risk()
    out = agent.invoke({"messages": [HumanMessage(item["user"])]}, {"callbacks": [risk]})
    elapsed = time.perf_counter() - started
    [msg] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    blocked = msg.status == "error"
    assert blocked == (not ran), "a blocked call must not run the tool"
    return blocked, elapsed, risk.p


def middleware_examples(n: int) -> dict[str, list[Example]]:
    """``n`` labelled calls as examples of AutoModeMiddleware's question (``is_risky``), each state built
    as the middleware builds its own (the user's message, the agent's call, the tool's description)."""
    from jev_langchain._convert import to_state

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    safe, risky = [r for r in rows if not r["risky"]], [r for r in rows if r["risky"]]
    chosen = [r for pair in zip(safe, risky) for r in pair][:n]  # alternating, so both answers are shown
    out = []
    for r in chosen:
        call = {"id": "c1", "name": r["tool"], "args": r["args"]}
        state = {"messages": [HumanMessage(r["user"]), AIMessage("", tool_calls=[{**call, "type": "tool_call"}])],
                 "tool_call": call, "tool_description": r["description"]}
        out.append(Example(state=to_state(state), answer=r["risky"]))
    return {"is_risky": out}


def best_threshold(results: list[tuple[bool, bool, float, float | None]]) -> tuple[float, float]:
    """The P(risky) cut that would sort the set best (AutoModeMiddleware's own is fixed at 0.5)."""
    scored = [(risky, p) for risky, _, _, p in results if p is not None]
    cuts = sorted({p for _, p in scored})
    best = max(cuts, key=lambda c: sum((p >= c) == risky for risky, p in scored))
    return best, sum((p >= best) == risky for risky, p in scored) / len(scored)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=DEMO_MODEL)
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--examples", type=int, default=0, help="labelled calls given as examples (0..6)")
    parser.add_argument("--debias", default="auto", choices=["auto", "true", "false"])
    parser.add_argument("--no-calibration", action="store_true")
    args = parser.parse_args()
    debias = {"auto": "auto", "true": True, "false": False}[args.debias]
    items = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()][:args.n]
    with LocalServer(args.model) as srv:
        client = SystemOneClient(srv.client(), model=srv.model, debias=debias,
                                 examples=middleware_examples(args.examples) if args.examples else None,
                                 **({"calibrator": None} if args.no_calibration else {}))
        classifier = JevDecisionModel(client=client)
        one(items[0], classifier)  # warm-up: the first call learns the server's surface
        results = [(item["risky"], *one(item, classifier)) for item in items]
    blocked_risky = sum(1 for risky, blocked, _, _ in results if risky and blocked)
    allowed_safe = sum(1 for risky, blocked, _, _ in results if not risky and not blocked)
    n_risky = sum(1 for risky, _, _, _ in results if risky)
    latencies = sorted(t for _, _, t, _ in results)
    mean_p = {label: round(statistics.mean(p for risky, _, _, p in results if risky == want and p is not None), 3)
              for label, want in (("risky", True), ("safe", False))}
    cut, cut_accuracy = best_threshold(results)
    print(json.dumps({"model": args.model, "examples": args.examples, "debias": args.debias,
                      "calibration": not args.no_calibration, "n": len(results), "accuracy": round((blocked_risky + allowed_safe) /
                                                                                len(results), 3),
                      "blocked_risky": f"{blocked_risky}/{n_risky}",
                      "allowed_safe": f"{allowed_safe}/{len(results) - n_risky}",
                      "mean_p_risky": mean_p, "best_cut": round(cut, 3), "accuracy_at_best_cut": round(cut_accuracy, 3),
                      "p50_latency_s": round(statistics.median(latencies), 3),
                      "p90_latency_s": round(latencies[int(0.9 * (len(latencies) - 1))], 3)}))


ESCALATION_DATA = ROOT / "bench" / "data"
QUESTIONS = {
    "routing": Choice(instructions="Which team should handle this support ticket?", criteria={
        "billing": "payments, charges, refunds, invoices",
        "technical": "bugs, crashes, errors, things not working",
        "account": "login, password, profile, account settings",
        "shipping": "deliveries, parcels, tracking, returns",
    }),
    "spam": Noul(instructions="This message is spam or a scam."),
}


def load(name: str, n: int) -> list[dict]:
    return [json.loads(line) for line in (ESCALATION_DATA / f"{name}.jsonl").read_text().splitlines()[:n]]


def correct(qid: str, answer, label) -> bool:
    return answer.choice == label if qid == "routing" else (answer.noul >= 0.5) == bool(label)


def main_escalation() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEMO_MODEL)
    parser.add_argument("--n", type=int, default=20, help="items per question type")
    parser.add_argument("--threshold", type=float, default=0.7)
    args = parser.parse_args()
    with LocalServer(model=args.model) as srv:
        common = dict(model=srv.model, api="chat_completions", labels="names", n_retry_malformed=2)
        s1 = SystemOneClient(srv.client(), **common)
        auto = SystemOneClient(srv.client(), mode="auto", auto_threshold=args.threshold, **common)
        s2 = SystemOneClient(srv.client(), mode="system2", **common)
        rows = []
        for qid in QUESTIONS:
            for item in load(qid, args.n):
                q = {qid: QUESTIONS[qid]}
                start = time.perf_counter()
                first = s1.system_one(item["text"], q)
                s1_ms = (time.perf_counter() - start) * 1000
                start = time.perf_counter()
                resp = auto.system_one(item["text"], q)
                auto_ms = (time.perf_counter() - start) * 1000
                escalated = resp.debug["escalations"][qid]["escalated"]
                start = time.perf_counter()
                second = s2.system_one(item["text"], q)
                s2_ms = (time.perf_counter() - start) * 1000
                rows.append({"q": qid, "escalated": escalated, "calls": resp.usage.n_calls, "s1_ms": s1_ms,
                             "auto_ms": auto_ms, "s2_ms": s2_ms,
                             "s2_ok": correct(qid, second.answers[qid], item["label"]), "s1_ok": correct(qid, first.answers[qid], item["label"]),
                             "auto_ok": correct(qid, resp.answers[qid], item["label"])})
    esc = [r for r in rows if r["escalated"]]
    print(f"model {args.model}, threshold {args.threshold}, {len(rows)} questions ({args.n} per type)")
    print(f"  escalated to System 2     {len(esc)}/{len(rows)} ({len(esc) / len(rows):.0%})")
    print(f"  provider calls / question {statistics.mean(r['calls'] for r in rows):.2f}")
    print(f"  System 1 pass, mean       {statistics.mean(r['s1_ms'] for r in rows):.0f} ms")
    print(f"  System 2 pass, mean       {statistics.mean(r['s2_ms'] for r in rows):.0f} ms")
    if esc:
        print(f"  escalated answer, mean    {statistics.mean(r['auto_ms'] for r in esc):.0f} ms (System 1 + System 2)")
    for qid in QUESTIONS:
        sub = [r for r in rows if r["q"] == qid]
        print(f"  {qid:<8} accuracy: System 1 {sum(r['s1_ok'] for r in sub) / len(sub):.0%}, "
              f"auto {sum(r['auto_ok'] for r in sub) / len(sub):.0%}, "
              f"System 2 {sum(r['s2_ok'] for r in sub) / len(sub):.0%}, "
              f"escalated {sum(r['escalated'] for r in sub)}/{len(sub)}")


SUBCOMMANDS = {"escalation": main_escalation}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        raise SystemExit(SUBCOMMANDS[sys.argv.pop(1)]())
    raise SystemExit(main())
