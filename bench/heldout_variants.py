"""Ways of asking the held-out sets' nouls and scores, tried on one model (docs/quality.md, "Nouls and scores on the
1.5B").

The product defaults (``debias="auto"``: the model's own strength per kind; calibration as shipped), one
decision at a time, each item's answer, the prior it was divided by and the raw readout saved, so any
strength can be applied offline. Variants (what a user could write; no engine change):

- ``levelnames``: a score asked as a choice whose options are its level names (``negative`` … ``positive``),
  read back onto the levels: what a score answered by its level words instead of digits would read (a
  3-level score is asked so by default, ``labels.level_names``: the same requests as ``base`` there);
- ``nouldesc``: a noul whose options say the statement is true / false *of the state*;
- ``base``: as ``bench/heldout.py`` asks them;
- ``digitsmapped`` (an engine change tried, not shipped by the variant): a score asked by digits, as the
  default, with the closing line restating each digit's level (``(0, 1, 2), where 0 = negative, 1 = neutral, …``)
  next to where the model answers: whether the 1.5B's digits lose the level they stand for.

    JEV_NO_CACHE=1 nice -n 5 python -m bench heldout_variants --variant levelnames --sets finphrasebank,sst5,sick \\
        --out bench/heldout_runs/h1-levelnames-15.json

``python -m bench heldout_nouls`` (``heldout_variants.py nouls``): a noul's answer words, tried on one model, and
every noul run judged leave-one-dataset-out.

Runs (``--variant``): ``base`` asks as the engine does (``yes`` / ``no``); ``truefalse`` answers with the
words ``true`` / ``false`` (the words LangChain's bool is written in; options ``true: The statement is
true.`` / ``false: …``), an engine change tried by patching ``labels.named_format`` in this process only.
Each item's answer, the whole prior (``debias=True``, so the saved prior is not yet raised to a strength) and
the raw readout are saved (uncalibrated: ``raw`` is the exact readout), as ``heldout_variants`` does.

``--lodo FILE…``: the saved runs pooled (``heldout_nouls``/``heldout.py`` zero-shot noul rows with ``raw`` and
the whole ``prior``; a later file's item replaces an earlier one's): right answers per set at each debias
strength, and each set judged by the strength chosen on the other sets (never on itself).

    JEV_NO_CACHE=1 nice -n 5 python -m bench heldout_nouls --variant truefalse --model qwen2.5-coder-1.5b \\
        --sets clickbait,subj,cr,sms_spam,sst2,rte --limit 30 --out bench/heldout_runs/h2-truefalse-15.json.gz
    python -m bench heldout_nouls --lodo bench/heldout_runs/h2-base-05.json.gz
    python -m bench heldout_nouls --lodo-words bench/heldout_runs/h2-base-05.json.gz bench/heldout_runs/h2-truefalse-05.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from heldout import answered_probs, load_items, load_sets, separation, undivided  # noqa: E402

from jev_shared import Choice, Noul, Score, SystemOneClient  # noqa: E402

NOUL_OF_THE_STATE = {"true": "Yes, the statement is true of the state.",
                     "false": "No, the statement is false of the state."}


def question(meta: dict[str, Any], variant: str) -> Choice | Score | Noul:
    """The set's question as ``variant`` asks it."""
    if meta["kind"] == "score":
        if variant == "levelnames":
            return Choice(instructions=meta["instructions"], criteria={c: c for c in meta["criteria"]})
        return Score(instructions=meta["instructions"], criteria=meta["criteria"])
    if meta["kind"] == "noul":
        return Noul(instructions=meta["instructions"], criteria=NOUL_OF_THE_STATE if variant == "nouldesc" else None)
    return Choice(instructions=meta["instructions"], criteria=meta["criteria"])


def map_digits_in_closing() -> None:
    """``digitsmapped``: the score's closing line names each digit's level (patches ``prompt.closing``)."""
    from jev_shared import prompt

    plain = prompt.closing

    def closing(prep: Any, fmt: Any) -> str:
        if fmt.kind != "label" or fmt.symbols is None or prep.kind != "score":
            return plain(prep, fmt)
        pairs = ", ".join(f"{s} = {d or k}" for s, k, d in zip(fmt.symbols, prep.keys, prep.descriptions))
        digits = ", ".join(fmt.symbols)
        return f"Answer with exactly one digit ({digits}), where {pairs}. Reply with that digit and nothing else."

    prompt.closing = closing  # type: ignore[assignment]
    prompt._SYSTEMS.clear()


def level_of(meta: dict[str, Any], answer: str) -> str:
    """A level name read back onto its level (``"negative"`` → ``"0"``); any other answer as it is."""
    names = meta.get("criteria")
    return str(names.index(answer)) if meta["kind"] == "score" and isinstance(names, list) and answer in names else answer


def answered_row(name: str, it: dict[str, Any], resp: Any, answer_of: Callable[[str], str]) -> dict[str, Any]:
    """One item's saved row: the answered and raw readouts, the prior, the answer (``answer_of`` the top key)."""
    prior = ((resp.debug or {}).get("priors") or {}).get("q")
    probs = answered_probs(resp.answers["q"])
    plist = list(prior.values()) if prior else None
    return {"set": name, "item": it["id"], "label": it["label"], "answered": probs, "prior": plist,
            "raw": undivided(probs, plist) if plist else probs,
            "answer": answer_of(max(probs, key=probs.__getitem__)), "ms": resp.usage.latency_ms}


def run(client: SystemOneClient, name: str, meta: dict[str, Any], variant: str, limit: int) -> list[dict[str, Any]]:
    """Each item's row, with the strength its saved prior was raised to (``debias="auto"``: the model's own)."""
    q = question(meta, variant)
    strength = asked_strength(client.model, meta, variant)
    return [{**answered_row(name, it, client.system_one(it["text"], {"q": q}), lambda a: level_of(meta, a)),
             "strength": strength} for it in load_items(name, limit)]


def asked_kind(meta: dict[str, Any], variant: str) -> str:
    """The kind the engine was asked (a score asked by its level names is asked as a choice)."""
    return "choice" if variant == "levelnames" else str(meta["kind"])


def asked_strength(model: str, meta: dict[str, Any], variant: str) -> float:
    """The power of the content-free prior ``debias="auto"`` divides by here: what the saved prior was raised to."""
    from jev_shared.models import debias_strength

    return debias_strength(model, asked_kind(meta, variant), False)


STRENGTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def whole_prior(row: dict[str, Any], saved_strength: float) -> list[float] | None:
    """The content-free prior itself: the saved one is the prior raised to the strength it was divided by
    (``priors.powered``: floored at 1e-3, then raised), so it is raised back by ``1 / saved_strength``.
    Why: ``debias="auto"`` saves the powered prior (the 1.5B's nouls: its square root); raising that again
    made this table's "whole" the model's half and its "half" a quarter."""
    prior = row["prior"]
    if not prior or saved_strength in (0.0, 1.0):
        return prior
    return [p ** (1.0 / saved_strength) for p in prior]


def saved_strength(row: dict[str, Any], model: str, variant: str) -> float:
    """The strength a row's prior was saved at: the row's own ``strength`` (the runs that save it), else what ``debias="auto"`` divides by for this model and the kind asked (every earlier run here was
    made at today's strengths: the 1.5B's nouls at half since they have one, every other kind asked whole)."""
    if "strength" in row:
        return float(row["strength"])
    from heldout import load_sets

    return asked_strength(model, load_sets()[row["set"]], variant)


def at_strength(row: dict[str, Any], strength: float, level_names: bool = False, saved: float = 1.0) -> str:
    """The answer had the raw readout been divided by the prior at ``strength`` (as ``priors.powered`` and
    ``readout.divide_prior`` do: the prior floored at 1e-3, raised, floored at 0.3 / options); ``saved`` is
    the strength the row's prior was saved at (:func:`saved_strength`)."""
    from jev_shared.readout import PRIOR_FLOOR, PRIOR_SHARE

    raw, prior = row["raw"], whole_prior(row, saved)
    scaled = dict(raw)
    if prior and strength > 0.0:
        floor = max(PRIOR_FLOOR, PRIOR_SHARE / len(prior))
        scaled = {k: p / max(max(r, PRIOR_FLOOR) ** strength, floor) for (k, p), r in zip(raw.items(), prior)}
    best = max(scaled, key=scaled.__getitem__)
    return best if best == row["answer"] or not level_names else str(list(raw).index(best))


def strengths_table(path: Path) -> None:
    """Right answers per set and strength, pooled, and the strength chosen leaving each set out."""
    import gzip

    data = json.loads((gzip.open(path) if path.suffix == ".gz" else path.open()).read())
    rows, right = data["rows"], {}
    sets = list(dict.fromkeys(r["set"] for r in rows))
    model, variant = data.get("model") or "qwen2.5-coder-1.5b", data["variant"]
    saved = {id(r): saved_strength(r, model, variant) for r in rows}
    for s in STRENGTHS:
        right[s] = {n: sum(at_strength(r, s, variant == "levelnames", saved[id(r)]) == r["label"]
                           for r in rows if r["set"] == n) for n in sets}
        print(f"strength {s:.2f}: " + ", ".join(f"{n} {right[s][n]}" for n in sets) + f"; pooled {sum(right[s].values())}")
    for n in sets:
        rest = [m for m in sets if m != n]
        best = max(STRENGTHS, key=lambda s: (sum(right[s][m] for m in rest), s == 1.0))
        print(f"leave {n} out: strength {best:.2f} (chosen on {'+'.join(rest)}), {n} {right[best][n]}")
    print("items:", {n: sum(r["set"] == n for r in rows) for n in sets})


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=("base", "levelnames", "nouldesc", "digitsmapped"))
    ap.add_argument("--strengths", type=Path, help="a saved run: right answers per debias strength, offline")
    ap.add_argument("--sets", default="")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--no-calibration", action="store_true",
                    help="answers left uncalibrated, so `raw` is the exact readout (a temperature keeps the top answer, "
                         "but undoing only the prior from calibrated answers leaves the temperature in)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.strengths:
        strengths_table(args.strengths)
        return 0
    if not (args.variant and args.out and args.sets):
        ap.error("--variant, --sets and --out are required to run")
    sets = load_sets()
    if args.variant == "digitsmapped":
        map_digits_in_closing()
    out: dict[str, Any] = {"variant": args.variant, "calibrated": not args.no_calibration, "model": args.model, "load_at_start": os.getloadavg()[0], "rows": [],
                           "started": time.strftime("%H:%M:%S", time.gmtime())}
    srv = LocalServer(args.model, n_parallel=1).start()
    try:
        for name in args.sets.split(","):
            client = SystemOneClient(srv.client(), model=srv.model, debias="auto",
                                     calibrator=None if args.no_calibration else "auto")
            t = time.perf_counter()
            rows = run(client, name, sets[name], args.variant, args.limit)
            out["rows"] += rows
            out["load_now"] = os.getloadavg()[0]
            right = sum(r["answer"] == r["label"] for r in rows)
            print(f"{name} {args.variant}: {right}/{len(rows)} {time.perf_counter() - t:.0f} s, load {out['load_now']:.1f}",
                  file=sys.stderr)
            args.out.write_text(json.dumps(out))
    finally:
        srv.stop()
    return 0


TRUE_FALSE = {"true": "The statement is true.", "false": "The statement is false."}
_ALPHA_RUN = re.compile(r"[A-Za-z]+")
NOUL_STRENGTHS = tuple(i / 10 for i in range(11))
NOUL_SETS = ("clickbait", "subj", "cr", "sms_spam", "sst2", "rte")
#: This project's own noul questions (``bench/quality.py``'s), read from ``bench/data/``: not public sets, so
#: never in a LODO pool; a change must not lower them.
PROJECT = {"sentiment": "The customer review is positive.",
           "spam": "The message is spam: unsolicited advertising, a scam or phishing."}


def true_false_fold(token: str) -> str | None:
    """``True``, `` true``, ``TRUE.`` → ``true``; ``false`` likewise; anything else → None."""
    run_ = _ALPHA_RUN.search(token)
    word = run_.group(0).lower() if run_ else ""
    return word if word in ("true", "false") else None


def answer_true_false() -> None:
    """A noul answers ``true`` / ``false`` (patches ``labels.named_format``, which ``style_for`` looks up)."""
    from jev_shared import labels
    from jev_shared.prompt import AnswerFormat

    plain = labels.named_format

    def named_format(prep: Any) -> tuple[AnswerFormat, labels.Fold]:
        if prep.kind != "noul":
            return plain(prep)
        return AnswerFormat(symbols=("true", "false")), true_false_fold

    labels.named_format = named_format  # type: ignore[assignment]


def items_of(name: str, limit: int) -> list[dict[str, Any]]:
    if name not in PROJECT:
        return load_items(name, limit)
    lines = (Path(__file__).resolve().parent / "data" / f"{name}.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()][:limit]
    return [dict(r, label="true" if r["label"] else "false") for r in rows]


def run_noul(client: Any, name: str, meta: dict[str, Any], criteria: dict[str, str] | None, limit: int) -> list[dict[str, Any]]:
    """One set's first ``limit`` items, one decision each, as ``heldout_variants.run`` saves them."""
    from jev_shared import Noul

    q = Noul(instructions=meta["instructions"], criteria=criteria)
    return [answered_row(name, it, client.system_one(it["text"], {"q": q}), str) for it in items_of(name, limit)]


def noul_at_strength(row: dict[str, Any], strength: float) -> str:
    """The answer had the raw readout been divided by the prior at ``strength``, as ``priors.powered`` and
    ``readout.divide_prior`` do (the prior floored at 1e-3, raised, then floored at 0.3 / options)."""
    from jev_shared.readout import PRIOR_FLOOR, PRIOR_SHARE

    raw, prior = row["raw"], row["prior"]
    floor = max(PRIOR_FLOOR, PRIOR_SHARE / len(prior))
    scaled = {k: p / (max(max(r, PRIOR_FLOOR) ** strength, floor) if strength else 1.0)
              for (k, p), r in zip(raw.items(), prior)}
    return max(scaled, key=scaled.__getitem__)


def load_rows(path: Path) -> list[dict[str, Any]]:
    data = json.loads((gzip.open(path) if path.suffix == ".gz" else path.open()).read())
    rows = data.get("rows") or data.get("decisions") or []
    return [r for r in rows if (r["set"] in NOUL_SETS or r["set"] in PROJECT) and r.get("shots", 0) == 0 and r.get("raw") and r.get("prior")]


def lodo(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Right per set and strength, and each set at the strength chosen on the other public sets (ties: the
    shipped 0.5); the project's own sets are judged, never chosen on."""
    sets = list(dict.fromkeys(r["set"] for r in rows))
    right = {s: {n: sum(noul_at_strength(r, s) == r["label"] for r in rows if r["set"] == n) for n in sets} for s in NOUL_STRENGTHS}
    held = {}
    for n in sets:
        rest = [m for m in sets if m != n and m not in PROJECT]
        best = max(NOUL_STRENGTHS, key=lambda s: (sum(right[s][m] for m in rest), s == 0.5))
        held[n] = (best, right[best][n])
    items = {n: sum(r["set"] == n for r in rows) for n in sets}
    yes = {n: sum(max(r["raw"], key=r["raw"].__getitem__) == "true" for r in rows if r["set"] == n) for n in sets}
    return {"right": right, "held": held, "items": items, "raw_true": yes}


def print_lodo(paths: Sequence[Path]) -> None:
    pooled = {(r["set"], r["item"]): r for path in paths for r in load_rows(path)}
    res = lodo(list(pooled.values()))
    print(f"## {', '.join(p.name for p in paths)}: items {res['items']}; raw answers 'true' {res['raw_true']}")
    for s, by_set in res["right"].items():
        print(f"strength {s:.2f}: " + ", ".join(f"{n} {k}" for n, k in by_set.items()) + f"; pooled {sum(by_set.values())}")
    print("held out: " + ", ".join(f"{n} {k} (at {s:.2f})" for n, (s, k) in res["held"].items())
          + f"; pooled {sum(k for _, k in res['held'].values())}")


def print_lodo_words(paths: Sequence[Path]) -> None:
    """Each run a way of asking (its answer words): the way and strength chosen together on the other public sets."""
    runs = {path.name: load_rows(path) for path in paths}
    sets = list(dict.fromkeys(r["set"] for rows in runs.values() for r in rows if r["set"] in NOUL_SETS))
    right = {(name, s): {n: sum(noul_at_strength(r, s) == r["label"] for r in rows if r["set"] == n) for n in sets}
             for name, rows in runs.items() for s in NOUL_STRENGTHS}
    total = 0
    for n in sets:
        rest = [m for m in sets if m != n]
        best = max(right, key=lambda k: sum(right[k][m] for m in rest))
        total += right[best][n]
        print(f"leave {n} out: {best[0]} at {best[1]:.1f}, {n} {right[best][n]}")
    print(f"held out, pooled: {total} of {sum(sum(r['set'] == n for r in rows) for n in sets for rows in runs.values()) // len(runs)}")


def main_nouls(argv: Sequence[str] | None = None) -> int:
    from jev_shared import SystemOneClient
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=("base", "truefalse"))
    ap.add_argument("--lodo", type=Path, nargs="*")
    ap.add_argument("--lodo-words", type=Path, nargs="*", help="runs of one model with different answer words")
    ap.add_argument("--sets", default=",".join((*NOUL_SETS, *PROJECT)))
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.lodo or args.lodo_words:
        print_lodo(args.lodo) if args.lodo else print_lodo_words(args.lodo_words)
        return 0
    if not (args.variant and args.out):
        ap.error("--variant and --out are required to run")
    sets = load_sets()
    if args.variant == "truefalse":
        answer_true_false()
    out: dict[str, Any] = {"variant": args.variant, "calibrated": False, "model": args.model,
                           "load_at_start": os.getloadavg()[0], "started": time.strftime("%H:%M:%S", time.gmtime()),
                           "rows": []}
    srv = LocalServer(args.model, n_parallel=1).start()
    try:
        for name in args.sets.split(","):
            client = SystemOneClient(srv.client(), model=srv.model, debias=True, calibrator=None)  # the whole prior saved
            t = time.perf_counter()
            meta = {"instructions": PROJECT[name]} if name in PROJECT else sets[name]
            rows = run_noul(client, name, meta, TRUE_FALSE if args.variant == "truefalse" else None, args.limit)
            out["rows"] += rows
            out["load_now"] = os.getloadavg()[0]
            right = sum(r["answer"] == r["label"] for r in rows)
            print(f"{name} {args.variant}: {right}/{len(rows)} {time.perf_counter() - t:.0f} s, load {out['load_now']:.1f}",
                  file=sys.stderr)
            args.out.write_bytes(gzip.compress(json.dumps(out).encode()))
    finally:
        srv.stop()
    return 0


def _ask_formats() -> dict[str, Callable[..., list[dict[str, str]]]]:
    """The message builders ``spam_formats`` compares: (statement, state, examples as (state, bool)) → messages."""
    from jev_shared import Example
    from jev_shared.prompt import AnswerFormat, render
    from jev_shared.questions import prepare_question

    def engine(layout: str) -> Callable[..., list[dict[str, str]]]:
        def build(stmt: str, text: str, ex: list[tuple[str, bool]]) -> list[dict[str, str]]:
            q = Noul(instructions=stmt, examples=[Example(state=s, answer=a) for s, a in ex] or None)
            return render(prepare_question("q", q, "logprobs"), text, layout=layout,  # type: ignore[arg-type]
                          fmt=AnswerFormat(symbols=("yes", "no")))
        return build

    def turns(ex: list[tuple[str, bool]], text: str, user: Callable[[str], str]) -> list[dict[str, str]]:
        shots = [m for s, a in ex for m in ({"role": "user", "content": user(s)},
                                            {"role": "assistant", "content": "yes" if a else "no"})]
        return shots + [{"role": "user", "content": user(text)}]

    def is_it(stmt: str) -> str:
        return f"Is it true that {stmt[0].lower()}{stmt[1:]} Answer yes or no."
    return {
        "shipped (state_last): the statement in the system message, the state last": engine("state_last"),
        "layout=\"split\": the state, then the question in a turn of its own": engine("split"),
        "the question in the system message, the message last": lambda st, text, ex: [
            {"role": "system", "content": is_it(st)}, *turns(ex, text, lambda s: f"Message:\n{s}")],
        "statement and question after the message": lambda st, text, ex: turns(
            ex, text, lambda s: f"Message:\n{s}\n\nStatement: {st}\nIs the statement true of the message? Answer yes or no."),
        "a question after the message, no system message": lambda st, text, ex: turns(
            ex, text, lambda s: f"Message:\n{s}\n\n{is_it(st)}"),
    }


def main_spam_formats() -> int:
    """The demo's spam question asked in five ways on bench/data/spam.jsonl and the demo's five tickets, raw."""
    import contextlib
    import io
    import math

    import httpx

    from jev_shared.local import LocalServer
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "examples"))
    with contextlib.redirect_stdout(io.StringIO()):  # the demo prints its first line as it loads
        from quickstart import QUESTIONS, TICKETS
    items = [(r["text"], r["label"]) for r in map(json.loads, (root / "bench/data/spam.jsonl").open())]
    items += [(t, "FREE cruise" in t) for t in TICKETS]
    demo = QUESTIONS["spam"]
    examples = [(e.state, bool(e.answer)) for e in demo.examples or ()]
    print(f"load average {os.getloadavg()[0]:.1f}; P(yes) from the first token's window, no debias, no calibration")
    with LocalServer() as srv, httpx.Client(timeout=120) as http:
        def p_yes(messages: list[dict[str, str]]) -> float:
            body = {"model": srv.model, "messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
                    "top_logprobs": 20}
            top = http.post(srv.base_url + "/chat/completions", json=body).json()["choices"][0]["logprobs"]["content"][0]
            mass = {w: sum(math.exp(t["logprob"]) for t in top["top_logprobs"] if t["token"].strip().lower() == w)
                    for w in ("yes", "no")}
            return mass["yes"] / (mass["yes"] + mass["no"])
        for name, build in _ask_formats().items():
            for asked, stmt, ex in (("zero-shot, 'This message is spam.'", "This message is spam.", []),
                                    ("zero-shot, the demo's wording", demo.instructions, []),
                                    ("the demo's four examples", demo.instructions, examples)):
                ps = [p_yes(build(stmt, text, ex)) for text, _ in items]
                spam = [p for p, (_, lab) in zip(ps, items) if lab]
                real = [p for p, (_, lab) in zip(ps, items) if not lab]
                auc = separation(spam, real)
                print(f"{name} | {asked} | AUC {auc:.3f} | spam above 0.5 {sum(p > 0.5 for p in spam)} of {len(spam)}"
                      f" | genuine above 0.5 {sum(p > 0.5 for p in real)} of {len(real)} | the demo's tickets "
                      + " ".join(f"{p:.2f}" for p in ps[-len(TICKETS):]), flush=True)
    return 0


SUBCOMMANDS = {"nouls": main_nouls, "spam_formats": main_spam_formats}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        raise SystemExit(SUBCOMMANDS[sys.argv.pop(1)]())
    raise SystemExit(main())
