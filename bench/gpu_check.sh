#!/usr/bin/env bash
# The served engines on a GPU machine: vLLM and SGLang, the labels' own token ids read against the window.
#
#   bench/gpu_check.sh [--dry-run] [--skip-install] [MODEL]
#
# MODEL: a Hugging Face name or a local path (default Qwen/Qwen2.5-Coder-1.5B-Instruct). Each engine gets a venv
# of its own under $GPU_CHECK_DIR (default /tmp/jev-gpu-check) with this checkout installed in it, is started on
# the GPU, answers every 5th item of bench/quality.py's four questions at 64 concurrent requests, exact readout
# and window (bench/gpu_compare.py), and is stopped; the rows print as one table. The decisions take a few
# minutes (under 10 with both engines); the installs and model downloads come before them and are skipped with
# --skip-install when the venvs exist. --dry-run prints every command and runs none.
# Versions: VLLM_SPEC (default: the newest vllm; logprob_token_ids on Chat Completions needs a release with vLLM
# PR #43463, May 2026) and SGLANG_SPEC (default: the newest sglang); set either to pin one. PYTHON: the
# interpreter the venvs are made with (default python3; this package needs 3.11 or newer).
set -euo pipefail

MODEL="Qwen/Qwen2.5-Coder-1.5B-Instruct"
DRY=0
INSTALL=1
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --skip-install) INSTALL=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "gpu_check.sh: unknown flag $arg (see --help)" >&2; exit 2 ;;
    *) MODEL="$arg" ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${GPU_CHECK_DIR:-/tmp/jev-gpu-check}"
VLLM_SPEC="${VLLM_SPEC:-vllm}"
SGLANG_SPEC="${SGLANG_SPEC:-sglang}"
PYTHON="${PYTHON:-python3}"
NAME="jev-check"  # the served model name both engines answer to
CONCURRENCY=64
PIDS=()

run() {  # print a command; run it unless --dry-run
  echo "+ $*"
  if [ "$DRY" = 0 ]; then eval "$@"; fi
}

stop_servers() {
  for pid in "${PIDS[@]:-}"; do
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  PIDS=()
}
trap stop_servers EXIT

wait_ready() {  # wait_ready PORT: the server's /health answers (at most 10 minutes: a first download)
  run "for i in \$(seq 1 300); do curl -sf http://127.0.0.1:$1/health >/dev/null && break; sleep 2; done; curl -sf http://127.0.0.1:$1/health >/dev/null"
}

start() {  # start LOG COMMAND...: in the background, its pid kept for stop_servers
  local log="$1"; shift
  echo "+ $* > $log 2>&1 &"
  if [ "$DRY" = 0 ]; then "$@" >"$log" 2>&1 & PIDS+=("$!"); fi
}

run "mkdir -p '$WORK'"
if [ "$INSTALL" = 1 ]; then
  run "$PYTHON -m venv '$WORK/vllm' && '$WORK/vllm/bin/pip' install -q '$VLLM_SPEC' -e '$ROOT'"
  run "$PYTHON -m venv '$WORK/sglang' && '$WORK/sglang/bin/pip' install -q '$SGLANG_SPEC' -e '$ROOT'"
fi

start "$WORK/vllm.log" "$WORK/vllm/bin/vllm" serve "$MODEL" --port 8000 --served-model-name "$NAME" \
  --max-logprobs 20 --max-model-len 4096 --gpu-memory-utilization 0.5
wait_ready 8000
run "'$WORK/vllm/bin/python' '$ROOT/bench/gpu_compare.py' --api vllm --base-url http://127.0.0.1:8000/v1 --model $NAME --concurrency $CONCURRENCY --quick --header > '$WORK/table.md'"
stop_servers

start "$WORK/sglang.log" "$WORK/sglang/bin/python" -m sglang.launch_server --model-path "$MODEL" --port 30000 \
  --served-model-name "$NAME" --context-length 4096 --mem-fraction-static 0.5
wait_ready 30000
run "'$WORK/sglang/bin/python' '$ROOT/bench/gpu_compare.py' --api sglang --base-url http://127.0.0.1:30000/v1 --model $NAME --concurrency $CONCURRENCY --quick >> '$WORK/table.md'"
stop_servers

run "cat '$WORK/table.md'"
