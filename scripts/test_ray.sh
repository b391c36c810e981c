#!/usr/bin/env bash
# The Ray test (examples/ray_batch.py on a local single-node Ray, ~40 s), in its own environment:
# Ray, pyarrow and pandas stay out of the main one. CI runs this once, after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh --smollm2 .venv-ray dev,local,batch,ray   # the test decides on SmolLM2
echo "== ray $(python -c 'import ray; print(ray.__version__)') =="
python -m pytest -q -p no:cacheprovider -m ray tests/batch/test_ray.py "$@"
