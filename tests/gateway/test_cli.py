"""The ``jev`` command, run as a subprocess: help, serve's refusals and a real serve, decide."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import httpx
import pytest

from jev_shared.local import free_port
from tests.gateway.conftest import KEY
from tests.gateway.crowd import wait_healthy

pytestmark = pytest.mark.slow  # every test here starts a subprocess or a server (seconds each): scripts/test.sh --full runs them

SPAM = {"spam": {"type": "noul", "instructions": "This is spam."}}


def jev(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    exe = shutil.which("jev")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "jev_shared.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}, **kw)


def test_help_lists_the_commands():
    out = jev("--help")
    assert out.returncode == 0 and "serve" in out.stdout and "decide" in out.stdout
    serve = jev("serve", "--help").stdout
    assert "--backend-url" in serve and "--questions" in jev("decide", "--help").stdout
    for flag in ("--max-questions", "--max-calls-per-key", "--max-connections", "--keep-alive-timeout", "--body-timeout",
                 "--allowed-host", "--warm", "--no-cache"):
        assert flag in serve, flag
    assert "--no-cache" in jev("decide", "--help").stdout


def test_serve_refuses_a_public_host_without_keys():
    out = jev("serve", "--host", "0.0.0.0", "--backend-url", "http://127.0.0.1:9/v1", "--model", "m",
              env={"JEV_API_KEYS": ""})
    assert out.returncode == 2 and "refusing to serve 0.0.0.0 without API keys" in out.stderr


def test_decide_against_the_stub(stub):
    out = jev("decide", "--state", "a ticket want=technical truth=yes", "--backend-url", stub.base_url,
              "--model", "m", "--questions", json.dumps({
                  "team": {"type": "choice", "instructions": "Which team?",
                           "criteria": {"billing": "payments", "technical": "bugs"}}, **SPAM}))
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["answers"]["team"]["choice"] == "technical" and body["answers"]["spam"]["noul"] > 0.9
    assert stub.requests == 2


def test_decide_reads_questions_from_a_file_and_reports_a_bad_one(stub, tmp_path):
    path = tmp_path / "questions.json"
    path.write_text(json.dumps({"urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["now"]}}))
    out = jev("decide", "--state", "x", "--questions", str(path), "--backend-url", stub.base_url, "--model", "m")
    assert out.returncode == 2 and stub.requests == 0
    assert json.loads(out.stderr)["error"]["field"] == "questions.urgency.criteria"


def start_serve(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """``jev serve`` on a free port, once /healthz answers 200 (ready)."""
    port = free_port()
    exe = shutil.which("jev")
    cmd = [exe] if exe else [sys.executable, "-m", "jev_shared.cli"]
    proc = subprocess.Popen([*cmd, "serve", "--port", str(port), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "JEV_API_KEYS": KEY, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 120)
    return proc, url


def test_serve_answers_and_logs_json_lines(stub):
    proc, url = start_serve("--backend-url", stub.base_url, "--model", "m")
    try:
        resp = httpx.post(url + "/v1/systemone", headers={"authorization": f"Bearer {KEY}"},
                          json={"model": "m", "state": "x truth=no", "questions": SPAM})
        assert resp.status_code == 200 and resp.json()["answers"]["spam"]["noul"] < 0.1
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [entry["path"] for entry in lines] == ["/healthz", "/v1/systemone"]
    assert KEY not in out and KEY not in err and "models ['m']" in err


@pytest.mark.live
@pytest.mark.qwen
def test_serve_without_a_backend_starts_the_embedded_model():
    proc, url = start_serve()
    try:
        models = httpx.get(url + "/v1/models", headers={"authorization": f"Bearer {KEY}"}).json()["data"]
        resp = httpx.post(url + "/v1/systemone", headers={"authorization": f"Bearer {KEY}"}, timeout=60,
                          json={"model": models[0]["id"], "state": "Buy cheap pills now!!!", "questions": SPAM})
        assert resp.status_code == 200 and 0 <= resp.json()["answers"]["spam"]["noul"] <= 1
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "embedded model qwen2.5-coder-1.5b" in err  # LocalServer()'s default (DEFAULT_MODEL), what a user meets


#: A ``sitecustomize`` that hides packages named in ``$JEV_TEST_HIDE`` (modules and distributions), so a
#: subprocess runs as on a machine without that extra installed.
HIDER = '''
import importlib.abc, importlib.metadata, os, sys
HIDE = {n for n in os.environ.get("JEV_TEST_HIDE", "").split(",") if n}

class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDE:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hide())
_distribution = importlib.metadata.distribution

def distribution(name):
    if name in HIDE:
        raise importlib.metadata.PackageNotFoundError(name)
    return _distribution(name)

importlib.metadata.distribution = distribution
'''


def without(tmp_path, *hidden: str) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(HIDER)
    return {"JEV_TEST_HIDE": ",".join(hidden), "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_serve_without_the_serve_extra_says_how_to_install_it(tmp_path):
    out = jev("serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", "m", env={
        **without(tmp_path, "uvicorn"), "JEV_API_KEYS": KEY})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "uvicorn" in lines[0] and "pip install -e '.[serve,local]'" in lines[0]


def test_decide_without_the_model_package_says_how_to_install_it(tmp_path):
    out = jev("decide", "--state", "x", "--questions", json.dumps(SPAM), env=without(tmp_path, "xllamacpp"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "pip install -e '.[serve,local]'" in out.stderr and "--backend-url" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
