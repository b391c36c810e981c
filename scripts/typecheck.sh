#!/usr/bin/env bash
# mypy and pyright on the three packages and on a script made of README.md's python blocks.
# Uses (or makes) .venv-types: the project with its extras, so the frameworks' own types resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source scripts/env.sh .venv-types dev,langchain,llamaindex,serve,batch "openai<3" mypy pyright
packages=(src/jev_shared src/jev_langchain src/jev_llamaindex)
readme=$(mktemp -d)
trap 'rm -rf "$readme"' EXIT
# each python block of README.md as its own module (blocks reuse names, as separate scripts would)
python -c '
import sys
from pathlib import Path
from tests.readme_blocks import ROOT, blocks
out = Path(sys.argv[1])
for b in blocks(ROOT / "README.md"):
    if b.lang == "python":
        (out / f"readme_block_{b.line}.py").write_text(b.code, encoding="utf-8")
' "$readme"
echo "mypy: packages" >&2
mypy "${packages[@]}"
echo "mypy: README.md's python blocks" >&2
mypy --config-file pyproject.toml "$readme"
echo "pyright: packages" >&2
pyright --project pyproject.toml "${packages[@]}"
echo "pyright: README.md's python blocks" >&2
pyright --project pyproject.toml "$readme"
# a user's script outside the checkout, against the documented install: the packages resolve
# and carry their types (tests/typing/user_script.py's deliberate errors must each be caught)
user=$(mktemp -d)
trap 'rm -rf "$readme" "$user"' EXIT
cp tests/typing/user_script.py "$user/"
venv_python="$PWD/.venv-types/bin/python"
echo "mypy: a user's script outside the checkout" >&2
(cd "$user" && mypy --python-executable "$venv_python" --warn-unused-ignores --no-incremental user_script.py)
echo "pyright: a user's script outside the checkout" >&2
(cd "$user" && pyright --pythonpath "$venv_python" user_script.py)
