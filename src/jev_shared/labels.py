"""Labels: how a token counts for an option, by letter, name, digit or yes/no, and which style a question gets.

A *fold* maps one token of the window onto a label (or None, or AMBIGUOUS when the token starts
several option names); :func:`style_for` picks the answer format and fold for a question's label
style. Option names that share a first word are answered by short *aliases* made of what differs
between them (``order_status`` / ``order_cancel`` → ``status`` / ``cancel``); a prefix that is still
shared is read by a continuation call (:mod:`flows`). Letters are the last resort.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import LabelReadoutError
from .prompt import LABEL, AnswerFormat
from .questions import MAX_SINGLE_TOKEN_LABELS, Prepared

_OPEN = "([{\"'*"
_CLOSE = ".):]}\"',*"


class AmbiguousNamesError(LabelReadoutError):
    """The window's best token starts several option names: continue from it, or read with letters.

    Carries what the window said: the token, its logprob, and the best logprob of each name it did
    tell apart (``best``), with every logprob returned (``returned``, for the floor) and every token that
    starts several names (``shared``, token → its best logprob; ``shared_ids``, token → its id or None)."""

    def __init__(self, message: str, *, token: str = "", logprob: float = 0.0,
                 best: dict[str, float] | None = None, returned: list[float] | None = None,
                 shared: dict[str, float] | None = None, token_id: int | None = None,
                 shared_ids: dict[str, int | None] | None = None) -> None:
        super().__init__(message)
        self.token, self.logprob, self.token_id = token, logprob, token_id
        self.best, self.returned = dict(best or {}), list(returned or [])
        self.shared = dict(shared or {})
        self.shared_ids = dict(shared_ids or {})


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


#: The most tokens one fold remembers (a model's vocabulary bounds them; this bounds the memory).
_MEMO_SIZE = 4096
_MISS = object()


def _memoized(fold: Fold) -> Fold:
    """``fold`` remembering its answer per token: a window's tokens recur from reply to reply, and a fold is a
    pure function of the token (folds are built once per label set, below)."""
    memo: dict[str, str | None] = {}

    def folded(token: str) -> str | None:
        label = memo.get(token, _MISS)
        if label is _MISS:
            label = fold(token)
            if len(memo) < _MEMO_SIZE:
                memo[token] = label
        return label  # type: ignore[return-value]

    return folded


def letter_fold(labels: Sequence[str]) -> Fold:
    return _letter_fold(tuple(labels))


@functools.lru_cache(maxsize=256)
def _letter_fold(labels: tuple[str, ...]) -> Fold:
    label_set = frozenset(labels)
    return _memoized(lambda token: fold_label(token, label_set))


@functools.lru_cache(maxsize=16)
def digit_fold(n: int) -> Fold:
    """Score levels as digits: an exact single digit only, so "10" or "1." cannot blur a level."""
    digits = frozenset(str(i) for i in range(n))
    return _memoized(lambda token: token.strip() if token.strip() in digits else None)


def yes_no_fold(token: str) -> str | None:
    """Noul as words: the first alphabetic run, lowercased: yes/yeah/yep/y → "yes", no/nope/nah/n → "no"."""
    run = _ALPHA_RUN.search(token)
    word = run.group(0).lower() if run else ""
    return "yes" if word in YES_WORDS else "no" if word in NO_WORDS else None


def norm_token(token: str) -> str:
    """A token as a name fold compares it: stripped of spaces and surrounding punctuation, lowercased."""
    return token.strip().lstrip(_OPEN).rstrip(_CLOSE).strip().lower()


def names_starting(prefix: str, names: Sequence[str]) -> list[str]:
    """The names that ``prefix`` (a token, or tokens joined) could be the start of."""
    t = norm_token(prefix)
    return [n for n in names if t and n.lower().startswith(t)]


_WORD_SPLIT = re.compile(r"[\s_\-/.:]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(name: str) -> list[str]:
    return [w for w in _WORD_SPLIT.split(_CAMEL.sub(" ", name.strip())) if w] or [name.strip()]


def words_of(name: str) -> list[str]:
    """A name's words: split at spaces, ``_ - / . :`` and camelCase humps."""
    return _words(name)


def _described(aliases: tuple[str, ...], descriptions: Sequence[str]) -> tuple[str, ...]:
    """Numbered names (``choice_1`` …) say nothing: answer with each description's first word of its
    own (3+ letters, shared with no other description's first words), where every one has one."""
    words = [[w.lower() for w in re.findall(r"[A-Za-z]{3,}", d)[:6]] for d in descriptions]
    out = []
    for i, ws in enumerate(words):
        others = {w for j, o in enumerate(words) if j != i for w in o[:1]}
        pick = next((w for w in ws if w not in others and w not in out), None)
        if pick is None:
            return aliases
        out.append(pick)
    return tuple(out) if not names_collide(out) else aliases


def aliases_for(names: Sequence[str], descriptions: Sequence[str] = ()) -> tuple[str, ...]:
    """Short, distinct answer words for names that share a first word: what differs between them.

    Words every name shares at the front or back go (``sql_docs`` / ``sql_api`` → ``docs`` / ``api``,
    ``choice_1`` … → ``1`` …); then, within each group that still shares a first word, that word goes
    where a member has more. Names that need none of this, or whose aliases would not be unique or
    would start one another, are returned as they are (a shared prefix is read by a continuation call).
    Worked out once per option set (a question's options do not change between calls).
    """
    return _aliases_for(tuple(names), tuple(descriptions))


@functools.lru_cache(maxsize=1024)
def _aliases_for(names: tuple[str, ...], descriptions: tuple[str, ...]) -> tuple[str, ...]:
    if not names_collide(names):
        return tuple(names)
    words = [_words(n) for n in names]
    for end in (0, -1):  # a shared first word, then a shared last word
        while all(len(w) > 1 for w in words) and len({w[end].lower() for w in words}) == 1:
            words = [w[1:] if end == 0 else w[:-1] for w in words]
    for _ in range(4):
        firsts = [w[0].lower() for w in words]
        dup = {f for f in firsts if firsts.count(f) > 1}
        if not dup or not any(w[0].lower() in dup and len(w) > 1 for w in words):
            break
        words = [w[1:] if w[0].lower() in dup and len(w) > 1 else w for w in words]
    # a name that kept every word stays as written (``GetWeather``, not ``Get_Weather``)
    aliases = tuple(n if w == _words(n) else "_".join(w) for n, w in zip(names, words))
    if len({a.lower() for a in aliases}) < len(aliases) or _starts_another(aliases, names):
        return tuple(names)
    if all(a.isdigit() for a in aliases) and len(descriptions) == len(aliases) and all(descriptions):
        return _described(aliases, descriptions)
    return aliases


def _starts_another(aliases: Sequence[str], names: Sequence[str]) -> bool:
    """An alias now starts another whose name it did not start: what went was what told them apart
    (``FindRestaurants`` / ``ReserveRestaurant`` → ``Restaurants`` / ``Restaurant``)."""
    low, named = [a.lower() for a in aliases], [n.lower() for n in names]
    return any(i != j and low[j].startswith(low[i]) and not named[j].startswith(named[i])
               for i in range(len(low)) for j in range(len(low)))


def _first_tokens_differ(words: Sequence[str], first_token: Callable[[str], object]) -> bool:
    firsts = [first_token(w) for w in words]
    return len(set(firsts)) == len(firsts)


def token_checked_aliases(keys: Sequence[str], descriptions: Sequence[str],
                          first_token: Callable[[str], object]) -> tuple[str, ...] | None:
    """The answer words the server's tokenizer tells apart at the first token, where the names' own
    (or their aliases) do not: each description's own first word (``shipping`` / ``shipment`` both
    start with ``ship``; ``delivery`` / ``returns`` do not), which keeps the read to one call. None
    when the aliases are already told apart, or nothing better is (a continuation reads the prefix)."""
    aliases = aliases_for(keys, descriptions)
    if _first_tokens_differ(aliases, first_token):
        return None
    if len(descriptions) != len(aliases) or not all(descriptions):
        return None
    described = _described(aliases, descriptions)
    return described if described != aliases and _first_tokens_differ(described, first_token) else None


def name_fold(names: Sequence[str]) -> Fold:
    """A token counts for an option name when it starts that name (case-insensitive, spaces and
    punctuation stripped); a token that starts several names is AMBIGUOUS."""
    return _name_fold(tuple(names))


@functools.lru_cache(maxsize=256)
def _name_fold(names: tuple[str, ...]) -> Fold:
    lowered = [n.lower() for n in names]

    def fold(token: str) -> str | None:
        t = token.strip().lstrip(_OPEN).rstrip(_CLOSE).strip().lower()
        if not t:
            return None
        hits = [n for n, low in zip(names, lowered) if low.startswith(t)]
        if len(hits) > 1:
            return AMBIGUOUS
        return hits[0] if hits else None

    return _memoized(fold)


def names_collide(names: Sequence[str]) -> bool:
    """Names a first token may not tell apart: one a prefix of another, or the same first word."""
    lowered = [n.strip().lower() for n in names]
    words = [_words(n)[0].lower() for n in names]  # camelCase too: orderStatus / orderCancel share "order"
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
    #: A fallback read (letters standing in for names) never claims more than FALLBACK_TRUST.
    fallback: bool = False
    #: Answered by name (a choice, or a score by its level names): a shared prefix may be read on by a
    #: continuation call.
    named_choice: bool = False


#: The most a fallback read is trusted: its distribution is mixed with uniform by 1 − this, so its
#: peak confidence stays at or below it (its top probability at or below it + (1 − it)/n), whatever
#: the window said.
FALLBACK_TRUST = 0.95


#: A score with this many levels is answered by its level names, any other by digits (on the
#: 1.5B, 3-level scores read 39 and 35 of 60 by names against 25 and 22 by digits; 5-level ones lose by names).
NAMED_SCORE_LEVELS = 3
#: A level name is a name, not a sentence: longer descriptions keep the digits.
MAX_LEVEL_NAME_WORDS = 3
MAX_LEVEL_NAME_CHARS = 32


def level_names(prep: Prepared) -> tuple[str, ...] | None:
    """The words a score is answered with instead of digits, or None (digits).

    Only a score of exactly three levels, whose names (the criteria dict's keys, else the level descriptions;
    short aliases where they share a first word) are words a first token tells apart: distinct, not one the
    start of another, each with a letter, at most three words and 32 characters."""
    if prep.kind != "score" or len(prep.keys) != NAMED_SCORE_LEVELS:
        return None
    criteria = prep.question.criteria
    names = tuple(k.strip() for k in criteria) if isinstance(criteria, dict) else tuple(d.strip() for d in prep.descriptions)
    if not all(names):
        return None
    words = aliases_for(names)
    if names_collide(words) or len({w.lower() for w in words}) < len(words):
        return None
    if any(not re.search("[A-Za-z]", w) or len(w) > MAX_LEVEL_NAME_CHARS or len(_words(w)) > MAX_LEVEL_NAME_WORDS
           for w in words):
        return None
    return words


def named_format(prep: Prepared) -> tuple[AnswerFormat, Fold]:
    """Answer with the option's own name (or its alias): keys for choice, level names for a 3-level score
    (:func:`level_names`), digits for any other score, yes/no for noul."""
    if prep.kind == "choice":
        aliases = prep.aliases or aliases_for(prep.keys, prep.descriptions)
        return AnswerFormat(symbols=aliases), name_fold(aliases)
    if prep.kind == "score":
        names = level_names(prep)
        if names is not None:
            return AnswerFormat(symbols=names), name_fold(names)
        return AnswerFormat(symbols=prep.keys), digit_fold(len(prep.keys))
    return AnswerFormat(symbols=("yes", "no")), yes_no_fold


def style_for(prep: Prepared, labels: str) -> LabelStyle:
    """Names (or aliases where names share a first word); letters only when asked for. The names' style is a
    function of the prepared question alone: worked out once per :class:`Prepared` (kept between calls by
    ``questions.prepare_question``) and kept on it."""
    if labels != "names":
        return LETTERS
    style: LabelStyle | None = prep.__dict__.get("_names_style")
    if style is None:
        style = prep.__dict__["_names_style"] = _names_style(prep)  # frozen fields; a derived value beside them
    return style


def _names_style(prep: Prepared) -> LabelStyle:
    fmt, fold = named_format(prep)
    note = None
    if prep.kind == "choice" and fmt.symbols != prep.keys:
        why = "share a first token in the server's tokenizer" if prep.aliases else "share a first word"
        note = f"option names {why}; answered as " + ", ".join(
            f"{a}={k}" for a, k in zip(fmt.symbols or (), prep.keys) if a != k)
    by_name = prep.kind == "choice" or (prep.kind == "score" and fmt.symbols != prep.keys)
    return LabelStyle(fmt, fold, floor=True, note=note, named_choice=by_name)


def answer_words(prep: Prepared, labels: str) -> tuple[str, ...]:
    """Every word a token readout of ``prep`` may answer with: its style's symbols, and the letters it
    falls back to (at most 26 options)."""
    fmt = style_for(prep, labels).fmt
    words = fmt.symbols if fmt.symbols is not None else prep.labels
    return tuple(dict.fromkeys((*words, *prep.labels))) if len(prep.keys) <= MAX_SINGLE_TOKEN_LABELS else words


#: Letters, asked for (one frozen value: every letters question reads the same way).
LETTERS = LabelStyle(LABEL, None, floor=False)
#: The style a question falls back to when a shared prefix cannot be read on (no continuation).
LETTERS_FALLBACK = LabelStyle(LABEL, None, floor=True, fallback=True)
