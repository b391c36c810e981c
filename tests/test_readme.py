"""README.md's code blocks, and those of docs/*.md that claim to run, run as written (tests/readme_blocks.py).

Python blocks marked `qwen` run as scripts on the embedded Qwen model; bash blocks marked `qwen` run as
scripts in a scratch folder (with `examples/` linked in), their `pip install` lines checked instead of run,
and a `serve` block on a free port instead of 8000 (`jev serve` and its curl calls alike). Blocks marked
`structure` are checked, not run: the demo is examples/quickstart.py, run below; the suite is this one.
Every block's `pip install` lines must name extras pyproject.toml has, from this checkout (`-e '.[...]'`),
and every `jev <command> --flag` must be a flag of that command.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib

import pytest

from tests.readme_blocks import PAGES, ROOT, TAGS, Block, all_blocks, blocks, commands, env, run_block

BLOCKS = all_blocks()
RUN = [b for b in BLOCKS if b.runs]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
TIMEOUT = 420


def marks(block: Block) -> list:
    out = [pytest.mark.live, pytest.mark.qwen] if block.runs else []
    if "llamaindex" in block.tags:
        out.append(pytest.mark.llamaindex)
    return out


# -- every block ------------------------------------------------------------------------------------------

def test_every_readme_block_says_how_it_is_tested():
    readme = blocks(ROOT / "README.md")
    assert len(readme) >= 6
    untested = [b.name for b in readme if not b.tags]
    assert not untested, f"README blocks without a <!-- readme-test: ... --> line above them: {untested}"
    for b in BLOCKS:
        assert b.tags <= TAGS, f"{b.name}: unknown tags {b.tags - TAGS}"
        assert b.runs or "structure" in b.tags or not b.tags, f"{b.name}: marked but neither run nor structure"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_install_lines_work_from_a_checkout(block):
    """`pip install 'jev-integrations[...]'` names a package that is not on PyPI: a checkout installs `-e`."""
    assert not re.search(r"pip install [^\n]*jev-integrations", block.code), \
        f"{block.name}: use pip install -e '.[extras]' from a checkout"
    for line in commands(block.code) if block.lang == "bash" else []:
        for m in re.finditer(r"-e '\.\[([a-z0-9,.-]+)\]'", line):
            unknown = set(m[1].split(",")) - EXTRAS
            assert not unknown, f"{block.name}: {line!r} names extras pyproject.toml lacks: {unknown}"


def jev_help(command: str) -> str:
    out = subprocess.run([sys.executable, "-c", "import sys; from jev_shared.cli import main; sys.exit(main())",
                          command, "--help"], capture_output=True, text=True, env=env(), timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "bash" and re.search(r"^\s*(\S+=\S+ )*jev ", b.code, re.M)],
                         ids=lambda b: b.name)
def test_jev_command_lines_use_real_flags(block):
    for line in commands(block.code):
        words = shlex.split(line.rstrip("&").strip())
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]                                   # VAR=value prefixes
        if len(words) < 2 or words[0] != "jev":
            continue
        helptext = jev_help(words[1])
        for flag in [w.split("=")[0] for w in words[2:] if w.startswith("--")]:
            assert re.search(rf"{re.escape(flag)}\b", helptext), f"{block.name}: `jev {words[1]}` has no {flag}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if "structure" in b.tags], ids=lambda b: b.name)
def test_structure_blocks_name_scripts_that_exist_and_parse(block):
    for line in commands(block.code):
        words = shlex.split(line)
        assert words[0] in ("bash", "python"), f"{block.name}: a structure block runs scripts: {line!r}"
        script = ROOT / words[1]
        assert script.is_file(), f"{block.name}: {words[1]} is missing"
        if words[0] == "bash":
            assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


# -- the blocks that run ----------------------------------------------------------------------------------

@pytest.mark.timeout(TIMEOUT + 30)
@pytest.mark.parametrize("block", [pytest.param(b, marks=marks(b), id=b.name) for b in RUN])
def test_block_runs_as_written(block, tmp_path):
    if "llamaindex" in block.tags and importlib.util.find_spec("llama_index") is None:
        pytest.skip("needs llama_index: the suite's second pass (.venv-openai2) runs it")
    if "serve" in block.tags and importlib.util.find_spec("uvicorn") is None:
        pytest.skip("needs the serve extra")
    rc, stdout, stderr = run_block(block, tmp_path, TIMEOUT)
    assert rc == 0, f"{block.name} failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr[-3000:]
    if block.expects:   # the right answer the page promises, in what the block prints
        assert re.search(block.expects, stdout + stderr, re.M), \
            f"{block.name} printed nothing matching {block.expects!r}:\n{stdout[-3000:]}\n{stderr[-3000:]}"


def test_every_readme_block_that_runs_names_the_answer_it_prints():
    """README.md's runnable blocks each say (`expects "..."`) what right answer they print, and the test checks it."""
    missing = [b.name for b in blocks(ROOT / "README.md") if b.runs and not b.expects]
    assert not missing, f"README blocks that run but name no expected output: {missing}"


def test_readme_is_short_and_its_first_code_block_is_on_the_first_screen():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(re.sub(r"```.*?```", "", text, flags=re.S).split()) <= 900
    assert text.index("```") < 1200, "the first code block is further down than a first screen"


@pytest.mark.live
@pytest.mark.qwen
@pytest.mark.timeout(TIMEOUT + 30)
def test_the_demo_decides_every_ticket(tmp_path):
    """What `bash scripts/demo.sh` runs once its environment is set up (timings: scripts/timed_lines.py)."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], cwd=tmp_path, env=env(),
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("jev demo:")
    assert sum(line.startswith("ticket ") for line in lines) == 5
    assert sum(bool(re.match(r"\s+team\s+\w+\s+p [01]\.\d\d", line)) for line in lines) == 5
    assert "Warning" not in out.stderr and "Traceback" not in out.stderr, out.stderr[-3000:]


def test_pages_are_the_readme_and_the_docs():
    assert PAGES[0].name == "README.md" and len(PAGES) > 5
