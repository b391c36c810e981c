"""The end of a batch run: the summary (what was answered, what failed and why, what it cost) and the
review queue (the choice answers below a confidence threshold, for a person to look at).

Both read the whole answer log, so a resumed run reports on every item, not only its own share.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .run import BatchTotals

#: A choice answer below this confidence goes to the review queue unless the run says otherwise.
REVIEW_THRESHOLD = 0.5


def choice_ids(questions: Mapping[str, Any]) -> list[str]:
    return [qid for qid, q in questions.items() if _kind(q) == "choice"]


def _kind(q: Any) -> str | None:
    return q.get("type") if isinstance(q, Mapping) else getattr(q, "type", None)


def review_rows(records: Mapping[str, dict[str, Any]], questions: Mapping[str, Any],
                threshold: float, states: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per (item, choice question) answered below ``threshold``, in log order; with ``states``
    (the input's, by the log's id key), each row carries the item's state, for the person reviewing it."""
    rows = []
    for key, rec in records.items():
        answers = rec.get("answers") or {}
        for qid in choice_ids(questions):
            ans = answers.get(qid)
            if ans and ans.get("confidence", 1.0) < threshold:
                state = {"state": states[key]} if states is not None and key in states else {}
                rows.append({"id": rec["id"], **state, "question": qid, "choice": ans.get("choice"),
                             "confidence": ans.get("confidence"), "probabilities": ans.get("probabilities")})
    return rows


def write_review(path: str | os.PathLike[str], rows: list[dict[str, Any]]) -> None:
    """The review queue, written whole and renamed into place (a rerun replaces it)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, p)


def summarize(records: Mapping[str, dict[str, Any]], questions: Mapping[str, Any], run: BatchTotals,
              *, n_input: int, skipped: int, threshold: float) -> dict[str, Any]:
    """The whole log's counts, this run's cost and speed, and each choice's share below ``threshold``."""
    failed = Counter(rec["error"].get("type", "error") for rec in records.values() if rec.get("error"))
    answered = [rec for rec in records.values() if rec.get("answers")]
    low = {}
    for qid in choice_ids(questions):
        got = [rec["answers"][qid] for rec in answered if qid in rec["answers"]]
        below = sum(1 for a in got if a.get("confidence", 1.0) < threshold)
        low[qid] = {"answered": len(got), "below": below, "share": round(below / len(got), 4) if got else 0.0}
    return {"input": n_input, "skipped": skipped, "answered": len(answered), "failed": dict(failed),
            "missing": max(0, n_input - len(records)), "run": run.as_dict(), "threshold": threshold,
            "below_threshold": low}


def render_summary(summary: dict[str, Any], review_path: str | None) -> str:
    """The summary for a person, a few lines on stderr."""
    run = summary["run"]
    failed = ", ".join(f"{k} {v}" for k, v in sorted(summary["failed"].items())) or "none"
    lines = [
        f"jev decide: {summary['answered']} answered, failed: {failed} ({summary['input']} in the input, "
        f"{summary['skipped']} already in the output, {summary['missing']} not decided)",
        f"  this run: {run['answered']} answered, {sum(run['failed'].values())} failed, "
        f"{run['decisions']} decisions in {run['wall_s']:.1f} s = {run['decisions_per_s']:.2f} decisions/s, "
        f"{run['items_per_s']:.2f} items/s; tokens in {run['input_tokens']}, out {run['output_tokens']}, "
        f"{run['n_calls']} calls, {run['n_retries']} retries",
    ]
    for qid, low in summary["below_threshold"].items():
        lines.append(f"  {qid}: {low['below']} of {low['answered']} ({low['share']:.1%}) below confidence "
                     f"{summary['threshold']}" + (f" -> {review_path}" if review_path and low["below"] else ""))
    return "\n".join(lines)
