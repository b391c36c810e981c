"""Labels: how a token counts for an option, by letter, name, digit or yes/no, and which style a question gets.

A *fold* maps one token of the window onto a label (or None, or AMBIGUOUS when the token starts
several option names); :func:`style_for` picks the answer format and fold for a question's label
style, falling back to letters where option names share a first word.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import LabelReadoutError
from .prompt import LABEL, AnswerFormat
from .questions import Prepared

_OPEN = "([{\"'*"
_CLOSE = ".):]}\"',*"


class AmbiguousNamesError(LabelReadoutError):
    """Option names whose first tokens collide: read with letters instead."""


def fold_label(token: str, labels: frozenset[str]) -> str | None:
    """" B", "b", "B.", "(B)" → "B"; ASCII only, so "ı" is never "I"; anything else → None."""
    t = token.strip().lstrip(_OPEN).rstrip(_CLOSE).strip()
    if not t or not t.isascii():
        return None
    t = t.upper()
    return t if t in labels else None


#: A token that starts more than one option name: it tells nothing apart.
AMBIGUOUS = "\x00ambiguous"
YES_WORDS = frozenset({"y", "yes", "yeah", "yep"})
NO_WORDS = frozenset({"n", "no", "nope", "nah"})
_ALPHA_RUN = re.compile(r"[A-Za-z]+")

Fold = Callable[[str], str | None]


def letter_fold(labels: Sequence[str]) -> Fold:
    label_set = frozenset(labels)
    return lambda token: fold_label(token, label_set)


def digit_fold(n: int) -> Fold:
    """Score levels as digits: an exact single digit only, so "10" or "1." cannot blur a level."""
    digits = frozenset(str(i) for i in range(n))
    return lambda token: token.strip() if token.strip() in digits else None


def yes_no_fold(token: str) -> str | None:
    """Noul as words: the first alphabetic run, lowercased: yes/yeah/yep/y → "yes", no/nope/nah/n → "no"."""
    run = _ALPHA_RUN.search(token)
    word = run.group(0).lower() if run else ""
    return "yes" if word in YES_WORDS else "no" if word in NO_WORDS else None


def name_fold(names: Sequence[str]) -> Fold:
    """A token counts for an option name when it starts that name (case-insensitive, spaces and
    punctuation stripped); a token that starts several names is AMBIGUOUS."""
    lowered = [n.lower() for n in names]

    def fold(token: str) -> str | None:
        t = token.strip().lstrip(_OPEN).rstrip(_CLOSE).strip().lower()
        if not t:
            return None
        hits = [n for n, low in zip(names, lowered) if low.startswith(t)]
        if len(hits) > 1:
            return AMBIGUOUS
        return hits[0] if hits else None

    return fold


def names_collide(names: Sequence[str]) -> bool:
    """Names a first token may not tell apart: one a prefix of another, or the same first word."""
    lowered = [n.strip().lower() for n in names]
    words = [re.split(r"[\s_\-/]+", n)[0] for n in lowered]
    if len(set(words)) < len(words):
        return True
    return any(a != b and b.startswith(a) for a in lowered for b in lowered)


@dataclass(frozen=True)
class LabelStyle:
    """What a token readout asks for and reads: the answer format, its fold, and why it is what it is."""

    fmt: AnswerFormat
    fold: Fold | None
    #: Letters standing in for names are a fallback: missing labels are floored, never read as 0.
    floor: bool
    note: str | None = None


def named_format(prep: Prepared) -> tuple[AnswerFormat, Fold]:
    """Answer with the option's own name: keys for choice, digits for score, yes/no for noul."""
    if prep.kind == "choice":
        return AnswerFormat(symbols=prep.keys), name_fold(prep.keys)
    if prep.kind == "score":
        return AnswerFormat(symbols=prep.keys), digit_fold(len(prep.keys))
    return AnswerFormat(symbols=("yes", "no")), yes_no_fold


def style_for(prep: Prepared, labels: str) -> LabelStyle:
    """Names where they tell the options apart by their first token, letters otherwise."""
    if labels != "names":
        return LabelStyle(LABEL, None, floor=False)
    if prep.kind == "choice" and names_collide(prep.keys):
        return LabelStyle(LABEL, None, floor=True, note="option names may share a first token; read with letters")
    fmt, fold = named_format(prep)
    return LabelStyle(fmt, fold, floor=True)


#: The style a question falls back to when the window's best token starts several names.
LETTERS_FALLBACK = LabelStyle(LABEL, None, floor=True)
