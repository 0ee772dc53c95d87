#!/usr/bin/env bash
# The demo: installs what is missing, converts Fashion-MNIST to RecordIO, starts a local cluster
# (2 trainers, 2 parameter-server shards), trains the MLP of examples/fashion-mnist-mlp.json until
# the evaluator stops the job at 85% test accuracy, and prints where the model is.
# `npm run demo -- --secure` (or TRIBUTARY_SECURE=1) runs the cluster secured (`tributary up --secure`).
set -euo pipefail
up_flags=()
if [[ "${1:-}" == "--secure" || "${TRIBUTARY_SECURE:-}" == "1" ]]; then up_flags+=(--secure); fi
cd "$(dirname "$0")/.."
bash scripts/prerequisites.sh
tributary() { node bin/tributary.js "$@"; }

if ! ls data/fashion-mnist/train-*.recordio >/dev/null 2>&1; then
  echo "==> converting Fashion-MNIST to RecordIO in data/fashion-mnist"
  tributary dataset convert fashion-mnist --out data/fashion-mnist
fi
echo "==> the data set"
tributary recordio inspect 'data/fashion-mnist/*.recordio' | tail -n 1

echo "==> starting a local cluster: 2 trainers, 2 pservers${up_flags[*]:+, secured}"
tributary up --detach --trainers 2 --pservers 2 ${up_flags[@]+"${up_flags[@]}"}
trap 'echo "==> stopping the cluster"; tributary down' EXIT

echo "==> training (examples/fashion-mnist-mlp.json)"
tributary submit examples/fashion-mnist-mlp.json --wait
