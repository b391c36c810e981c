"""Build the public held-out sets (bench/data/public/*.jsonl) from public GitHub repositories.

Why: the project's own bench data was written for the project, so a fit on it flatters the engine;
these sets were written by others, for other purposes. Each set is small (at most 60 scored items,
stratified by label, plus one example per option from the source's training split where it has one),
drawn with a fixed seed. Sources, commits and licences: README.md beside this file.

    python bench/data/public/build.py --mirror /work/.mirror     # git directories named owner+repo/repo
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from build_more import HELD_OUT, LEVELS, MORE, in_words  # the sets added after the first nine: beside this file

HERE = Path(__file__).resolve().parent
N_ITEMS = 60
Rows = list[tuple[str, str]]  # (text, label)


def show(mirror: Path, repo: str, path: str) -> str:
    """One file at the mirror's HEAD."""
    git = mirror / repo.replace("/", "+") / "repo"
    return subprocess.run(["git", "--git-dir", str(git), "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def stratified(rows: Rows, n: int, rng: random.Random) -> Rows:
    """Round-robin over the labels (each label's rows shuffled), so every label gets its share."""
    by: dict[str, list[str]] = {}
    for text, label in rows:
        by.setdefault(label, []).append(text)
    for texts in by.values():
        rng.shuffle(texts)
    labels = sorted(by)
    rng.shuffle(labels)
    out: Rows = []
    while len(out) < n and any(by.values()):
        for lab in labels:
            if by[lab] and len(out) < n:
                out.append((by[lab].pop(), lab))
    return out


def one_each(rows: Rows, labels: list[str], rng: random.Random, avoid: set[str]) -> Rows:
    """One example per option, from rows not scored."""
    out = []
    for lab in labels:
        pool = [t for t, lb in rows if lb == lab and t not in avoid]
        out.append((rng.choice(pool), lab))
    return out


def sst(mirror: Path, fine: bool) -> tuple[Rows, Rows]:
    repo, name = ("sid7954/NLP_Sentence_Embeddings", "data/stsa.fine") if fine else (
        "tonyzhaozh/few-shot-learning", "data/sst2/stsa.binary")

    def read(split: str) -> Rows:
        return [(line[2:].strip(), line[0]) for line in show(mirror, repo, f"{name}.{split}").splitlines() if line.strip()]

    return read("test"), read("train")


def sms(mirror: Path) -> tuple[Rows, Rows]:
    text = show(mirror, "krishnaik06/Huggingfacetransformer", "SMSSpamCollection")
    rows = [(t.strip(), lab) for lab, t in (line.split("\t", 1) for line in text.splitlines() if "\t" in line)]
    return rows, rows  # no training split: examples come from the rows not scored


TREC = {"ABBR": "abbreviation", "DESC": "description", "ENTY": "entity", "HUM": "human", "LOC": "location",
        "NUM": "numeric"}


def trec(mirror: Path) -> tuple[Rows, Rows]:
    def read(split: str) -> Rows:
        text = show(mirror, "tonyzhaozh/few-shot-learning", f"data/trec/{split}.txt")
        return [(q.strip(), TREC[lab.split(":")[0]]) for lab, q in
                (line.split(" ", 1) for line in text.splitlines() if line.strip())]

    return read("test"), read("train")


#: The 50 fine TREC classes, each spelled out (the coarse class first where the fine name alone is ambiguous).
TREC_FINE = {
    "ABBR:abb": "abbreviation", "ABBR:exp": "expansion_of_abbreviation", "DESC:def": "definition",
    "DESC:desc": "description", "DESC:manner": "manner", "DESC:reason": "reason", "ENTY:animal": "animal",
    "ENTY:body": "body_part", "ENTY:color": "color", "ENTY:cremat": "creative_work", "ENTY:currency": "currency",
    "ENTY:dismed": "disease_or_medicine", "ENTY:event": "event", "ENTY:food": "food",
    "ENTY:instru": "musical_instrument", "ENTY:lang": "language", "ENTY:letter": "letter",
    "ENTY:other": "other_entity", "ENTY:plant": "plant", "ENTY:product": "product", "ENTY:religion": "religion",
    "ENTY:sport": "sport", "ENTY:substance": "substance", "ENTY:symbol": "symbol",
    "ENTY:techmeth": "technique_or_method", "ENTY:termeq": "equivalent_term", "ENTY:veh": "vehicle",
    "ENTY:word": "word", "HUM:desc": "description_of_person", "HUM:gr": "group_or_organization",
    "HUM:ind": "individual_person", "HUM:title": "title_of_person", "LOC:city": "city", "LOC:country": "country",
    "LOC:mount": "mountain", "LOC:other": "other_location", "LOC:state": "state", "NUM:code": "code",
    "NUM:count": "count", "NUM:date": "date", "NUM:dist": "distance", "NUM:money": "money", "NUM:ord": "rank",
    "NUM:other": "other_number", "NUM:perc": "percentage", "NUM:period": "time_period", "NUM:speed": "speed",
    "NUM:temp": "temperature", "NUM:volsize": "size_or_volume", "NUM:weight": "weight",
}


def trec_fine(mirror: Path) -> tuple[Rows, Rows]:
    """TREC with its 50 fine classes (a second choice set with 7-70 options, for decision sets)."""
    def read(split: str) -> Rows:
        text = show(mirror, "tonyzhaozh/few-shot-learning", f"data/trec/{split}.txt")
        return [(q.strip(), TREC_FINE[lab]) for lab, q in (line.split(" ", 1) for line in text.splitlines() if line.strip())]

    return read("test"), read("train")


AG = {"1": "world", "2": "sports", "3": "business", "4": "science_technology"}


def agnews(mirror: Path) -> tuple[Rows, Rows]:
    text = show(mirror, "tonyzhaozh/few-shot-learning", "data/agnews/test.csv")
    rows = [(f"{title}. {desc}".replace("\\", " ").strip(), AG[c]) for c, title, desc in csv.reader(io.StringIO(text))
            if c in AG]
    return rows, rows  # the training split is not stored: examples from the rows not scored


def atis(mirror: Path) -> tuple[Rows, Rows]:
    base = "data/atis/atis"
    vocab = show(mirror, "tonyzhaozh/few-shot-learning", f"{base}.dict.vocab.csv").splitlines()
    intents = show(mirror, "tonyzhaozh/few-shot-learning", f"{base}.dict.intent.csv").splitlines()

    def read(split: str) -> Rows:
        qs = show(mirror, "tonyzhaozh/few-shot-learning", f"{base}.{split}.query.csv").splitlines()
        labs = show(mirror, "tonyzhaozh/few-shot-learning", f"{base}.{split}.intent.csv").splitlines()
        out = []
        for q, lab in zip(qs, labs):
            words = [vocab[int(i)] for i in q.split()]
            name = intents[int(lab)]
            if "+" not in name:  # single-intent utterances only: an option set, not a multi-label one
                out.append((" ".join(w for w in words if w not in ("BOS", "EOS")), name))
        return out

    return read("test"), read("train")


def banking(mirror: Path) -> tuple[Rows, Rows]:
    def read(split: str) -> Rows:
        text = show(mirror, "PolyAI-LDN/task-specific-datasets", f"banking_data/{split}.csv")
        return [(r["text"].strip(), r["category"]) for r in csv.DictReader(io.StringIO(text))]

    return read("test"), read("train")


def clinc(mirror: Path) -> tuple[Rows, Rows]:
    d = json.loads(show(mirror, "clinc/oos-eval", "data/data_full.json"))
    return [(t, lab) for t, lab in d["test"]], [(t, lab) for t, lab in d["train"]]


def rte(mirror: Path) -> tuple[Rows, Rows]:
    def read(split: str) -> Rows:
        text = show(mirror, "tonyzhaozh/few-shot-learning", f"data/rte/{split}.jsonl")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [(f"Premise: {r['premise']}\nHypothesis: {r['hypothesis']}", r["label"]) for r in rows]

    return read("val"), read("train")  # the test split is unlabelled: validation is the scored one


SST5 = {"0": "very negative", "1": "negative", "2": "neutral", "3": "positive", "4": "very positive"}

#: name → (kind, instructions, loader, label map: the source's label → the option's key / level / truth).
SETS: dict[str, tuple[str, str, Callable[[Path], tuple[Rows, Rows]], dict[str, str] | None]] = {
    "sst2": ("noul", "The movie review is positive.", lambda m: sst(m, False), {"1": "true", "0": "false"}),
    "sms_spam": ("noul", "The text message is spam.", sms, {"spam": "true", "ham": "false"}),
    "rte": ("noul", "The hypothesis follows from the premise.", rte, {"entailment": "true", "not_entailment": "false"}),
    "sst5": ("score", "How positive is this movie review?", lambda m: sst(m, True), {k: k for k in SST5}),
    "trec": ("choice", "What kind of answer does this question ask for?", trec, None),
    "trec_fine": ("choice", "What kind of answer does this question ask for?", trec_fine, None),
    "agnews": ("choice", "What is the topic of this news article?", agnews, None),
    "atis": ("choice", "What is the intent of this airline travel query?", atis, None),
    "banking77": ("choice", "What is the intent of this banking customer query?", banking, None),
    "clinc150": ("choice", "What is the intent of this request to a virtual assistant?", clinc, None),
    **MORE,
}


def words(name: str) -> str:
    """The name in words: what a new user writes as a description when they have nothing better."""
    return re.sub(r"[_\s]+", " ", name).strip()


def extra_items(test: Rows, taken: set[str], n: int, name: str) -> Rows:
    """More scored items, disjoint from the first 60 and from every example, drawn with their own seed.

    Why: on 60 answers a perfectly calibrated model reads ECE 0.05–0.13, so a per-set calibration
    target cannot be told from noise; more items per set shrink that floor. The first 60 and the
    examples stay as they were (the saved runs keep meaning what they meant)."""
    rng = random.Random(f"jev-public-{name}-extra")
    return stratified([(t, lab) for t, lab in test if t not in taken], n, rng)


def build(mirror: Path, name: str, extra: int = 0) -> dict:
    kind, instructions, loader, mapping = SETS[name]
    rng = random.Random(f"jev-public-{name}")
    test, train = loader(mirror)
    if mapping:
        test = [(t, mapping[lab]) for t, lab in test if lab in mapping]
        train = [(t, mapping[lab]) for t, lab in train if lab in mapping]
    labels = sorted({lab for _, lab in train})  # the options: every label the training split names
    test = [(t, lab) for t, lab in test if lab in labels]
    items = stratified(test, N_ITEMS, rng)
    examples = one_each(train, labels, rng, {t for t, _ in items})
    try:
        more = one_each(train, labels, rng, {t for t, _ in items} | {t for t, _ in examples}) if len(labels) <= 20 else []
    except IndexError:  # an option with a single training row: no second example for that set
        more = []
    if extra:
        taken = {t for t, _ in items} | {t for t, _ in examples} | {t for t, _ in more}
        (HERE / "extra").mkdir(exist_ok=True)
        with (HERE / "extra" / f"{name}.jsonl").open("w") as f:
            for i, (text, lab) in enumerate(extra_items(test, taken, extra, name)):
                f.write(json.dumps({"id": f"{name}-x{i}", "text": text, "label": lab}) + "\n")
    meta: dict = {"name": name, "kind": kind, "instructions": instructions}
    if name == HELD_OUT:  # our own held-out set: no default is fitted on it
        meta["held_out"] = True
    if kind == "choice":
        meta["criteria"] = {lab: (in_words if name in MORE else words)(lab) for lab in labels}
    elif kind == "score":
        meta["criteria"] = LEVELS.get(name) or [SST5[k] for k in sorted(SST5)]
    with (HERE / f"{name}.jsonl").open("w") as f:
        for i, (text, lab) in enumerate(items):
            f.write(json.dumps({"id": f"{name}-{i}", "text": text, "label": lab}) + "\n")
    meta["examples"] = [{"text": t, "label": lab} for t, lab in examples]
    if more:  # a second example per option (sets of up to 20 options): the two-per-option setting
        meta["more_examples"] = [{"text": t, "label": lab} for t, lab in more]
    return meta


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, required=True)
    ap.add_argument("--extra", type=int, default=0, help="also write extra/NAME.jsonl: this many more scored items")
    ap.add_argument("--only", default="", help="rebuild these sets only (comma-separated), the others kept")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(SETS)
    old = json.loads((HERE / "sets.json").read_text()) if args.only else {}
    built = {name: build(args.mirror, name, args.extra) for name in names}
    sets = {name: built.get(name) or old[name] for name in SETS if name in built or name in old}
    (HERE / "sets.json").write_text(json.dumps(sets, indent=1) + "\n")
    for name, meta in sets.items():
        print(name, meta["kind"], len(meta.get("criteria") or [1, 2]), "options")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
