"""Times numpy on the inputs `cpu_kernels` wrote and compares its results.

Usage: python3 bench/cpu_vs_numpy.py DIR RUNS TESSERA_TIMINGS_FILE
Prints a Markdown table: Tessera ms, numpy ms, ratio, max relative error.
"""
import sys
import time

import numpy as np


def median_time(runs, f):
    f()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2] * 1e3


def gemm(a, b):
    return a @ b


def attn(q, k, v):
    s = (q @ np.swapaxes(k, -1, -2)) * np.float32(1.0 / np.sqrt(q.shape[-1]))
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return s @ v


def ln(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + np.float32(1e-5)) * gamma + beta


CASES = {
    "gemm": (gemm, ["a", "b"], "gemm 512×512×512"),
    "attn": (attn, ["q", "k", "v"], "attention (1, 8, 1024, 64)"),
    "ln": (ln, ["x", "gamma", "beta"], "layernorm (4096, 1024)"),
}


def main():
    d, runs, timings = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ours = {}
    threads = "?"
    with open(timings) as f:
        for line in f:
            name, ms, threads = line.split()
            ours[name] = float(ms)
    print(f"numpy {np.__version__}, Tessera CPU backend on {threads} threads, "
          f"median of {runs} runs, fp32")
    print()
    print("| Case | Tessera (ms) | numpy (ms) | Tessera / numpy | max rel. error |")
    print("|---|---|---|---|---|")
    for name, (f, params, label) in CASES.items():
        args = [np.load(f"{d}/{name}_{p}.npy") for p in params]
        ref = f(*[a.astype(np.float64) for a in args])
        got = np.load(f"{d}/{name}_out.npy").astype(np.float64)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        t = median_time(runs, lambda: f(*args))
        print(f"| {label} | {ours[name]:.1f} | {t:.1f} | {ours[name] / t:.2f}× | {err:.1e} |")


if __name__ == "__main__":
    main()
