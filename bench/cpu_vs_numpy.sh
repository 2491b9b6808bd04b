#!/usr/bin/env bash
# The CPU backend against numpy on the same machine, in the same run:
# gemm 512³, attention (1, 8, 1024, 64), layernorm (4096, 1024), fp32.
# numpy is installed into the ignored .tools/ folder on first use.
#
# Usage: bash bench/cpu_vs_numpy.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
py_dir=.tools/python
if ! PYTHONPATH="$py_dir" python3 -c 'import numpy' 2>/dev/null; then
    echo "installing numpy into $py_dir" >&2
    python3 -m pip install --quiet --target "$py_dir" numpy >&2
fi
cargo build --release --locked -p tessera-bench --bin cpu_kernels >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
./target/release/cpu_kernels "$work" "$runs" >"$work/tessera.txt"
PYTHONPATH="$py_dir" python3 bench/cpu_vs_numpy.py "$work" "$runs" "$work/tessera.txt"
