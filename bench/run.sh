#!/usr/bin/env bash
# Runs the benchmarks: installs and builds what is missing, converts Fashion-MNIST when needed,
# then runs the runner with the same Node.js flags as the services (see bench/run.ts).
#   bash bench/run.sh [NAME...] [--json FILE]      (npm run bench -- ...)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prerequisites.sh >/dev/null
if ! ls data/fashion-mnist/train-*.recordio >/dev/null 2>&1; then
  echo "==> converting Fashion-MNIST to RecordIO in data/fashion-mnist"
  node bin/tributary.js dataset convert fashion-mnist --out data/fashion-mnist
fi
exec node --initial-old-space-size=256 dist/bench/run.js "$@"
