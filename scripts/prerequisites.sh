#!/usr/bin/env bash
# Installs what Tributary needs and is missing: nats-server, redis-server, the Fashion-MNIST
# data set and Chromium (for the dashboard's browser test) from Debian's packages, the npm
# dependencies, and the compiled TypeScript.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ "${#need[@]}" -gt 0 ]; then
  echo "==> installing Debian packages: ${need[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "==> installing npm dependencies"
  # `npm install` with the committed lock file, not `npm ci`: the registry may lack some
  # platforms' optional binaries that the lock file would otherwise have to list.
  npm install --no-audit --no-fund --loglevel=error
fi

echo "==> building"
npm run --silent build
