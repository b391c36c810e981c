#!/usr/bin/env bash
# The tests: sets itself up on first run, then runs the suite twice,
#   1. openai 3.x with LangChain (the main environment, .venv),
#   2. openai 2.x with LlamaIndex (whose OpenAI integration needs openai < 3, .venv-openai2),
#      without the Qwen tests and the gateway tests, which the first pass ran.
# The Ray test (-m ray) is skipped in both (no Ray installed); .ci/run runs it once in .venv-ray.
# Each pass ends with its ten slowest tests (--durations=10).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh .venv dev,local,qwen,qwen15,langchain,serve,batch,plots
echo "== openai $(python -c 'import openai; print(openai.__version__)') + langchain =="
python -m pytest -q -p no:cacheprovider --durations=10 "$@" --ignore=tests/llamaindex
source scripts/env.sh .venv-openai2 dev,local,llamaindex "openai<3"
echo "== openai $(python -c 'import openai; print(openai.__version__)') + llamaindex =="
# the Qwen model already ran in the first pass (its assembled file is cached and shared), but for the blocks
# that need llama_index (tests/test_readme.py)
python -m pytest -q -p no:cacheprovider --durations=10 -m "not qwen or llamaindex" "$@" --ignore=tests/langchain --ignore=tests/gateway --ignore-glob="tests/hostile/test_gateway_*"
