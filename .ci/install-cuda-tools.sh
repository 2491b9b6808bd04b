#!/usr/bin/env bash
# Installs the CUDA command-line tools that the PTX tests need (ptxas, cuobjdump, nvdisasm)
# from PyPI into .tools/cuda. No GPU and no CUDA toolkit are needed: these are plain
# x86-64 Linux binaries shipped inside wheels.
#
# Idempotent: when the pinned versions are installed and ptxas runs, it does nothing.
# Prints the path of ptxas on its last line (the crate tessera-cuda finds it there too).
set -euo pipefail

cd "$(dirname "$0")/.."
root="$PWD"
target="$root/.tools/cuda"

# Pinned so that every machine (developers, CI) assembles with the same ptxas.
nvcc_pkg="nvidia-cuda-nvcc-cu12==12.9.86"
cuobjdump_pkg="nvidia-cuda-cuobjdump==13.5.37"
nvdisasm_pkg="nvidia-cuda-nvdisasm==13.5.37"
stamp="$target/.installed"
wanted="$nvcc_pkg $cuobjdump_pkg $nvdisasm_pkg"

# Prints the first executable named $1 under the install folder, if any.
find_tool() {
    find "$target" -type f -name "$1" -perm -u+x 2>/dev/null | sort | head -n 1
}

ptxas_runs() {
    local ptxas
    ptxas="$(find_tool ptxas)"
    [ -n "$ptxas" ] && "$ptxas" --version >/dev/null 2>&1
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && ptxas_runs \
    && [ -n "$(find_tool cuobjdump)" ]; then
    echo "CUDA tools already installed in $target" >&2
else
    echo "Installing $wanted into $target" >&2
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --upgrade \
        --target "$target" $wanted
    # Wheels do not always keep the executable bit of their binaries.
    for tool in ptxas cuobjdump nvdisasm nvlink fatbinary; do
        find "$target" -type f -name "$tool" -path '*/bin/*' -exec chmod +x {} +
    done
    if ! ptxas_runs; then
        echo "error: ptxas was not installed or does not run" >&2
        exit 1
    fi
    echo "$wanted" >"$stamp"
fi

ptxas="$(find_tool ptxas)"
cuobjdump="$(find_tool cuobjdump)"
"$ptxas" --version | tail -n 1 >&2
echo "cuobjdump: $cuobjdump" >&2
echo "$ptxas"
