"""More public held-out sets: loaders that ``build.py`` merges into its ``SETS``.

Why: the first nine sets had been tuned on; these were not (shared-prefix CamelCase and ALL-CAPS
intent names, 40+ options, yes/no and score questions of other genres). Each loader returns the
source's (test rows, training rows) as ``(text, label)``; ``build.py`` draws the 60 scored items, the
examples and the extra items from them exactly as it does for the nine. Sources, commits and
licences: README.md beside this file.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

Rows = list[tuple[str, str]]  # (text, label)
#: Texts longer than this are cut at a word boundary (and end with "…"); README.md says which sets.
MAX_CHARS = 400


def git_dir(mirror: Path, repo: str) -> Path:
    """The mirrored repository's git directory: ``owner+name/repo`` (bare) or ``owner+name/repo/.git``."""
    base = mirror / repo.replace("/", "+") / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


def show_bytes(mirror: Path, repo: str, path: str) -> bytes:
    """One file at the mirror's HEAD, as bytes."""
    return subprocess.run(["git", "--git-dir", str(git_dir(mirror, repo)), "show", f"HEAD:{path}"], check=True,
                          capture_output=True).stdout


def show(mirror: Path, repo: str, path: str) -> str:
    """One file's text: UTF-8, or Latin-1 where the file is not UTF-8 (SUBJ's subjective half)."""
    raw = show_bytes(mirror, repo, path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def short(text: str) -> str:
    """The text as in the source, whitespace runs kept; a very long one cut near ``MAX_CHARS``."""
    text = text.strip()
    if len(text) <= MAX_CHARS:
        return text
    return text[:MAX_CHARS].rsplit(" ", 1)[0] + " …"


def in_words(name: str) -> str:
    """The name in plain words, as a new user describes an option: ``GetTimesForMovie`` → "get times for
    movie", ``100_NIGHT_TRIAL_OFFER`` → "100 night trial offer" (the nine sets keep build.words)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return re.sub(r"[_\s]+", " ", spaced).strip().lower()


def unique(rows: Rows) -> Rows:
    """Each text once; a text the source labels two ways is dropped (no right answer to score)."""
    labels: dict[str, set[str]] = {}
    for text, label in rows:
        labels.setdefault(text, set()).add(label)
    seen: set[str] = set()
    out: Rows = []
    for text, label in rows:
        if len(labels[text]) == 1 and text not in seen:
            seen.add(text)
            out.append((text, label))
    return out


# --- Schema-Guided Dialogue: the user turn that starts a new intent -------------------------------

SGD = "google-research-datasets/dstc8-schema-guided-dialogue"
#: Dialogue files whose blobs the stored mirror (at e852981) lacks: left out, so that a full clone
#: rebuilds the same items.
SGD_ABSENT = {
    "test": {12, 16, 19, 22, 23, 26, 27, 28, 29, 31},
    "train": {37, 52, 53, 54, 55, 56, 58, 60, 66, 68, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84,
              85, 93, 94, 104, 117, 118},
}


def sgd_files(mirror: Path, split: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(git_dir(mirror, SGD)), "ls-tree", "--name-only", "HEAD",
                          f"{split}/"], check=True, capture_output=True, text=True).stdout.split()
    return [f for f in out if "dialogues_" in f and int(f.split("_")[-1].split(".")[0]) not in SGD_ABSENT[split]]


def sgd_rows(mirror: Path, split: str) -> Rows:
    """Each user turn where one frame's ``state.active_intent`` becomes a new intent (the turn that asks
    for it), labelled with that intent. A turn later in a dialogue carries the system's turn before it
    ("Assistant: …\\nUser: …"): "Yes, book it" means nothing alone."""
    out: Rows = []
    for f in sgd_files(mirror, split):
        for dialogue in json.loads(show(mirror, SGD, f)):
            active: dict[str, str] = {}
            before = ""
            for turn in dialogue["turns"]:
                if turn["speaker"] != "USER":
                    before = turn["utterance"]
                    continue
                new = []
                for frame in turn["frames"]:
                    intent = frame["state"]["active_intent"]
                    if intent != "NONE" and intent != active.get(frame["service"]):
                        new.append(intent)
                    active[frame["service"]] = intent
                if len(new) == 1:
                    text = f"Assistant: {before}\nUser: {turn['utterance']}" if before else f"User: {turn['utterance']}"
                    out.append((text, new[0]))
    return unique(out)


def sgd(mirror: Path) -> tuple[Rows, Rows]:
    """The test split's 34 intents are the options; examples from the training split, and for the 9 intents
    the training split does not have (other services there), from test rows not scored."""
    test, train = sgd_rows(mirror, "test"), sgd_rows(mirror, "train")
    intents = {lab for _, lab in test}
    have = {lab for _, lab in train}
    return test, [r for r in train if r[1] in intents] + [r for r in test if r[1] not in have]


# --- HINT3 (Haptik): three customer-support bots, ALL-CAPS intent names ------------------------------

HINT3 = "hellohaptik/HINT3"


def hint3(bot: str) -> Callable[[Path], tuple[Rows, Rows]]:
    """v2's test and train files; the out-of-scope label NO_NODES_DETECTED dropped (no option for it)."""
    def load(mirror: Path) -> tuple[Rows, Rows]:
        def read(split: str) -> Rows:
            text = show(mirror, HINT3, f"dataset/v2/{split}/{bot}_{split}.csv")
            return unique([(short(r["sentence"]), r["label"]) for r in csv.DictReader(io.StringIO(text))
                           if r["label"] != "NO_NODES_DETECTED" and r["sentence"].strip()])

        return read("test"), read("train")

    return load


# --- Clickbait headlines (Chakraborty et al. 2016) -----------------------------------------------------


def clickbait(mirror: Path) -> tuple[Rows, Rows]:
    """One headline a line in each gzipped file; no split: examples come from the rows not scored."""
    def read(name: str) -> list[str]:
        raw = gzip.decompress(show_bytes(mirror, "bhargaviparanjape/clickbait", f"dataset/{name}.gz"))
        return [line.strip() for line in raw.decode("utf-8", errors="replace").splitlines() if line.strip()]

    rows = unique([(t, "clickbait") for t in read("clickbait_data")] + [(t, "news") for t in read("non_clickbait_data")])
    return rows, rows


# --- Financial PhraseBank (Malo et al. 2014), the sentences 75% of annotators agree on ----------------

FPB = "Hugoverissimo21/finphrasebank-sentiment"
FPB_LEVELS = {"negative": "0", "neutral": "1", "positive": "2"}


def finphrasebank(mirror: Path) -> tuple[Rows, Rows]:
    """That repository's own test/train split of ``Sentences_75Agree``."""
    def read(split: str) -> Rows:
        text = show(mirror, FPB, f"data/75Agree_{split}.csv")
        return unique([(short(r["sentence"]), r["label"]) for r in csv.DictReader(io.StringIO(text))])

    return read("test"), read("train")


# --- SUBJ (Pang and Lee 2004) and CR (Hu and Liu 2004), as harvardnlp/sent-conv-torch stores them -------

SENT_CONV = "harvardnlp/sent-conv-torch"


def sent_conv(files: dict[str, str]) -> Callable[[Path], tuple[Rows, Rows]]:
    """One sentence a line per label's file (``data/raw/``, tokenised as there); no split (the sets are
    cross-validated): examples come from the rows not scored."""
    def load(mirror: Path) -> tuple[Rows, Rows]:
        rows = unique([(short(line), label) for label, name in files.items()
                       for line in show(mirror, SENT_CONV, f"data/raw/{name}").splitlines() if line.strip()])
        return rows, rows

    return load


# --- CommitmentBank (de Marneffe et al. 2019), as in SuperGLUE -------------------------------------------


def cb(mirror: Path) -> tuple[Rows, Rows]:
    """The validation split is scored (the test split has no labels): 56 items, none left for extra/."""
    def read(split: str) -> Rows:
        text = show(mirror, "tonyzhaozh/few-shot-learning", f"data/cb/{split}.jsonl")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [(f"Premise: {r['premise']}\nHypothesis: {r['hypothesis']}", r["label"]) for r in rows]

    return read("val"), read("train")


# --- SICK relatedness (Marelli et al. 2014, SemEval-2014 task 1) ------------------------------------------


def sick(mirror: Path) -> tuple[Rows, Rows]:
    """Each pair's mean relatedness (1-5, continuous) rounded half up to a level 1-5 (the set's levels)."""
    def read(name: str) -> Rows:
        text = show(mirror, "brmson/dataset-sts", f"data/sts/sick2014/{name}.txt")
        return unique([(f"Sentence A: {r['sentence_A']}\nSentence B: {r['sentence_B']}",
                        str(int(float(r["relatedness_score"]) + 0.5)))
                       for r in csv.DictReader(io.StringIO(text), delimiter="\t")])

    return read("SICK_test_annotated"), read("SICK_train")


#: name → (kind, instructions, loader, label map), as build.SETS.
MORE: dict[str, tuple[str, str, Callable[[Path], tuple[Rows, Rows]], dict[str, str] | None]] = {
    "sgd": ("choice", "What is the intent of the user's last message to the virtual assistant?", sgd, None),
    "sofmattress": ("choice", "What is the intent of this message to a mattress shop's support chat?",
                    hint3("sofmattress"), None),
    "powerplay11": ("choice", "What is the intent of this message to a fantasy-cricket app's support chat?",
                    hint3("powerplay11"), None),
    "curekart": ("choice", "What is the intent of this message to a health-products shop's support chat?",
                 hint3("curekart"), None),
    "clickbait": ("noul", "The headline is clickbait.", clickbait, {"clickbait": "true", "news": "false"}),
    "finphrasebank": ("score", "How positive is this sentence from financial news?", finphrasebank, FPB_LEVELS),
    "subj": ("noul", "The sentence is subjective.", sent_conv({"subjective": "subj.subjective",
                                                               "objective": "subj.objective"}),
             {"subjective": "true", "objective": "false"}),
    "cr": ("noul", "The customer review is positive.", sent_conv({"positive": "custrev.pos", "negative": "custrev.neg"}),
           {"positive": "true", "negative": "false"}),
    "cb": ("choice", "How does the hypothesis relate to the premise?", cb, None),
    "sick": ("score", "How related in meaning are the two sentences?", sick, {str(k + 1): str(k) for k in range(5)}),
}

#: A score set's levels, lowest first (build.py's criteria for it).
LEVELS: dict[str, list[str]] = {
    "finphrasebank": ["negative", "neutral", "positive"],
    # SemEval-2014 task 1's scale: 1 "completely unrelated" … 5 "very related"; the middle levels in words
    "sick": ["completely unrelated", "slightly related", "somewhat related", "closely related", "very related"],
}

#: The set no default is fitted on (a held-out set of our own); sets.json marks it "held_out".
HELD_OUT = "powerplay11"
