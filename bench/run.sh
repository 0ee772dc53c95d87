#!/usr/bin/env bash
# Runs the benchmarks. Each one measures its own baseline in the same run and prints ratios
# against it, so results compare across machines. Usage: bash bench/run.sh [name...]
# (names: recordio, learner, chaos). Extra settings through each benchmark's own flags; see
# the comment at the top of bench/<name>/*.ts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prerequisites.sh >/dev/null
names=("$@")
[ "${#names[@]}" -gt 0 ] || names=(recordio learner)
for name in "${names[@]}"; do
  case "$name" in
    recordio) echo "==> RecordIO read throughput vs. a plain sequential read"; node dist/bench/recordio/read-throughput.js ;;
    learner) echo "==> learner train step, samples/s per TF.js backend"; node dist/bench/learner/train-step.js ;;
    chaos) echo "==> chaos: random kills, time to recover"; node dist/bench/chaos/run.js --minutes "${CHAOS_MINUTES:-5}" --seed "${CHAOS_SEED:-1}" ;;
    *) echo "unknown benchmark: $name (recordio, learner, chaos)" >&2; exit 2 ;;
  esac
done
