"""Tessera's GPU backend against torch (cuBLAS, SDPA) and a Triton
FlashAttention kernel, on the same card, in the same run, on the same inputs.

Usage (on a machine with a GPU, torch and triton):
    python3 bench/gpu_vs_torch.py GPU_KERNELS_BINARY [RUNS] [--arch=sm_90 --arch=sm_90a ...]

Each `--arch` runs the Tessera binary once more for that PTX target (its
columns sit side by side); without one, the device's default target.

Writes the inputs as .npy into a temporary folder, runs the Tessera binary
(`cargo build --release -p tessera-bench --bin gpu_kernels`), which times
its launches with CUDA events and writes its results, then times torch and
Triton, checks Tessera's results against torch's, and prints a Markdown
table.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # the table says so
    triton = None


def median_ms(f, runs):
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


if triton is not None:

    @triton.jit
    def _attn_fwd(Q, K, V, O, qk_scale, N, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        # One program: BM query rows of one (batch, head); online softmax
        # over key blocks of BN; exp2 with log2(e) folded into the scale.
        pid_m = tl.program_id(0)
        base = tl.program_id(1).to(tl.int64) * N * D
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_d = tl.arange(0, D)
        offs_n = tl.arange(0, BN)
        q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)
        m_i = tl.full([BM], float("-inf"), tl.float32)
        l_i = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        for start in range(0, N, BN):
            kn = start + offs_n
            k = tl.load(K + base + kn[None, :] * D + offs_d[:, None], mask=kn[None, :] < N, other=0.0)
            s = tl.dot(q, k) * qk_scale
            s = tl.where(kn[None, :] < N, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + base + kn[:, None] * D + offs_d[None, :], mask=kn[:, None] < N, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        acc = acc / l_i[:, None]
        tl.store(O + base + offs_m[:, None] * D + offs_d[None, :], acc.to(O.dtype.element_ty),
                 mask=offs_m[:, None] < N)

    def triton_attention(q, k, v):
        b, h, n, d = q.shape
        o = torch.empty_like(q)
        grid = (triton.cdiv(n, 128), b * h)
        _attn_fwd[grid](q, k, v, o, (d ** -0.5) * 1.4426950408889634, n, D=d, BM=128, BN=64,
                        num_warps=4 if d == 64 else 8, num_stages=3)
        return o


def bf16(shape, gen):
    return torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16)


def run_tessera(binary, d, runs, arch):
    """Runs the Tessera binary for one PTX target (None: the device's
    default); its times, notes and results, keyed by case name."""
    env = dict(os.environ)
    if arch:
        env["TESSERA_BENCH_ARCH"] = arch
    for f in os.listdir(d):
        if f.endswith("_out.npy"):
            os.remove(os.path.join(d, f))
    proc = subprocess.run([binary, d, str(runs)], capture_output=True, text=True, env=env)
    ours, notes = {}, {}
    for line in proc.stdout.splitlines():
        if line.startswith("#"):
            print(f"[{arch or 'default'}] {line[1:].strip()}")
            continue
        head, _, note = line.partition("#")
        name, ms = head.split()
        ours[name] = float(ms)
        notes[name] = note.strip()
    if proc.returncode != 0:
        print(f"[{arch or 'default'}] the binary failed ({proc.returncode}): {proc.stderr[-2000:]}")
    results = {n: torch.from_numpy(np.load(os.path.join(d, f"{n}_out.npy"))).cuda() for n in ours}
    return ours, notes, results


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--arch=")]
    arches = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--arch=")] or [None]
    binary = args[0]
    runs = int(args[1]) if len(args) > 1 else 10
    gen = torch.Generator(device="cuda").manual_seed(0)
    cases = {}
    a, b = bf16((4096, 4096), gen), bf16((4096, 4096), gen)
    cases["gemm"] = {"a": a, "b": b}
    cases["gemm8k"] = {"a": bf16((8192, 8192), gen), "b": bf16((8192, 8192), gen)}
    e4m3 = torch.float8_e4m3fn
    cases["fp8"] = {p: torch.randn((8192, 8192), generator=gen, device="cuda").to(e4m3) for p in "xw"}
    cases["fp8acc16"] = cases["fp8"]
    for d in (64, 128):
        cases[f"attn{d}"] = {p: bf16((4, 16, 4096, d), gen) for p in "qkv"}
    cases["causal"] = {p: bf16((4, 16, 4096, 128), gen) for p in "qkv"}
    cases["sm"] = {"x": torch.randn((8192, 4096), generator=gen, device="cuda")}
    cases["ln"] = {
        "x": torch.randn((8192, 4096), generator=gen, device="cuda"),
        "gamma": torch.randn((4096,), generator=gen, device="cuda"),
        "beta": torch.randn((4096,), generator=gen, device="cuda"),
    }
    per_arch = {}
    with tempfile.TemporaryDirectory() as d:
        for name, ins in cases.items():
            for p, t in ins.items():
                np.save(os.path.join(d, f"{name}_{p}.npy"), t.float().cpu().numpy())
        for arch in arches:
            per_arch[arch] = run_tessera(binary, d, runs, arch)

    print(f"\ntorch {torch.__version__}, triton {getattr(triton, '__version__', 'absent')}, "
          f"{torch.cuda.get_device_name()}, median of {runs} runs (CUDA events)\n")
    names = [a or "Tessera" for a in arches]
    print("| Case | Reference | Reference (ms) | " + " | ".join(
        f"{n} (ms) | {n} / ref. | {n} max rel. error" for n in names) + " |")
    print("|---|---|---|" + "---|---|---|" * len(arches))

    def row(label, name, refname, f, check):
        t = median_ms(f, runs)
        want = check().float()
        cells = []
        for arch in arches:
            ours, _, results = per_arch[arch]
            if name not in ours:
                cells += ["-", "-", "-"]
                continue
            got = results[name].float()
            err = ((got - want).abs().max() / want.abs().max()).item()
            cells += [f"{ours[name]:.3f}", f"{ours[name] / t:.2f}×", f"{err:.1e}"]
        print(f"| {label} | {refname} | {t:.3f} | " + " | ".join(cells) + " |")

    for gname, n in (("gemm", 4096), ("gemm8k", 8192)):
        g = cases[gname]
        row(f"gemm {n}³ bf16", gname, "torch.matmul (cuBLAS)", lambda: g["a"] @ g["b"], lambda: g["a"] @ g["b"])
    q8 = cases["fp8"]
    one = torch.ones((), device="cuda")
    scaled = lambda: torch._scaled_mm(q8["x"], q8["w"].t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
    exact = lambda: q8["x"].float() @ q8["w"].float().t()
    row("gemm 8192³ fp8 e4m3 → fp32, fp32 accumulator", "fp8", "torch._scaled_mm (cuBLASLt)", scaled, exact)
    fast = lambda: torch._scaled_mm(q8["x"], q8["w"].t(), scale_a=one, scale_b=one, out_dtype=torch.float32,
                                    use_fast_accum=True)
    row("gemm 8192³ fp8 e4m3 → fp32, bf16 accumulator", "fp8acc16", "torch._scaled_mm, fast accumulation",
        fast, exact)
    # cuBLAS's own error against the exact product, for scale.
    extras = []
    for label, f in (("cuBLAS fp8", scaled), ("cuBLAS fp8 fast accumulation", fast)):
        want = exact()
        extras.append(f"- {label}: max rel. error {((f() - want).abs().max() / want.abs().max()).item():.1e}")
    for dd in (64, 128):
        c = cases[f"attn{dd}"]
        sdpa = lambda: F.scaled_dot_product_attention(c["q"], c["k"], c["v"])
        label = f"attention (4, 16, 4096, {dd}) bf16"
        row(label, f"attn{dd}", "torch SDPA (flash)", sdpa, sdpa)
        if triton is not None:
            row(label, f"attn{dd}", "Triton FlashAttention", lambda: triton_attention(c["q"], c["k"], c["v"]), sdpa)
    c = cases["causal"]
    sdpa = lambda: F.scaled_dot_product_attention(c["q"], c["k"], c["v"], is_causal=True)
    row("causal attention (4, 16, 4096, 128) bf16", "causal", "torch SDPA (flash)", sdpa, sdpa)
    ln = cases["ln"]
    f = lambda: F.layer_norm(ln["x"], (4096,), ln["gamma"], ln["beta"], 1e-5)
    row("layernorm (8192, 4096) fp32", "ln", "torch layer_norm", f, f)
    sm = lambda: torch.softmax(cases["sm"]["x"], dim=-1)
    row("softmax (8192, 4096) fp32", "sm", "torch softmax", sm, sm)
    print()
    print("\n".join(extras))
    for arch in arches:
        for n, note in per_arch[arch][1].items():
            print(f"- {arch or 'default'} {n}: {note}")


if __name__ == "__main__":
    main()
