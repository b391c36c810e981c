"""Model defaults: what the engine knows about a model, by its name, wherever the client was built.

``debias="auto"`` and ``calibrator="auto"`` resolve here, so the library, ``jev decide`` and ``jev
serve`` give the same answer on the same model (a client's origin says nothing about the model).
A name is recognised in the spellings servers report: a hub path, a GGUF file, ollama's tag.
"""

from __future__ import annotations

import re

#: Per model where debias was measured, per (question kind, asked with examples): the power of the prior
#: that debias="auto" divides answers by (1: all of it; 0.5: its square root, half the lean in log space;
#: 0: none, and no prior calls). Measured held out on public sets per kind (docs/quality.md).
DEBIAS_STRENGTH: dict[str, dict[tuple[str, bool], float]] = {
    # every kind all of it (zero-shot choices: half and all tie pooled, all of it beats LangChain's structured
    # router on more sets). Zero-shot nouls all of it too: under the exact readout it won leave-one-dataset-out on
    # six public noul sets (chosen on every leave-out; 459 right of 600 against half's 412,
    # ``python -m bench heldout_nouls --lodo``); its cost: an empty state's own answer ("an empty message is not spam") is
    # divided out with the lean
    "qwen2.5-coder-0.5b": {("choice", False): 1.0, ("choice", True): 1.0, ("score", False): 1.0,
                           ("score", True): 1.0, ("noul", False): 1.0, ("noul", True): 1.0},
    # held out on 18 public sets (docs/quality.md): zero-shot, half the lean for nouls (83.0% against
    # 76.5% off and 79.1% whole, of 540) and all of it for choices (61.6% against 59.9% half and 54.0% off, of
    # 920) and scores (43.1% against 37.9% and 36.9%); with examples half for every kind (choices 66.7% against
    # 65.0% whole; nouls 80.0% against 82.1% off, but off would drop the examples' labelled answers, which
    # calibrate the question itself). Scores with examples a quarter: chosen leave-one-dataset-out on
    # finphrasebank, sick, sst5 (270 answers: 146 right held out, 142 with none a candidate, against half's 141;
    # no set lower beyond noise; ``python -m bench heldout_strength --shots 1``). Nouls with examples stay at half:
    # the strength chosen on the other five noul sets loses held out (sst2 wants none, clickbait all of it: 321
    # against 352 of 470)
    "qwen2.5-coder-1.5b": {("choice", False): 1.0, ("choice", True): 0.5, ("score", False): 1.0,
                           ("score", True): 0.25, ("noul", False): 0.5, ("noul", True): 0.5},
}
#: Models on which debias="auto" was measured to win for some kind of question (docs/decisions.md).
DEBIAS_MEASURED = frozenset(DEBIAS_STRENGTH)

#: What a server or a file adds to a model's name: the tuning, the format, the quantisation.
_SUFFIX = re.compile(r"-(instruct|chat|it|gguf|q\d[a-z0-9]*(-[a-z0-9]+)*|bf16|fp16|f16)$")


def canonical(model: str) -> str:
    """``Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF``, ``qwen2.5-coder:0.5b`` and ``qwen2.5-coder-0.5b-instruct-q8_0.gguf``
    all name ``qwen2.5-coder-0.5b``."""
    name = model.strip().lower().rsplit("/", 1)[-1].removesuffix(".gguf").replace(":", "-").replace("_", "-")
    while (shorter := _SUFFIX.sub("", name)) != name and shorter:
        name = shorter
    return name


def debias_by_default(model: str) -> bool:
    """What debias="auto" means for ``model``: on where it was measured to win, off elsewhere."""
    return canonical(model) in DEBIAS_MEASURED


def debias_strength(model: str, kind: str, examples: bool) -> float:
    """The power of the prior debias="auto" divides by, for this model and kind of question (0: off)."""
    return DEBIAS_STRENGTH.get(canonical(model), {}).get((kind, examples), 0.0)
