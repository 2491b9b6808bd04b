"""Tessera's GPU backend against torch (cuBLAS, SDPA) and a Triton
FlashAttention kernel, on the same card, in the same run, on the same inputs.

Usage (on a machine with a GPU, torch and triton):
    python3 bench/gpu_vs_torch.py GPU_KERNELS_BINARY [RUNS]

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


def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    gen = torch.Generator(device="cuda").manual_seed(0)
    cases = {}
    a, b = bf16((4096, 4096), gen), bf16((4096, 4096), gen)
    cases["gemm"] = {"a": a, "b": b}
    for d in (64, 128):
        cases[f"attn{d}"] = {p: bf16((4, 16, 4096, d), gen) for p in "qkv"}
    cases["ln"] = {
        "x": torch.randn((8192, 4096), generator=gen, device="cuda"),
        "gamma": torch.randn((4096,), generator=gen, device="cuda"),
        "beta": torch.randn((4096,), generator=gen, device="cuda"),
    }
    with tempfile.TemporaryDirectory() as d:
        for name, ins in cases.items():
            for p, t in ins.items():
                np.save(os.path.join(d, f"{name}_{p}.npy"), t.float().cpu().numpy())
        out = subprocess.run([binary, d, str(runs)], check=True, capture_output=True, text=True).stdout
        ours, notes = {}, {}
        for line in out.splitlines():
            if line.startswith("#"):
                print(line[1:].strip())
                continue
            head, _, note = line.partition("#")
            name, ms = head.split()
            ours[name] = float(ms)
            notes[name] = note.strip()
        results = {n: torch.from_numpy(np.load(os.path.join(d, f"{n}_out.npy"))).cuda()
                   for n in ours}

    def rel(n, ref):
        got = results[n].float()
        return ((got - ref.float()).abs().max() / ref.float().abs().max()).item()

    print(f"torch {torch.__version__}, triton {getattr(triton, '__version__', 'absent')}, "
          f"{torch.cuda.get_device_name()}, median of {runs} runs (CUDA events)\n")
    print("| Case | Tessera (ms) | Reference | Reference (ms) | Tessera / reference | max rel. error |")
    print("|---|---|---|---|---|---|")

    def row(label, name, refname, f, check):
        t = median_ms(f, runs)
        err = f"{rel(name, check()):.1e}" if name in results else "-"
        mine = f"{ours[name]:.3f}" if name in ours else "-"
        ratio = f"{ours[name] / t:.2f}×" if name in ours else "-"
        print(f"| {label} | {mine} | {refname} | {t:.3f} | {ratio} | {err} |")

    g = cases["gemm"]
    row("gemm 4096³ bf16", "gemm", "torch.matmul (cuBLAS)", lambda: g["a"] @ g["b"], lambda: g["a"] @ g["b"])
    for dd in (64, 128):
        c = cases[f"attn{dd}"]
        sdpa = lambda: F.scaled_dot_product_attention(c["q"], c["k"], c["v"])
        label = f"attention (4, 16, 4096, {dd}) bf16"
        row(label, f"attn{dd}", "torch SDPA (flash)", sdpa, sdpa)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            row(label, f"attn{dd}", "torch SDPA (math)", sdpa, sdpa)
        if triton is not None:
            row(label, f"attn{dd}", "Triton FlashAttention", lambda: triton_attention(c["q"], c["k"], c["v"]), sdpa)
    ln = cases["ln"]
    f = lambda: F.layer_norm(ln["x"], (4096,), ln["gamma"], ln["beta"], 1e-5)
    row("layernorm (8192, 4096) fp32", "ln", "torch layer_norm", f, f)
    print()
    for n, note in notes.items():
        print(f"- {n}: {note}")


if __name__ == "__main__":
    main()
