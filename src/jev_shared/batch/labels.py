"""Labels: a batch input's true answers carried into the answer log, and read back as calibration records.

``jev decide --label COLUMN`` names the input column that holds each row's true answer to the (one)
question; with several questions, ``--label QID=COLUMN`` once per labelled question. Each label is
checked against its question when the input is read, before any request, and written on the row's
log line as ``"labels": {question id: label}``, in the form ``jev calibrate`` reads:

- choice: an option's name (``"billing"``);
- score: a level's index, 0 for the first level (``2``; ``"2"`` in a CSV);
- noul: a JSON boolean, ``true``/``false``/``yes``/``no`` in any case, or 1/0 (written as a boolean).

An empty cell (CSV), ``null`` or a missing key (JSONL) leaves that row unlabelled: label a sample of
a large input and calibrate on it. :func:`labelled_records` turns a log line back into
:class:`~jev_shared.calibration.Record`\\ s, one per labelled question that was answered; :func:`log_records` reads a
whole log, with the model whose shipped calibration its answers went through (``"shipped_calibration"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jev_shared.answers import ChoiceAnswer, NoulAnswer, ScoreAnswer
from jev_shared.calibration import Record

#: Noul labels given as text, in any case.
NOUL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_ANSWERS: dict[str, type[ChoiceAnswer | ScoreAnswer | NoulAnswer]] = {
    "choice": ChoiceAnswer, "score": ScoreAnswer, "noul": NoulAnswer}


class LabelError(ValueError):
    """A label, or a ``--label`` flag, that cannot be used: names the row and the column, or the flag."""


@dataclass(frozen=True)
class LabelColumn:
    """One labelled question: its id, its kind, the input column holding its labels, and its options or levels."""

    question_id: str
    kind: str
    column: str
    #: A choice's option names, or a score's level count as ``("0", "1", ...)``; empty for a noul.
    keys: tuple[str, ...]

    def read(self, value: Any, where: str) -> str | int | bool | None:
        """The label as the log writes it, or None for an unlabelled row; LabelError names ``where`` and the column."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        label = self._normalise(value)
        if label is None:
            raise LabelError(f"{where}: column {self.column!r}: {value!r} is not a label of question "
                             f"{self.question_id!r} ({self.kind}): {self.expected()}")
        return label

    def expected(self) -> str:
        if self.kind == "choice":
            return "expected one of its options: " + ", ".join(self.keys)
        if self.kind == "score":
            return f"expected a level's index, 0 to {len(self.keys) - 1}"
        return "expected true or false (a JSON boolean, true/false, yes/no or 1/0)"

    def _normalise(self, value: Any) -> str | int | bool | None:
        if self.kind == "noul":
            if isinstance(value, bool):
                return value
            text = value if isinstance(value, str) else str(value) if isinstance(value, int) else ""
            return NOUL_WORDS.get(text.strip().lower())
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        text = str(value).strip()
        if self.kind == "choice":
            return text if text in self.keys else None
        return int(text) if text in self.keys else None


@dataclass(frozen=True)
class Labeler:
    """The ``--label`` flags resolved against the questions: reads each row's labels."""

    columns: tuple[LabelColumn, ...]

    def read(self, row: Mapping[str, Any], where: str) -> dict[str, Any] | None:
        """``{question id: label}`` for the labelled questions of ``row`` (None when it has none)."""
        labels = {}
        for col in self.columns:
            label = col.read(row.get(col.column), where)
            if label is not None:
                labels[col.question_id] = label
        return labels or None

    def missing_columns(self, fields: Sequence[str]) -> list[str]:
        return [c.column for c in self.columns if c.column not in fields]


def _kind_and_keys(qid: str, question: Any) -> tuple[str, tuple[str, ...]]:
    q = dict(question) if isinstance(question, Mapping) else question.model_dump()
    kind, criteria = q.get("type"), q.get("criteria")
    if kind == "choice" and isinstance(criteria, Mapping):
        return kind, tuple(str(k) for k in criteria)
    if kind == "score" and isinstance(criteria, (list, Mapping)):
        return kind, tuple(str(i) for i in range(len(criteria)))
    if kind == "noul":
        return kind, ()
    raise LabelError(f"--label: question {qid!r} is not a choice, score or noul the engine accepts")


def labeler(flags: Sequence[str] | None, questions: Mapping[str, Any]) -> Labeler | None:
    """``--label COLUMN`` (one question) or ``--label QID=COLUMN`` (any of several), checked against ``questions``."""
    if not flags:
        return None
    columns: dict[str, LabelColumn] = {}
    for flag in flags:
        qid, sep, column = flag.partition("=")
        if not sep or qid not in questions:
            qid, column = _only_question(flag, questions), flag
        if not column:
            raise LabelError(f"--label {flag!r}: no column after {qid}=")
        if qid in columns:
            raise LabelError(f"--label: question {qid!r} is labelled twice ({columns[qid].column!r}, {column!r})")
        kind, keys = _kind_and_keys(qid, questions[qid])
        columns[qid] = LabelColumn(qid, kind, column, keys)
    return Labeler(tuple(columns.values()))


def _only_question(flag: str, questions: Mapping[str, Any]) -> str:
    if len(questions) == 1:
        return next(iter(questions))
    raise LabelError(f"--label {flag!r}: the questions are {', '.join(map(repr, questions))}; name the one this "
                     f"column labels: --label QUESTION_ID={flag}")


def labelled_records(line: Mapping[str, Any]) -> list[Record]:
    """The calibration records of one answer-log line: one per labelled question it answered (none for an error)."""
    labels, answers = line.get("labels") or {}, line.get("answers") or {}
    records = []
    for qid, label in labels.items():
        raw = answers.get(qid)
        if not isinstance(raw, Mapping) or raw.get("type") not in _ANSWERS:
            continue
        answer = _ANSWERS[raw["type"]].model_validate(dict(raw))
        records.append(Record.from_answer(answer, label, qid))
    return records


def log_records(rows: Sequence[Mapping[str, Any]], path: Path) -> tuple[list[Record], str | None]:
    """The labelled answers of ``jev decide``'s lines (``{"id", "answers", "error", "usage", "labels"}``), and the
    model whose shipped calibration they were answered through (the lines' ``"shipped_calibration"``), or None."""
    models = {row.get("shipped_calibration") for row in rows if row.get("labels") and row.get("answers")}
    if len(models) > 1:
        named = ", ".join(sorted(repr(m) if m else "none" for m in models))
        raise ValueError(f"{path}: lines answered through different calibrations (shipped for {named}); calibrate "
                         "each model's lines apart")
    model = next(iter(models), None)
    if model is not None and not isinstance(model, str):
        raise ValueError(f"{path}: shipped_calibration must be a model's name, got {model!r}"[:200])
    records = []
    for row in rows:
        try:
            records += labelled_records(row)
        except ValueError as exc:  # a label its recorded answer does not have (the questions changed since)
            raise ValueError(f"{path}: the line of id {row.get('id')!r}: {exc}") from None
    if not records:
        failed = sum(1 for row in rows if row.get("error"))
        raise ValueError(f"{path}: {len(rows)} lines from jev decide ({failed} failed), none with an answer and a "
                         "label; decide the input again into a new --output with --label COLUMN (its true answers)")
    return records, model
