#!/usr/bin/env bash
# Regenerates, from the vendored proto files in proto/proto/gcp/:
#   proto/tests/data/mcp_gcp.fds.bin  FileDescriptorSet (with imports, no source info)
#   proto/src/gcp/schema.rs, wkt.rs   the static descriptor tables of mcpwire-proto
# Needs grpcio-tools (its protoc and the protobuf package): PYTHON names the
# interpreter that has it, .venv/bin/python by default.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-.venv/bin/python}"
"$py" -m grpc_tools.protoc -I proto/proto/gcp --include_imports \
    --descriptor_set_out=proto/tests/data/mcp_gcp.fds.bin mcp.proto mcp_messages.proto
"$py" scripts/gcp_schema.py proto/tests/data/mcp_gcp.fds.bin \
    proto/src/gcp/schema.rs proto/src/gcp/wkt.rs
rustfmt --edition 2024 proto/src/gcp/schema.rs proto/src/gcp/wkt.rs
