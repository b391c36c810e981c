#!/usr/bin/env bash
# The System One clients' own environment (.venv-sysone) for tests/gateway/test_sysone_clients.py.
# They bring their own HTTP stacks (httpx2, pydantic-settings), so they live apart from .venv.
# Versions are pinned so that a new release shows up as a change here, not as a red CI run.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-sysone
pkgs=("typesafe-sdk[zstd]==0.7.5" "system-one[http]==0.4.0" "sq-system-one==0.1.1")
stamp="$venv/.sysone-$(echo "${pkgs[*]}" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install -q "${pkgs[@]}" 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "import typesafe_sdk, system_one, systemone_sq" && touch "$stamp"
fi
