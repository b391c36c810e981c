"""The maintained benchmarks behind one entry point: ``python -m bench NAME [ARGS...]``.

``python -m bench --list`` prints the table below (bench/README.md holds the same rows); ``python -m bench NAME
--help`` a bench's own options. Each bench is a script in this folder, run as ``__main__`` with this folder on the
path, so ``python bench/FILE.py [SUBCOMMAND] ARGS`` runs it the same way. Times are on 2 shared CPU cores with the
default options; the offline benches read the saved runs in ``bench/heldout_runs/`` and run no model.
"""

from __future__ import annotations

import runpy
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bench:
    file: str  #: the script in bench/
    what: str  #: what it measures
    takes: str  #: how long the default run takes
    sub: str = ""  #: the script's subcommand, where one script holds several benches

    def command(self) -> str:
        return f"python bench/{self.file}" + (f" {self.sub}" if self.sub else "")


BENCHES: dict[str, Bench] = {
    # quality: how well the engine decides
    "quality": Bench("quality.py", "accuracy, ECE before and after calibration and p50 latency of the embedded "
                     "models on the project's labelled sets (letters/names × 0/4 examples); writes docs/quality.md's "
                     "tables", "~15 min a model (--quick: a few min)"),
    "heldout": Bench("heldout.py", "the default model with product defaults on public sets nobody tuned for, "
                     "every answer saved with its prior and raw readout (the input of the offline benches)",
                     "~2-5 min a set and setting (--sets a,b --limit 20: a few min)"),
    "heldout_orders": Bench("heldout.py", "each choice asked with its options as listed and reversed: answers "
                            "reversing moves, right as listed / reversed / both orders combined (order=\"both\"), "
                            "calls and p50", "~10 min a set of 60 items (--table: seconds)", "orders"),
    "heldout_orders_ece": Bench("heldout_strength.py", "offline: a heldout_orders run's ECE as listed, reversed "
                                "and both orders combined, pooled and per set, beside a calibrated model's band",
                                "seconds, no model", "orders_ece"),
    "heldout_fit": Bench("heldout_fit.py", "offline: calibration maps fitted on the saved runs, judged "
                         "leave-one-dataset-out; --write ships a model's map", "~1 min, no model"),
    "heldout_strength": Bench("heldout_strength.py", "offline: how much of the prior each kind divides out, chosen "
                              "leave-one-dataset-out (models.DEBIAS_STRENGTH)", "seconds, no model"),
    "heldout_traffic": Bench("heldout_strength.py", "offline: what a question's lean over its unlabelled states "
                             "(calibration.fit_traffic), 30 labels and both buy against the shipped calibration, "
                             "per set, ECE beside a calibrated model's band", "~1 min, no model", "traffic"),
    "heldout_examples_map": Bench("heldout_strength.py", "offline: the shipped map before the question's own "
                                  "examples' fit, against none, per kind", "~1 min, no model", "examples_map"),
    "heldout_few_priors": Bench("heldout_strength.py", "offline: the examples' prior from a few of them (each "
                                "question's first answer in fewer calls) against every example's, per set",
                                "seconds, no model", "few_priors"),
    "heldout_curve": Bench("heldout_strength.py", "offline: labels -> held-out ECE, log loss and 90% decision sets' "
                           "coverage (pooled and per fit), as jev calibrate fits them", "~1 min, no model", "curve"),
    "heldout_variants": Bench("heldout_variants.py", "ways of asking scores and nouls (level names, digits, "
                              "descriptions), saved for offline strength tables", "~10 min a set"),
    "heldout_nouls": Bench("heldout_variants.py", "a noul's answer words (yes/no against true/false) on the public "
                           "noul sets; --lodo judges saved runs offline", "~10 min a variant; --lodo seconds",
                           "nouls"),
    "spam_formats": Bench("heldout_variants.py", "the demo's spam question asked five ways (where the statement "
                          "and the state go), zero-shot and with its examples, on bench/data/spam.jsonl and the demo's "
                          "tickets: separation (AUC) and answers each side of 0.5", "~12 min", "spam_formats"),
    "heldout_router": Bench("heldout_router.py", "zero-shot on the public sets: the engine's defaults against a "
                            "bare one-token call and LangChain's structured router, per model", "~10-15 min a set of 30 items"),
    "first_token_names": Bench("first_token_names.py", "option names that share a first token: read on in the "
                               "call that asks (the path read), by continuation calls, or answered by distinct "
                               "words; right answers, calls, tokens, p50 per set", "~1-10 min a set of 30 items"),
    "decision_sets": Bench("decision_sets.py", "offline: decision sets' coverage and the data-chosen gate band on "
                           "the recorded answers of both embedded models", "~1 min, no model"),
    "compare_routers": Bench("compare_routers.py", "routers side by side (Jev, LangChain, LlamaIndex, jevper, a "
                             "bare call): accuracy, unusable answers, tokens, calls, latency; writes "
                             "docs/benchmarks.md", "~12-18 min for 60 items (--quick: a few min)"),
    "rerank": Bench("rerank.py", "no rerank, LlamaIndex's LLMRerank and JevRerank on BM25's ten SQuAD candidates: "
                    "nDCG@5, hit@1, calls, latency", "~15 min (--limit 5: ~3 min)"),
    "rerank_tune": Bench("rerank.py", "JevRerank's retrieval_weight chosen on the tuning split, never on the "
                         "bench's queries", "~10 min", "tune"),
    "rerank_data": Bench("rerank.py", "builds bench/data/rerank.json and rerank_tune.json from SQuAD 2.0's dev "
                         "file (not a measurement)", "seconds", "data"),
    "auto_mode": Bench("auto_mode.py", "LangChain's AutoModeMiddleware on JevDecisionModel: block/allow accuracy "
                       "on labelled tool calls", "~5 min"),
    "mode_auto": Bench("auto_mode.py", "mode=\"auto\": which answers escalate to System 2, calls and latency per "
                       "pass, accuracy of each", "~5 min", "escalation"),
    # speed: what a decision costs
    "limit": Bench("limit.py", "each decision's distance from the hardware's limit (tokens prefilled, wall time "
                   "against a bare call) and what N questions cost", "~5 min"),
    "warm": Bench("warm.py", "the first decision against the hundredth: fresh and kept memory, kept prompts, "
                  "priors' preparation", "~5 min"),
    "first_decision": Bench("first_decision.py", "the README example's first decision on a fresh server against "
                            "its prompts sent as bare calls: wall time and prompt tokens read", "~3 min"),
    "first_decision_models": Bench("first_decision.py", "what a new user waits for on each embedded model: the "
                                   "server's start, the first decision, the second", "~5 min", "models"),
    "batch": Bench("batch.py", "batch decisions per second: sequential, decide_batch at 1/2/4/8, the server's own "
                   "one-token throughput, through the gateway", "~5 min"),
    "slots_throughput": Bench("batch.py", "decisions per second with 1, 2 and 4 parallel slots on the embedded "
                              "server, beside bare calls of the same prompts", "~10 min", "slots"),
    "batch_resume": Bench("batch.py", "1,000 rows through `jev decide`, killed half-way and resumed: none decided "
                          "twice, none lost", "~10 min", "resume"),
    "overhead": Bench("overhead.py", "the engine's client-side cost against jevper and a raw chat.completions "
                      "loop over a stub, one question and eight", "~1 min"),
    "cpu": Bench("cpu.py", "CPU per decision of the Python in front of a fast backend, against its peers",
                 "~2 min"),
    "post_instructions": Bench("cpu.py", "instructions per backend post (valgrind cachegrind), sync against async "
                               "and the async client's settings", "~3 min", "posts"),
    "gateway": Bench("gateway.py", "`jev serve` against the engine called directly: overhead at p50, 32 clients' "
                     "throughput, the embedded model, workers", "~5 min"),
    "gateway_scale": Bench("gateway.py", "`jev serve --workers N` on one stub model server, and two behind nginx: "
                           "throughput, p50/p99, errors", "~3 min", "scale"),
    "gateway_cpu": Bench("gateway_cpu.py", "CPU per request of the whole gateway process and of the engine alone, "
                         "beside the floors under any gateway; --split --instructions per layer", "~3 min"),
    "gpu_compare": Bench("gpu_compare.py", "a served vLLM or SGLang: the exact readout against the window, "
                         "decisions/s, accuracy, ECE (bench/gpu_check.sh starts the servers)", "~5 min on a GPU"),
}


def table() -> str:
    rows = ["| `python -m bench NAME` | what it measures | takes | script |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {b.what} | {b.takes} | `{b.command().removeprefix('python ')}` |"
             for name, b in BENCHES.items()]
    return "\n".join(rows)


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + "\n".join(f"  {n:22s} {b.takes}" for n, b in BENCHES.items()))
        return
    if argv[0] == "--list":
        print(table())
        return
    name, *rest = argv
    if name not in BENCHES:
        raise SystemExit(f"no bench {name!r}; `python -m bench --list` names them")
    bench = BENCHES[name]
    sys.argv = [str(HERE / bench.file), *([bench.sub] if bench.sub else []), *rest]
    sys.path.insert(0, str(HERE))
    runpy.run_path(str(HERE / bench.file), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
