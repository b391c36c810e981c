"""The three System One clients on PyPI, unmodified, against `jev serve` on loopback.

typesafe-sdk, system-one and sq-system-one each ask the gateway (in front of the deterministic stub
backend) a choice, a score and a noul. They run in their own environment (``.venv-sysone``, made by
scripts/sysone_env.sh, which .ci/run calls), through scripts/sysone_probe.py, since they bring their
own HTTP stacks. The stub answers from the state (``want=billing``, ``truth=yes``), so every client
must read billing, a score over three levels, and a noul near 1 — the same numbers, since it is one
wire answer. docs/gateway.md has the table of what works and what differs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from tests.gateway.conftest import KEY, MODEL

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-sysone" / "bin" / "python"
PROBE = ROOT / "scripts" / "sysone_probe.py"
CLIENTS = ("typesafe-sdk", "system-one", "sq-system-one")


@pytest.fixture(scope="module")
def report(gateway_url):
    """Each client's answers (or error), from one run of the probe in the clients' environment."""
    if not PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail("the System One clients' environment is missing: .ci/run must run scripts/sysone_env.sh")
        pytest.skip("run `bash scripts/sysone_env.sh` first: it installs the three clients into .venv-sysone")
    out = subprocess.run([str(PYTHON), str(PROBE), "--url", gateway_url, "--key", KEY, "--model", MODEL],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_gets_a_choice_a_score_and_a_noul(report, client):
    got = report[client]
    assert "error" not in got, got.get("trace") or got["error"]
    team, urgency, genuine = (got["answers"][q] for q in ("team", "urgency", "genuine"))
    assert team["choice"] == "billing" and set(team["probabilities"]) == {"billing", "technical"}
    assert math.isclose(sum(team["probabilities"].values()), 1.0, abs_tol=1e-6) and 0 <= team["confidence"] <= 1
    assert set(urgency["probabilities"]) == {"0", "1", "2"} and 0 <= urgency["score"] <= 2
    assert math.isclose(urgency["score"], sum(int(k) * p for k, p in urgency["probabilities"].items()), abs_tol=1e-6)
    assert genuine["noul"] > 0.9


def test_every_client_reads_the_same_answer(report):
    """One wire answer, three SDKs: they agree on every number the contract carries."""
    def contract(answers):
        return {q: {k: v for k, v in a.items() if not (q == "genuine" and k == "confidence")}
                for q, a in answers.items()}
    first, *rest = (contract(report[c]["answers"]) for c in CLIENTS if "answers" in report[c])
    assert all(other == first for other in rest)


def test_system_one_derives_a_noul_confidence_the_contract_does_not_send(report):
    """system-one fills NoulAnswer.confidence itself (|2p - 1|); the others leave a noul without one."""
    noul = report["system-one"]["answers"]["genuine"]
    assert noul["confidence"] == pytest.approx(abs(2 * noul["noul"] - 1), abs=1e-3)
    assert report["typesafe-sdk"]["answers"]["genuine"]["confidence"] == "absent"


def test_typesafe_sdk_lists_the_gateway_models(report):
    """/v1/models carries both shapes: OpenAI's ``data`` and the System One API's ``models`` (name, description,
    release_date), which typesafe-sdk's ``models.list()`` validates strictly."""
    got = report["typesafe-sdk"]
    assert "models_error" not in got, got.get("models_error")
    assert MODEL in got["models"]


def test_typesafe_sdk_with_a_zstd_compressed_body(report):
    """typesafe-sdk zstd-compresses a body of 1 KiB or more (``Content-Encoding: zstd``); the gateway decodes it."""
    got = report["typesafe-sdk (zstd body)"]
    assert "error" not in got, got["error"]
    assert got["body_bytes"] >= 1024 and got["answers"]["genuine"]["noul"] > 0.9
