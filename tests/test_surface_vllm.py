"""The vLLM surface (api="vllm", src/jev_shared/surface_vllm.py) against a stub of vLLM's documented wire.

No GPU server can run here, so tests/helpers/served.py speaks vLLM's OpenAI-compatible wire on a loopback
socket (``/tokenize``; ``/v1/chat/completions`` with ``logprob_token_ids``, PR #43463, and the top-20 window
under ``--max-logprobs``). ``bench/gpu_check.sh`` runs the same surface against a real vLLM.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from jev_shared import Choice, Noul, Score, SystemOneClient
from jev_shared.exact import EXACT_SOURCE
from jev_shared.surfaces.vllm import MAX_TOKEN_IDS, exact_request
from tests.helpers.served import WORDS, FakeModel, ServedStub, served_client


def client_for(srv: ServedStub, *, exact: bool = True) -> SystemOneClient:
    return served_client(srv, "vllm", exact=exact)


def decide(srv: ServedStub, question: dict, *, exact: bool = True) -> Any:
    return client_for(srv, exact=exact).system_one("pick forty", question)


def test_a_64_option_question_reads_every_options_probability_with_logprob_token_ids():
    model = FakeModel(WORDS, "opt40")
    question = {"q": Choice(instructions="Which option?", criteria={w: f"option {w}" for w in WORDS})}
    with ServedStub("vllm", model) as srv:
        client = client_for(srv)
        resp = client.system_one("pick forty", question)
        asked = sum(r.path == "/tokenize" for r in srv.log)
        client.system_one("pick forty again", question)
        assert sum(r.path == "/tokenize" for r in srv.log) == asked  # the server's tokenizer: once per option set
    readout = resp.debug["questions"]["q"]["readout"]
    assert readout["source"] == EXACT_SOURCE and readout["labels_missing"] == [] and not readout["truncated"]
    probs = resp.answers["q"].probabilities
    assert resp.answers["q"].choice == "opt40" and all(p > 0 for p in probs.values())
    want = model.label_probs(WORDS)
    for w in WORDS:  # the model's own distribution over every option, none floored
        assert probs[w] == pytest.approx(want[w], rel=1e-6)
    body = srv.seen[0]
    assert sorted(body["logprob_token_ids"]) == sorted({model.vocab[w] for w in WORDS} | {model.vocab[" " + w] for w in WORDS})
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["temperature"] == 0
    for llama_only in ("logit_bias", "post_sampling_probs", "top_k", "min_p", "seed"):
        assert llama_only not in body
    assert resp.usage.n_calls == 1 and srv.seen[1]["logprob_token_ids"] == body["logprob_token_ids"]


def test_the_same_server_on_chat_completions_reads_the_window_and_debug_says_so():
    model = FakeModel(WORDS, "opt40")
    question = {"q": Choice(instructions="Which option?", criteria={w: f"option {w}" for w in WORDS})}
    with ServedStub("vllm", model) as srv:
        resp = decide(srv, question, exact=False)
    readout = resp.debug["questions"]["q"]["readout"]
    assert readout["source"] == "logprobs" and len(readout["labels_missing"]) > 40
    assert "logprob_token_ids" not in srv.seen[0] and srv.seen[0]["top_logprobs"] == 20


def test_a_server_that_refuses_logprob_token_ids_is_read_on_the_window_and_debug_says_which():
    model = FakeModel(WORDS[:8], "opt03")
    question = {"q": Choice(instructions="Which option?", criteria={w: f"option {w}" for w in WORDS[:8]})}
    with ServedStub("vllm", model, refuse="logprob_token_ids") as srv:
        resp = decide(srv, question)
    q = resp.debug["questions"]["q"]
    assert q["readout"]["source"] == "logprobs"  # the window, not "logprobs:exact"
    assert resp.debug["retry_reasons"]["q"] == ["the server refuses 'logprob_token_ids'; re-asked without it"]
    assert "logprob_token_ids" in resp.debug["server_limits"]
    assert "logprob_token_ids" in srv.seen[0] and "logprob_token_ids" not in srv.seen[1]
    assert resp.answers["q"].choice == "opt03"
    assert resp.answers["q"].probabilities["opt03"] == pytest.approx(model.label_probs(WORDS[:8])["opt03"], rel=1e-6)


def test_a_server_that_ignores_logprob_token_ids_is_not_reported_as_an_exact_read():
    """A vLLM before PR #43463 drops the unknown field and answers the window: the options it leaves out are
    listed, and debug says the window was read."""
    model = FakeModel(WORDS, "opt40")
    question = {"q": Choice(instructions="Which option?", criteria={w: f"option {w}" for w in WORDS})}
    with ServedStub("vllm", model, ignore="logprob_token_ids") as srv:
        resp = decide(srv, question)
    readout = resp.debug["questions"]["q"]["readout"]
    assert "logprob_token_ids" in srv.seen[0] and resp.usage.n_calls == 1
    assert readout["source"] == "logprobs" and len(readout["labels_missing"]) > 40


def test_score_and_noul_questions_read_exactly():
    levels = [str(d) for d in range(5)]
    model = FakeModel([*levels, "yes", "no"], "3")
    with ServedStub("vllm", model) as srv:
        resp = decide(srv, {"s": Score(instructions="How urgent?", criteria=["none", "low", "mid", "high", "top"])})
    assert resp.debug["questions"]["s"]["readout"]["source"] == EXACT_SOURCE
    probs = resp.answers["s"].probabilities
    assert max(probs, key=lambda d: probs[d]) == "3"
    got = [resp.answers["s"].probabilities[d] for d in levels]
    want = model.label_probs(levels)
    assert got == pytest.approx([want[d] for d in levels], rel=1e-6)
    ids = set(srv.seen[0]["logprob_token_ids"])
    assert {model.vocab[d] for d in levels} <= ids and model.vocab["yes"] not in ids

    model = FakeModel(["yes", "no"], "no")
    with ServedStub("vllm", model) as srv:
        resp = decide(srv, {"n": Noul(instructions="Is it spam?")})
    readout = resp.debug["questions"]["n"]["readout"]
    assert readout["source"] == EXACT_SOURCE and readout["labels_missing"] == []
    assert {model.vocab["yes"], model.vocab["no"]} <= set(srv.seen[0]["logprob_token_ids"])
    z = math.exp(model.lps[model.vocab["yes"]]) + math.exp(model.lps[model.vocab["no"]])
    assert resp.answers["n"].noul == pytest.approx(math.exp(model.lps[model.vocab["yes"]]) / z, rel=1e-6)


def test_the_request_translation():
    """llama.cpp's exact fields become vLLM's; more ids than vLLM takes, or a window request, stay the window."""
    fields = {"temperature": 1.0, "top_p": 1.0, "seed": 0, "top_logprobs": 3, "logprobs": True, "max_tokens": 1,
              "logit_bias": {"7": 100, "3": 100, "5": 100}}
    extra = {"post_sampling_probs": True, "top_k": 0, "min_p": 0.0, "chat_template_kwargs": {"enable_thinking": False}}
    sent, sent_extra = exact_request(fields, extra)
    assert sent == {"temperature": 0, "top_logprobs": 20, "logprobs": True, "max_tokens": 1}
    assert sent_extra == {"chat_template_kwargs": {"enable_thinking": False}, "logprob_token_ids": [3, 5, 7]}
    many = {**fields, "logit_bias": {str(i): 100 for i in range(MAX_TOKEN_IDS + 1)}}
    assert "logprob_token_ids" not in exact_request(many, extra)[1]
    window = {"temperature": 0, "logprobs": True, "top_logprobs": 20}
    assert exact_request(window, {}) == (window, {})


def test_gpu_check_dry_run_prints_the_commands_and_runs_none(tmp_path: Any):
    """bench/gpu_check.sh --dry-run: both engines installed, started, compared at 64 concurrent, stopped."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.sh"
    work = tmp_path / "check"
    env = {"PATH": "/usr/bin:/bin", "GPU_CHECK_DIR": str(work)}
    out = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stdout.splitlines() if x.startswith("+ ")]
    text = "\n".join(lines)
    assert "pip' install -q 'vllm'" in text and "pip' install -q 'sglang'" in text
    assert "vllm serve Qwen/Qwen2.5-Coder-1.5B-Instruct --port 8000" in text and "--max-logprobs 20" in text
    assert "-m sglang.launch_server --model-path Qwen/Qwen2.5-Coder-1.5B-Instruct --port 30000" in text
    for api, port in (("vllm", 8000), ("sglang", 30000)):
        assert f"gpu_compare.py' --api {api} --base-url http://127.0.0.1:{port}/v1" in text
        assert f"curl -sf http://127.0.0.1:{port}/health" in text
    assert text.count("--concurrency 64 --quick") == 2 and lines[-1].startswith("+ cat ")
    assert not work.exists()  # nothing ran
    own = subprocess.run(["bash", str(script), "--dry-run", "--skip-install", "/models/mine"], capture_output=True,
                         text=True, env=env, timeout=30)
    assert "vllm serve /models/mine" in own.stdout and "--model-path /models/mine" in own.stdout
    assert "pip" not in own.stdout
    bad = subprocess.run(["bash", str(script), "--nope"], capture_output=True, text=True, env=env, timeout=30)
    assert bad.returncode == 2 and "unknown flag --nope" in bad.stderr
