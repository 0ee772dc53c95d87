#!/usr/bin/env bash
# Runs the end-to-end and process-level specs N times in a row (default 10), one spec at a time
# as the test command does, and prints how many runs failed and which tests failed in how many
# runs. Installs and builds first, like the test command. Extra arguments go to Jest, e.g.
#   scripts/soak-tests.sh 5 test/e2e/infra-restarts.spec.ts
# Exits non-zero when any run failed. Each run's Jest output is kept in the folder it names.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
shift || true
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/soak-tests.sh [RUNS] [JEST ARGS...]  (RUNS: a positive integer, not '$runs')" >&2
  exit 2
fi
bash scripts/prerequisites.sh

SERIAL='/test/e2e/|/services/[a-z]+/test/'
out="$(mktemp -d "${TMPDIR:-/tmp}/tributary-soak-XXXXXX")"
echo "==> soak: $runs runs of the end-to-end and process-level specs; logs in $out"
start=$(date +%s)
for i in $(seq 1 "$runs"); do
  t0=$(date +%s)
  set +e
  node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js \
    --runInBand --testPathPatterns "$SERIAL" --json --outputFile="$out/run-$i.json" "$@" >"$out/run-$i.log" 2>&1
  code=$?
  set -e
  verdict=$([ "$code" -eq 0 ] && echo passed || echo FAILED)
  echo "run $i/$runs: $verdict in $(($(date +%s) - t0)) s"
done

status=0
node -e '
  const fs = require("fs");
  const [dir, runs] = [process.argv[1], Number(process.argv[2])];
  const failures = new Map();
  let failedRuns = 0, tests = 0;
  for (let i = 1; i <= runs; i++) {
    const file = `${dir}/run-${i}.json`;
    if (!fs.existsSync(file)) { failedRuns++; failures.set("(run " + i + " wrote no results)", 1); continue; }
    const r = JSON.parse(fs.readFileSync(file, "utf8"));
    tests += r.numTotalTests;
    if (!r.success) failedRuns++;
    for (const suite of r.testResults) {
      if (suite.status === "failed" && suite.assertionResults.length === 0) {
        const name = `${suite.name.replace(process.cwd() + "/", "")} (suite failed to run)`;
        failures.set(name, (failures.get(name) ?? 0) + 1);
      }
      for (const t of suite.assertionResults) {
        if (t.status !== "failed") continue;
        failures.set(t.fullName, (failures.get(t.fullName) ?? 0) + 1);
      }
    }
  }
  console.log(`soak: ${runs} runs, ${failedRuns} failed (${tests} tests run in all)`);
  for (const [name, n] of [...failures].sort((a, b) => b[1] - a[1])) console.log(`  failed in ${n} of ${runs} runs: ${name}`);
  process.exit(failedRuns > 0 ? 1 : 0);
' "$out" "$runs" || status=$?
echo "soak took $(($(date +%s) - start)) s"
exit $status
