#!/usr/bin/env bash
# The main job: decide a handful of support tickets. Sets itself up on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "jev demo: setting up (a fresh checkout installs .venv first) ..."
source scripts/env.sh .venv dev,local,langchain   # local: the server and the default model (Qwen2.5-Coder-1.5B)
exec python examples/quickstart.py "$@"
