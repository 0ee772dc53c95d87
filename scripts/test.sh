#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, lints, and runs every test against real
# nats-server and redis-server processes that the tests start on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prerequisites.sh

echo "==> lint"
npx eslint --max-warnings=0 .

# Unit and integration tests run two at a time; the end-to-end and process-level ones (each starts
# a whole cluster of processes) run one at a time, so a 2-core machine is not oversubscribed.
SERIAL='/test/e2e/|/services/[a-z]+/test/'
jest() {
  node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js "$@"
}
results="$(mktemp -d)"
status=0
echo "==> tests"
jest --maxWorkers=2 --testPathIgnorePatterns "$SERIAL" --json --outputFile="$results/parallel.json" "$@" || status=1
echo "==> end-to-end and process-level tests"
jest --runInBand --testPathPatterns "$SERIAL" --json --outputFile="$results/serial.json" "$@" || status=1
node -e '
  const fs = require("fs");
  let passed = 0, failed = 0, skipped = 0, total = 0;
  for (const f of process.argv.slice(1)) {
    if (!fs.existsSync(f)) { failed += 1; continue; }
    const r = JSON.parse(fs.readFileSync(f, "utf8"));
    passed += r.numPassedTests; failed += r.numFailedTests; skipped += r.numPendingTests + r.numTodoTests;
    total += r.numTotalTests;
  }
  console.log(`tests: ${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
  if (total === 0) { console.error("no tests ran"); process.exit(1); }
' "$results/parallel.json" "$results/serial.json" || status=1
rm -rf "$results"
exit $status
