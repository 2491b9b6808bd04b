#!/usr/bin/env bash
# One batched GPU session: the CUDA backend's correctness against the CPU
# (driver tests; the bench against cuBLAS, torch SDPA and Triton, which
# checks each result against torch's; the numerics, policy, layer and
# selection suites on sm_90 and sm_90a; every example on cuda against cpu),
# a memory check of the sm_90a path, profiling and tuning on the GPU.
#
# The device machine has no Rust toolchain: build here, copy the binaries
# into an ignored folder, carry it, and run this script there:
#
#     bash bench/gpu_check.sh prepare          # here: builds into .dev/
#     bash bench/gpu_check.sh run [RUNS] [all] # there: needs .dev/ and $OUT
#
# With `all`, every program of tests/run/ok also runs on cuda against cpu
# (a few minutes more).
#
#! Everything it prints is also written under $OUT (or /tmp/gpu_check).
set -u
mode=${1:-run}
dev=.dev

if [ "$mode" = prepare ]; then
    set -e
    cargo build --release -q -p tsrc --bin tsrc
    cargo build --release -q -p tessera-bench --bin gpu_kernels
    mkdir -p "$dev"
    grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >>.git/info/exclude
    cp target/release/tsrc target/release/gpu_kernels "$dev/"
    # Test binaries: the last line cargo prints for each names its path.
    for spec in "tessera-cuda gpu" "tessera-cuda gpu_fault" "tessera-tests numerics" "tessera-tests policies" "tessera-tests layers" "tessera-tests selection"; do
        set -- $spec
        path=$(cargo test --release --no-run -p "$1" --test "$2" 2>&1 |
            sed -n 's/.*Executable.*(\(.*\)).*/\1/p' | tail -1)
        cp "$path" "$dev/$2"
    done
    strip "$dev"/* 2>/dev/null || true
    # What travels is limited to 64 MiB: tsrc goes compressed.
    xz -T2 -6 -f "$dev/tsrc"
    du -sh "$dev"
    exit 0
fi

runs=${2:-20}
extent=${3:-}
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
# Test binaries built here look for sources under the path they were built at.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
if [ -e "$dev/tsrc.xz" ]; then
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
        "$dev/tsrc.xz" "$dev/tsrc" && chmod +x "$dev/tsrc"
fi
export PYTHONUNBUFFERED=1 TESSERA_CACHE_DIR=/tmp/tessera-cache NO_COLOR=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
log() { echo; echo "== $* ($(date +%T))"; }
{
    log device
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv

    log "driver tests (tessera-cuda)"
    timeout 120 "$dev/gpu" --ignored --test-threads=1 2>&1 | grep -E "^test |test result"
    timeout 60 "$dev/gpu_fault" --nocapture 2>&1 | grep -vE "^$|^running"

    log "bench against cuBLAS, torch and Triton"
    timeout 240 python3 bench/gpu_vs_torch.py "$dev/gpu_kernels" "$runs" --arch=sm_90 --arch=sm_90a 2>&1 |
        tee "$out/bench.md"

    for arch in sm_90 sm_90a; do
        for suite in numerics policies layers selection; do
            log "$suite on cuda, $arch"
            TESSERA_TEST_BACKEND=cuda TESSERA_TEST_ARCH=$arch timeout 90 "$dev/$suite" --skip _sim 2>&1 |
                grep -vE "^test .* ok$|^$|^stack backtrace|^note: " | head -40
        done
    done

    log "examples: cuda against cpu"
    for f in examples/*.tsr; do
        [ "$f" = examples/sharded_mlp.tsr ] && continue
        timeout 60 "$dev/tsrc" run --backend cpu "$f" >"$out/cpu.txt" 2>&1
        for arch in sm_90 sm_90a; do
            timeout 60 "$dev/tsrc" run --backend cuda --arch $arch "$f" >"$out/gpu.txt" 2>&1
            rc=$?
            if cmp -s "$out/cpu.txt" "$out/gpu.txt"; then
                echo "$f $arch: same output"
            else
                echo "$f $arch: rc $rc, differs:"
                diff "$out/cpu.txt" "$out/gpu.txt" | head -12
            fi
        done
    done

    if [ "$extent" = all ]; then
        log "tests/run/ok: cuda against cpu"
        same=0
        for f in tests/run/ok/*.tsr; do
            timeout 60 "$dev/tsrc" run --backend cpu "$f" >"$out/cpu.txt" 2>&1
            timeout 60 "$dev/tsrc" run --backend cuda "$f" >"$out/gpu.txt" 2>&1
            if cmp -s "$out/cpu.txt" "$out/gpu.txt"; then
                same=$((same + 1))
            else
                echo "$f differs:"
                diff "$out/cpu.txt" "$out/gpu.txt" | head -6
            fi
        done
        echo "$same programs print the same on cuda and cpu"
    fi

    log "compute-sanitizer memcheck, sm_90a"
    for f in examples/causal_attn.tsr examples/matmul.tsr; do
        timeout 60 compute-sanitizer --tool memcheck "$dev/tsrc" run --no-cache --backend cuda --arch sm_90a "$f" 2>&1 | tail -3
    done

    log "profile and tune on the GPU"
    timeout 60 "$dev/tsrc" run --backend cuda --profile examples/flash_attn.tsr 2>&1 | tail -12
    timeout 90 "$dev/tsrc" tune --backend cuda --arch sm_90a --top 4 examples/matmul.tsr 2>&1 | tail -20
} 2>&1 | tee "$out/check.log"
