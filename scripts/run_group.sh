#!/usr/bin/env bash
# Run a command in a process group of its own and wait for it. The first Ctrl-C (INT) or TERM reaches this
# script alone and ends the whole group at once, the command and all it started (TERM, then KILL after 2 s),
# rather than waiting on the command's own teardown. Exit status: the command's, or 130 when stopped.
#   bash scripts/run_group.sh python -m pytest ...
set -uo pipefail
pid=""
stop() {
  trap - INT TERM
  echo >&2
  echo "stopped: ending $1 and what it started" >&2
  if [ -n "$pid" ]; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  exit 130
}
trap 'stop "$1"' INT TERM
set -m   # job control: the command below gets a process group of its own
"$@" &
pid=$!
set +m
wait "$pid"
