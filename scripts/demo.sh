#!/usr/bin/env bash
# The demo: installs what is missing, converts Fashion-MNIST to RecordIO, starts a local cluster
# (2 trainers, 2 parameter-server shards), trains the MLP of examples/fashion-mnist-mlp.json until
# the evaluator stops the job at 85% test accuracy, and prints where the model is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prerequisites.sh
tributary() { node bin/tributary.js "$@"; }

if ! ls data/fashion-mnist/train-*.recordio >/dev/null 2>&1; then
  echo "==> converting Fashion-MNIST to RecordIO in data/fashion-mnist"
  tributary dataset convert fashion-mnist --out data/fashion-mnist
fi
echo "==> the data set"
tributary recordio inspect 'data/fashion-mnist/*.recordio' | tail -n 1

echo "==> starting a local cluster: 2 trainers, 2 pservers"
tributary up --detach --trainers 2 --pservers 2
trap 'echo "==> stopping the cluster"; tributary down' EXIT

echo "==> training (examples/fashion-mnist-mlp.json)"
tributary submit examples/fashion-mnist-mlp.json --wait
