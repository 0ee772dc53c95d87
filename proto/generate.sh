#!/usr/bin/env bash
# Regenerates the TypeScript for every .proto file in proto/ into proto/generated/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null; then
  echo "proto/generate.sh: protoc not found; on Debian: sudo apt-get install protobuf-compiler" >&2
  exit 1
fi
rm -rf proto/generated
mkdir -p proto/generated
protoc \
  --plugin=protoc-gen-ts_proto=./node_modules/.bin/protoc-gen-ts_proto \
  --ts_proto_out=proto/generated \
  --ts_proto_opt=outputServices=grpc-js,esModuleInterop=true,importSuffix=.js,env=both,forceLong=number,useOptionals=messages,removeEnumPrefix=true,unrecognizedEnum=false,useExactTypes=false \
  --proto_path=proto \
  proto/*.proto
