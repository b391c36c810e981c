"""examples/ray_batch.py on a local Ray cluster (single node), against the embedded llama.cpp server.

Marked ``ray``: it needs the ``ray`` extra (CI runs it once in .venv-ray) and takes tens of seconds
to start Ray, so the default suite skips it where Ray is not installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.live]
ray = pytest.importorskip("ray")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import ray_batch  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 1024 * 1024,
             _temp_dir=str(tmp_path_factory.mktemp("ray")),
             runtime_env={"env_vars": {"PYTHONPATH": str(EXAMPLES)}})  # the actors import ray_batch.Decider
    yield
    ray.shutdown()


def test_map_batches_decides_every_row_once_one_client_per_actor(cluster, local_server):
    rows = [{"id": f"r{i}", "state": f"Ticket {i}: I was charged twice, please refund."} for i in range(24)]
    out = ray_batch.run(rows, local_server.base_url, local_server.model, actors=2, batch_size=4, concurrency=2)
    assert sorted(r["id"] for r in out) == sorted(r["id"] for r in rows)  # each row once
    assert not [r for r in out if r["error"]]
    for r in out:
        answers = json.loads(r["answers"])
        team, spam = answers["team"], answers["spam"]
        assert team["choice"] in ray_batch.QUESTIONS["team"]["criteria"]
        assert abs(sum(team["probabilities"].values()) - 1) < 1e-6 and 0 <= spam["noul"] <= 1
    per_actor: dict[str, int] = {}
    for r in out:
        per_actor[r["actor"]] = max(per_actor.get(r["actor"], 0), r["actor_batch"])
    # 6 batches over at most 2 actors: each actor's client was built once and served every batch it took
    assert 1 <= len(per_actor) <= 2 and sum(per_actor.values()) == 6
