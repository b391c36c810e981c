"""Offline, tried for issue 32 (not shipped): does how varied a question's answers are carry between sets?

The 1.5B's calibration error belongs to the set: ``cb`` is answered boldly and wrongly, ``trec``
timidly and rightly, and no feature of one answer separates them (docs/quality.md, "Calibration that
carries"). One thing the engine could know at run time that is the set's, not the answer's: how its
*other* answers to the same question spread over the options. A model that answers nearly every item
of ``cb`` with one option (97% of them) is leaning, not reading; on ``trec`` its answers spread over
the six classes as the items do. Here each answer gets ``answer_spread``: the entropy over log K of the
top answers to the same question's other items (leave-this-item-out), and maps using it are judged
leave-one-dataset-out beside the shipped one, on the same folds (``heldout_carry.compare``).

Offline it sees every other item of the set; at run time a question would have only those answered
before it (and a set whose options are truly skewed, spam among mail, reads as collapsed): an upper
bound on what the feature can do, not a product.

    python bench/heldout_spread.py bench/heldout_runs/qwen15-*.json.gz bench/heldout_runs/h3-ex1-15.json
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_carry as hc  # noqa: E402
import heldout_fit as hf  # noqa: E402
from heldout import Decision  # noqa: E402
from heldout_load import load_runs  # noqa: E402
from heldout_maps import temperature_map, top_map  # noqa: E402

from jev_shared.calibration import Context  # noqa: E402
from jev_shared.calibration.map import FEATURES  # noqa: E402


@dataclass(frozen=True)
class SpreadContext(Context):
    """The engine's context plus the spread of the question's other answers (bench only)."""

    answer_spread: float = 1.0


def spreads(decisions: Sequence[Decision], causal: bool = False) -> dict[tuple[str, int, str], float]:
    """Per item: the entropy over log K of the top answers (as answered) to its set's other items, or
    (``causal``) to the items answered before it in the run (as the engine could count them; none: 1)."""
    tops: dict[tuple[str, int], Counter[str]] = {}
    top_of, before = {}, {}
    for d in decisions:
        rec = hf.record(d)
        top = max(rec.probabilities, key=rec.probabilities.__getitem__)
        top_of[(d.set, d.shots, d.item)] = top
        before[(d.set, d.shots, d.item)] = tops.setdefault((d.set, d.shots), Counter()).copy()
        tops[(d.set, d.shots)][top] += 1
    out = {}
    for d in decisions:
        hist = tops[(d.set, d.shots)].copy()
        hist[top_of[(d.set, d.shots, d.item)]] -= 1
        if causal:
            hist = before[(d.set, d.shots, d.item)]
        n, k = sum(hist.values()), len(d.answered)
        h = -sum(c / n * math.log(c / n) for c in hist.values() if c > 0) if n else math.log(k)
        out[(d.set, d.shots, d.item)] = h / math.log(k) if k > 1 else 1.0
    return out


def install(decisions: Sequence[Decision], causal: bool = False) -> None:
    """``answer_spread`` as a feature, and every record's context carrying it (this process only)."""
    table = spreads(decisions, causal)
    FEATURES["answer_spread"] = lambda probs, ctx: getattr(ctx, "answer_spread", 1.0)
    plain = hf.context
    by_answer = {id(d): table[(d.set, d.shots, d.item)] for d in decisions}

    def context(d: Decision, prior: list[float] | None) -> Context:
        base = plain(d, prior)
        return SpreadContext(base.kind, base.examples, base.prior, base.prior_floor, by_answer.get(id(d), 1.0))

    hf.context = context  # type: ignore[assignment]


FORMS = {
    "T(entropy, answer_spread), nouls' and scores' own": hf.own_kinds(
        temperature_map(("entropy", "answer_spread")), {k: temperature_map(("entropy", "answer_spread"))
                                                        for k in ("noul", "score")}),
    "T(entropy, answer_spread) on all": temperature_map(("entropy", "answer_spread")),
    "top(entropy)(entropy, answer_spread)": top_map(("entropy",), ("entropy", "answer_spread")),
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--causal", action="store_true", help="the spread of the answers before each item only")
    ap.add_argument("--forms", nargs="*", default=list(FORMS), help="of FORMS")
    args = ap.parse_args(argv)
    hf.MODEL = args.model
    found, _, paths = load_runs(args.raw, args.model)
    decisions = [d for d in found if d.answered]
    install(decisions, args.causal)
    hf.FITS.update(FORMS)
    print(f"{args.model}: {len(decisions)} answers, {len({d.set for d in decisions})} sets, from "
          f"{', '.join(p.name for p in paths)}")
    print(hc.compare(decisions, [hf.OWN_KINDS, *args.forms]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
