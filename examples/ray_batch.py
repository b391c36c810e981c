"""Decide a backlog on Ray: a Dataset of states through ``map_batches``, one engine client per actor.

    pip install -e '.[ray,local]'     # from a checkout
    python examples/ray_batch.py                                   # the embedded model, a local Ray
    python examples/ray_batch.py --backend-url http://vllm:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
    RAY_ADDRESS=auto python examples/ray_batch.py --backend-url ... # an existing cluster (docs/batch.md)

``Decider`` is a callable class: Ray builds it once per actor, so each actor holds one
``SystemOneClient`` (and one HTTP connection pool) for its life; each batch of rows is decided with
the engine's batch API at ``concurrency`` items in flight. The driver pays the one-time costs once
(``client.prepare``) and hands every actor the same memory (``Memory.to_json()``, numbers and
fingerprints only), so no actor measures the backend again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUESTIONS: dict[str, Any] = {
    "team": {"type": "choice", "instructions": "Which team should handle this support ticket?",
             "criteria": {"billing": "charges, refunds, invoices", "technical": "bugs, errors, crashes",
                          "account": "login, passwords, permissions", "shipping": "delivery, parcels, returns"}},
    "spam": {"type": "noul", "instructions": "The message is spam: unsolicited advertising, a scam or phishing."},
}


class Decider:
    """One engine client per actor; ``__call__`` decides a batch of rows ``{"id", "state"}``."""

    def __init__(self, base_url: str, model: str, questions: dict[str, Any], concurrency: int = 4,
                 memory: dict[str, Any] | None = None) -> None:
        from jev_shared import Memory

        self.client = engine_client(base_url, model, Memory.from_json(memory) if memory else Memory())
        self.questions, self.concurrency = questions, concurrency
        self.actor = f"{os.getpid()}-{id(self):x}"
        self.batches = 0

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        from jev_shared.batch import decide_batch

        self.batches += 1
        result = decide_batch(self.client, zip(list(batch["id"]), list(batch["state"])), self.questions,
                              concurrency=self.concurrency)
        lines = [r.to_json() for r in result.results]
        return {"id": [line["id"] for line in lines],
                "answers": [json.dumps(line["answers"]) if line["answers"] else "" for line in lines],
                "error": [line["error"]["type"] if line["error"] else "" for line in lines],
                "actor": [self.actor] * len(lines), "actor_batch": [self.batches] * len(lines)}


def engine_client(base_url: str, model: str, memory: Any) -> Any:
    """The same client on the driver and in every actor (the memory is keyed by where it points)."""
    import openai

    from jev_shared import SystemOneClient

    key = os.environ.get("JEV_BACKEND_API_KEY") or os.environ.get("OPENAI_API_KEY") or "unused"
    return SystemOneClient(openai.OpenAI(base_url=base_url, api_key=key), model=model, api="chat_completions",
                           memory=memory)


def run(rows: list[dict[str, Any]], base_url: str, model: str, *, actors: int = 2, batch_size: int = 8,
        concurrency: int = 4, questions: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``rows`` decided on the Ray cluster ``ray.init()`` finds (a local one when there is none)."""
    import ray

    from jev_shared import Memory

    questions = questions or QUESTIONS
    driver = engine_client(base_url, model, Memory())
    print(driver.prepare(questions), file=sys.stderr)  # once, here, instead of once per actor
    ds = ray.data.from_items(rows).map_batches(
        Decider, fn_constructor_kwargs={"base_url": base_url, "model": model, "questions": questions,
                                        "concurrency": concurrency, "memory": driver.memory.to_json()},
        batch_size=batch_size, concurrency=actors, num_cpus=0.5, batch_format="numpy")
    return ds.take_all()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend-url")
    p.add_argument("--model")
    p.add_argument("--n", type=int, default=40)
    p.add_argument("--actors", type=int, default=2)
    args = p.parse_args()
    import ray

    from bench.batch_data import labelled

    rows = [{"id": r["id"], "state": r["text"]} for r in labelled(args.n)]
    ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False)
    if args.backend_url:
        out = run(rows, args.backend_url, args.model or "default", actors=args.actors)
    else:
        from jev_shared.local import LocalServer

        with LocalServer() as srv:
            out = run(rows, srv.base_url, srv.model, actors=args.actors)
    for row in out[:5]:
        answers = json.loads(row["answers"]) if row["answers"] else {}
        print(row["id"], answers.get("team", {}).get("choice"), row["error"] or "", row["actor"])
    print(f"{len(out)} rows, {len({r['actor'] for r in out})} actors, "
          f"{sum(1 for r in out if r['error'])} failed")


if __name__ == "__main__":
    main()
