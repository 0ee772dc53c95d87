#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, lints, and runs every test against real
# nats-server and redis-server processes that the tests start on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prerequisites.sh

echo "==> lint"
npx eslint --max-warnings=0 .

echo "==> tests"
results="$(mktemp)"
set +e
node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js \
  --maxWorkers=2 --json --outputFile="$results" "$@"
status=$?
set -e
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const skipped = r.numPendingTests + r.numTodoTests;
  console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed` + (skipped ? `, ${skipped} skipped` : ""));
  if (r.numTotalTests === 0) { console.error("no tests ran"); process.exit(1); }
' "$results" || status=1
rm -f "$results"
exit $status
