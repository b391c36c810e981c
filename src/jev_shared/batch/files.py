"""Batch files: states in (JSONL or CSV), answers out (JSONL, resumable), and a cost preview.

The answer log is what makes a run resumable: one JSON line per finished item, appended, flushed
and fsynced before the next is written, so a killed run loses at most the items that were in
flight. A run killed mid-write leaves a torn last line; opening the log cuts it off (that item is
decided again) and never reads it as an answer.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from jev_shared.errors import InvalidQuestionError
from jev_shared.files import open_regular, read_text

from .labels import Labeler
from .run import Item, ItemResult

#: Characters per token for the dry-run estimate (English text, BPE tokenisers), and tokens a chat
#: template adds around each message.
CHARS_PER_TOKEN = 4.0
TOKENS_PER_MESSAGE = 6


#: The longest line read from an input file or the answer log; past it, the file is refused (a
#: line-less file such as /dev/zero would otherwise be read into memory whole).
MAX_LINE_BYTES = 8 * 1024 * 1024
#: Where an answer log cannot live: pseudo-file systems whose files are not logs.
NOT_LOG_ROOTS = ("/proc", "/sys")


class InputError(ValueError):
    """The input file cannot be read as states: names the file, the line or row, and what is wrong."""


class OutputError(InputError):
    """``--output`` (or the review file) cannot be an answer log: names the path and why."""


def check_output(path: str | os.PathLike[str]) -> Path:
    """Refuse, before anything is sent, a log path that is not (and cannot become) a regular file."""
    p = Path(path)
    real = os.path.realpath(p)
    root = next((r for r in NOT_LOG_ROOTS if real == r or real.startswith(r + "/")), None)
    if root is not None:
        raise OutputError(f"{p}: under {root}, which holds no regular files; --output must be a file (the answer log)")
    if p.exists() and not p.is_file():
        kind = "a directory" if p.is_dir() else "not a regular file"
        raise OutputError(f"{p}: is {kind}; --output must be a file (the answer log)")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{p}: {parent} is a file, not a directory")
    if not os.access(p if p.exists() else parent, os.W_OK):
        raise OutputError(f"{p}: not writable")
    return p


def _lines(p: Path, f: IO[bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text) for each line of ``f``: UTF-8, at most MAX_LINE_BYTES, else InputError at file:line."""
    for n in itertools.count(1):
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            raise InputError(f"{p}:{n}: a line longer than {MAX_LINE_BYTES} bytes")
        try:
            yield n, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{p}:{n}: not UTF-8 (byte {exc.object[exc.start]:#04x} at column {exc.start + 1})") from None


def id_key(value: Any) -> str:
    """The id as the log and the skip-set compare it: ``1`` and ``"1"`` are the same item."""
    return value if isinstance(value, str) else json.dumps(value)


def read_items(path: str | os.PathLike[str], *, column: str | None = None, id_column: str = "id",
               labels: Labeler | None = None) -> list[Item]:
    """States from ``.jsonl`` or ``.csv``: the state in ``column`` (default ``state``, else ``text``), the id in
    ``id_column`` (without it: the row's number, from 1 in a CSV, the line's in a JSONL file), and with
    ``labels`` each row's labels, checked against their questions (:mod:`.labels`).

    Ids must be unique: a duplicate would be decided once and answered twice.
    """
    p = Path(path)
    if p.suffix.lower() == ".csv":
        items = _read_csv(p, column, id_column, labels)
    elif p.suffix.lower() in (".jsonl", ".ndjson"):
        items = _read_jsonl(p, column, id_column, labels)
    else:
        raise InputError(f"{p}: expected a .jsonl or .csv file")
    seen: dict[str, int] = {}
    for n, item in enumerate(items, start=1):
        if id_key(item.id) in seen:
            raise InputError(f"{p}: id {item.id!r} at item {n} repeats item {seen[id_key(item.id)]}; ids must be unique")
        seen[id_key(item.id)] = n
    if labels is not None and not any(item.labels for item in items):
        names = ", ".join(repr(c.column) for c in labels.columns)
        raise InputError(f"{p}: no row has a label in {names}; --label names the column of the true answers")
    return items


def _open_input(p: Path) -> IO[bytes]:
    """The input file, a regular one (a FIFO, /dev/zero, a folder: InputError, never a hang)."""
    try:
        return os.fdopen(open_regular(p), "rb")
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as exc:
        raise InputError(str(exc)) from None


def _jsonl_item(where: str, row: Any, n: int, column: str | None, id_column: str, labels: Labeler | None) -> Item:
    """One JSONL line's item: its state (``column``, else ``state``, else ``text``), its id (else ``n``), its labels."""
    if not isinstance(row, dict):
        raise InputError(f"{where}: expected a JSON object ({{\"id\": ..., \"state\": ...}})")
    key = column or next((c for c in ("state", "text") if c in row), None)
    if key is None or key not in row:
        wanted = f"a {column!r} key (--column)" if column else "\"state\" (or \"text\"; or pick a key with --column)"
        raise InputError(f"{where}: expected {wanted}, got keys {list(row)}")
    ident = row.get(id_column, n)
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        raise InputError(f"{where}: the id must be a string or an integer, got {ident!r}")
    return Item(ident, row[key], labels.read(row, where) if labels else None)


def _read_jsonl(p: Path, column: str | None, id_column: str, labels: Labeler | None) -> list[Item]:
    items = []
    with _open_input(p) as f:
        for n, line in _lines(p, f):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{p}:{n}: not JSON ({exc})") from None
            items.append(_jsonl_item(f"{p}:{n}", row, n, column, id_column, labels))
    return items


def _read_csv(p: Path, column: str | None, id_column: str, labels: Labeler | None) -> list[Item]:
    with _open_input(p) as f:
        text = "".join(line for _, line in _lines(p, f))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = reader.fieldnames or []
        column = column or next((c for c in ("state", "text") if c in fields), None)
        if column is None or column not in fields:
            raise InputError(f"{p}: no column {column or 'state'!r}; pick one with --column (columns: {fields})")
        missing = labels.missing_columns(fields) if labels else []
        if missing:
            raise InputError(f"{p}: no column {missing[0]!r} for --label (columns: {fields})")
        has_id = id_column in fields
        return [Item(row[id_column] if has_id else n, row[column],
                     labels.read(row, f"{p}: row {n} (line {reader.line_num})") if labels else None)
                for n, row in enumerate(reader, start=1)]
    except csv.Error as exc:
        raise InputError(f"{p}:{reader.line_num}: not CSV ({exc})") from None


def read_log(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The answer log, the last complete line per id (a rerun with ``--retry-failed`` appends a newer one)."""
    records: dict[str, dict[str, Any]] = {}
    p = Path(path)
    if not p.exists():
        return records
    check_output(p)
    with p.open("rb") as f:
        for n in itertools.count(1):
            raw = f.readline(MAX_LINE_BYTES + 1)
            if len(raw) > MAX_LINE_BYTES:
                raise OutputError(f"{p}:{n}: a line longer than {MAX_LINE_BYTES} bytes: not an answer log")
            if not raw.endswith(b"\n"):
                break  # the end, or a torn tail: the item was in flight when the run died
            try:
                rec = json.loads(raw)
            except ValueError:  # not JSON, or not UTF-8: not a line this log wrote
                continue
            if isinstance(rec, dict) and "id" in rec:
                records[id_key(rec["id"])] = rec
    return records


def repair_tail(path: Path) -> int:
    """Cut a torn last line (no newline) off the log; the bytes removed (0 when it ends cleanly)."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as f:
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            return 0
        block, end = 65536, size
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            chunk = f.read(end - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                f.truncate(start + cut + 1)
                return size - (start + cut + 1)
            end = start
        f.truncate(0)
        return size


class AnswerLog:
    """``with AnswerLog(path) as log: log.write(result)``: each line durable before the next is written."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._f: IO[str] | None = None
        self._failed = False

    def __enter__(self) -> AnswerLog:
        check_output(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.path)
        self._f = self.path.open("a", encoding="utf-8")
        return self

    def write(self, result: ItemResult) -> None:
        """Append one line, durable before this returns; an OSError (a full disk) is the caller's to report."""
        assert self._f is not None, "use AnswerLog as a context manager"
        try:
            self._f.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
            self._f.flush()
            if self.fsync:
                os.fsync(self._f.fileno())
        except OSError:
            self._failed = True
            raise

    def __exit__(self, *exc: object) -> None:
        if self._f is not None:
            try:
                self._f.close()
            except OSError:
                if not self._failed:  # after a failed write the unflushed rest is a torn tail, cut next run
                    raise
            self._f = None


def to_decide(items: Iterable[Item], done: Mapping[str, dict[str, Any]], *, retry_failed: bool = False) -> list[Item]:
    """The items a run still has to decide: those without a line in the log (or whose line is an error)."""
    def finished(item: Item) -> bool:
        rec = done.get(id_key(item.id))
        return rec is not None and not (retry_failed and rec.get("error"))

    return [item for item in items if not finished(item)]


def estimate(client: Any, items: Iterable[Item], questions: Mapping[str, Any], **options: Any) -> dict[str, int]:
    """Requests and tokens a run would spend, without sending any: the engine's own requests, previewed.

    ``client.preview`` gives the first request each question would send (one a question an item: the
    one-token readout); its input tokens where the server counts them, else the messages' characters
    / 4 plus a few per message; output tokens one per request.
    """
    n_items = requests = counted = chars = messages = 0
    for item in items:
        n_items += 1
        for call in client.preview(item.state, questions, **options):
            requests += 1
            msgs = [m for m in call["request"].get("messages") or call["request"].get("input") or []
                    if isinstance(m, dict) and isinstance(m.get("content"), str)]
            if call.get("input_tokens") is not None:
                counted += call["input_tokens"] + TOKENS_PER_MESSAGE * len(msgs)
                continue
            chars += sum(len(m["content"]) for m in msgs)
            messages += len(msgs)
    tokens = counted + int(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * messages
    return {"items": n_items, "requests": requests, "input_tokens": tokens, "output_tokens": requests}


def load_questions(value: str) -> dict[str, Any]:
    """``questions.json`` (the System One wire's ``questions`` object), or the JSON itself (a file: a regular
    one, at most ``jev_shared.files.MAX_READ_BYTES``; else ``FileReadError``, an OSError)."""
    text = value if value.lstrip().startswith("{") else read_text(value)
    questions = json.loads(text)
    if not isinstance(questions, dict):
        raise InvalidQuestionError("questions must be a JSON object of id -> question", field="questions")
    return questions
