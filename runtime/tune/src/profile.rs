//! The profiler (`tsrc run --profile[=trace.json]`, and `--profile` on
//! built executables): every kernel launch of every op call with its time
//! (CUDA events on a GPU, the host clock on the CPU backend, the
//! simulator's instruction counts and an issue-bound device estimate on
//! sim), grid and block, registers, shared memory, theoretical occupancy,
//! bytes moved and FLOPs (from the Schedule IR at the call's shapes, as the
//! cost model counts them), achieved GB/s and TFLOP/s and their fraction of
//! the architecture's peak. [`Profile::table`] is the per-kernel summary
//! printed on standard error; [`Profile::trace`] a Chrome/Perfetto trace
//! with a host track (op calls, their compile time, fusion decisions) and
//! a device track (one event per launch).

use std::time::Instant;
use tessera_core::{Arch, Bindings};
use tessera_graph::Graph;
use tessera_schedule::{print::source_text, Scheduled};
use tessera_tile::profile::{Clock, LaunchRecord};
use tessera_tile::TileProgram;

/// `x` with four significant digits, no exponent.
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (3 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{x:.digits$}")
}

/// One kernel launch, with what the profiler derived.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The kernel (`k0_matmul`).
    pub kernel: String,
    /// Its kind (`matmul`, `row(axis = 1)`).
    pub kind: String,
    /// Where its configuration came from (`default: ...`, `tuned: ...`).
    pub config: String,
    /// What the backend reported.
    pub record: LaunchRecord,
    /// Milliseconds of device time: measured (events), host time (CPU),
    /// or the simulator's issue-bound estimate.
    pub device_ms: f64,
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes read and written in global memory.
    pub bytes: f64,
    /// Registers per thread (the driver's, else the scheduler's estimate).
    pub regs: u64,
    /// Whether `regs` is the driver's.
    pub regs_measured: bool,
    /// Theoretical occupancy, in percent of the SM's warps.
    pub occupancy_pct: u64,
    /// Whether its products run on tensor cores (for the peak).
    pub tensor: bool,
    /// Whether they run on warpgroup MMA (Hopper's full tensor rate; else
    /// `mma.sync`'s share of it).
    pub wgmma: bool,
}

impl Launch {
    /// Achieved bandwidth, in GB/s.
    pub fn gbs(&self) -> f64 {
        self.bytes / (self.device_ms * 1e-3).max(1e-12) / 1e9
    }

    /// Achieved math, in TFLOP/s.
    pub fn tflops(&self) -> f64 {
        self.flops / (self.device_ms * 1e-3).max(1e-12) / 1e12
    }
}

/// One op call: its compilation and its launches.
#[derive(Clone, Debug)]
pub struct Call {
    /// The op or kernel.
    pub op: String,
    /// When it began.
    pub start: Instant,
    /// Milliseconds spent compiling (scheduling, lowering; PTX on a device
    /// is compiled when the launches are prepared, and counted in `ms`).
    pub compile_ms: f64,
    /// Milliseconds from the call to its results.
    pub ms: f64,
    /// Fusion decisions.
    pub fusion: Vec<String>,
    /// Its launches.
    pub launches: Vec<Launch>,
}

/// Everything profiled in one run.
#[derive(Clone, Debug)]
pub struct Profile {
    /// `cuda`, `sim` or `cpu`.
    pub backend: &'static str,
    /// The architecture kernels were scheduled for (peaks, occupancy).
    pub arch: &'static Arch,
    /// When the run began.
    pub epoch: Instant,
    /// The op calls, in order.
    pub calls: Vec<Call>,
}

impl Profile {
    /// An empty profile of a run on `backend` for `arch`.
    pub fn new(backend: &'static str, arch: &'static Arch) -> Profile {
        Profile {
            backend,
            arch,
            epoch: Instant::now(),
            calls: Vec::new(),
        }
    }

    /// Records one call of graph `g`, scheduled as `s` and lowered to
    /// `tile`, at `bindings`: it began at `start`, finished compiling at
    /// `compiled` and ended at `end`, with these launches.
    pub fn add_call(
        &mut self,
        g: &Graph,
        s: &Scheduled,
        tile: &TileProgram,
        bindings: &Bindings,
        (start, compiled, end): (Instant, Instant, Instant),
        records: Vec<LaunchRecord>,
    ) {
        let arch = self.arch;
        let peaks = arch.peaks();
        let launches = records
            .into_iter()
            .map(|r| {
                let name = tile
                    .kernels
                    .get(r.kernel)
                    .map(|k| k.name.clone())
                    .unwrap_or_default();
                let sk = s.schedule.kernels.iter().find(|k| k.name == name);
                let regs_measured = r.registers.is_some();
                let est = sk.and_then(|k| {
                    crate::model::kernel(g, k, bindings, arch, r.registers.map(u64::from), None)
                        .ok()
                });
                let regs = r
                    .registers
                    .map(u64::from)
                    .or(sk.map(|k| k.estimates.regs_per_thread))
                    .unwrap_or(32);
                let occupancy_pct = arch
                    .residency(u64::from(r.threads.div_ceil(32)), regs, r.shared_bytes)
                    .occupancy_pct;
                let device_ms = match (r.clock, r.sim) {
                    (Clock::Sim, Some(c)) => {
                        // Four warp-instructions a cycle per SM, or one
                        // shared-memory wavefront, whichever binds, on as
                        // many SMs as there are programs; no kernel
                        // finishes faster than a launch.
                        let programs: u64 = r.grid.iter().map(|&n| u64::from(n)).product();
                        let sms = programs.clamp(1, peaks.sms) as f64;
                        let cycles = (c.warp_instructions as f64 / 4.0)
                            .max(c.shared_wavefronts as f64)
                            / sms;
                        (cycles / (peaks.clock_ghz * 1e9) + tessera_core::Peaks::LAUNCH_S) * 1e3
                    }
                    _ => r.ms,
                };
                Launch {
                    kind: sk.map(|k| k.kind.name()).unwrap_or_default(),
                    config: sk.map(|k| source_text(&s.schedule, k)).unwrap_or_default(),
                    kernel: name,
                    device_ms,
                    flops: est.as_ref().map_or(0.0, |e| e.flops),
                    bytes: est.as_ref().map_or(0.0, |e| e.bytes),
                    regs,
                    regs_measured,
                    occupancy_pct,
                    tensor: sk.is_some_and(|k| crate::model::uses_tensor_cores(g, k)),
                    wgmma: sk.is_some_and(|k| {
                        crate::model::uses_tensor_cores(g, k) && k.takes_wgmma(self.arch)
                    }),
                    record: r,
                }
            })
            .collect();
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
        self.calls.push(Call {
            op: g.name.clone(),
            start,
            compile_ms: ms(start, compiled),
            ms: ms(start, end),
            fusion: s.trace.clone(),
            launches,
        });
    }

    /// The fraction of the architecture's peak a launch reached: of its
    /// math or of DRAM bandwidth, whichever is higher; `None` on the CPU.
    pub fn peak_fraction(&self, l: &Launch) -> Option<f64> {
        if self.backend == "cpu" {
            return None;
        }
        let p = self.arch.peaks();
        let math = if l.wgmma {
            p.tensor_tflops
        } else if l.tensor {
            p.tensor_tflops * p.mma_sync_fraction
        } else {
            p.fp32_tflops
        };
        Some((l.tflops() / math).max(l.gbs() / p.dram_gbs))
    }

    /// The per-kernel summary (like `nsys stats`): calls, total, average,
    /// minimum and maximum time, grid and block, registers, shared memory,
    /// occupancy, achieved GB/s and TFLOP/s and the fraction of peak.
    pub fn table(&self) -> String {
        let launches: Vec<(&Call, &Launch)> = self
            .calls
            .iter()
            .flat_map(|c| c.launches.iter().map(move |l| (c, l)))
            .collect();
        let total: f64 = launches.iter().map(|(_, l)| l.device_ms).sum();
        let clock = match self.backend {
            "cuda" => "device time by CUDA events",
            "sim" => "device time estimated from the simulator's instruction counts",
            _ => "host time of the CPU backend",
        };
        let mut out = format!(
            "profile: {} launch{} in {} op call{} on {} ({}, {}): {:.3} ms\n",
            launches.len(),
            if launches.len() == 1 { "" } else { "es" },
            self.calls.len(),
            if self.calls.len() == 1 { "" } else { "s" },
            self.backend,
            self.arch.name,
            clock,
            total
        );
        // Group by op and kernel, in first-launch order.
        let mut groups: Vec<((String, String), Vec<&Launch>)> = Vec::new();
        for (c, l) in &launches {
            let key = (c.op.clone(), l.kernel.clone());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(l),
                None => groups.push((key, vec![l])),
            }
        }
        out.push_str(&format!(
            "{:>6} {:>5} {:>10} {:>9} {:>9} {:>9}  {:<22} {:<18} {:>5} {:>7} {:>4} {:>9} {:>8} {:>6}\n",
            "time%", "calls", "total ms", "avg ms", "min ms", "max ms", "op/kernel", "grid x block", "regs",
            "smem", "occ%", "GB/s", "TFLOP/s", "%peak"
        ));
        for ((op, kernel), ls) in &groups {
            let sum: f64 = ls.iter().map(|l| l.device_ms).sum();
            let min = ls.iter().map(|l| l.device_ms).fold(f64::INFINITY, f64::min);
            let max = ls.iter().map(|l| l.device_ms).fold(0.0, f64::max);
            let first = ls[0];
            let (bytes, flops): (f64, f64) = ls
                .iter()
                .map(|l| (l.bytes, l.flops))
                .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
            let secs = (sum * 1e-3).max(1e-12);
            let agg = Launch {
                device_ms: sum,
                bytes,
                flops,
                ..first.clone()
            };
            let g = first.record.grid;
            let peak = self
                .peak_fraction(&agg)
                .map_or("-".to_owned(), |f| format!("{:.1}", f * 100.0));
            out.push_str(&format!(
                "{:>6.1} {:>5} {:>10} {:>9} {:>9} {:>9}  {:<22} {:<18} {:>4}{} {:>7} {:>4} {:>9} {:>8} {:>6}\n",
                100.0 * sum / total.max(1e-12),
                ls.len(),
                sig(sum),
                sig(sum / ls.len() as f64),
                sig(min),
                sig(max),
                format!("{op}/{kernel}"),
                format!("[{},{},{}]x{}", g[0], g[1], g[2], first.record.threads),
                first.regs,
                if first.regs_measured { " " } else { "~" },
                first.record.shared_bytes,
                first.occupancy_pct,
                sig(bytes / secs / 1e9),
                sig(flops / secs / 1e12),
                peak
            ));
        }
        // Where each kernel's configuration came from (tuned, schedule,
        // default), once per op/kernel.
        for ((op, kernel), ls) in &groups {
            if !ls[0].config.is_empty() {
                out.push_str(&format!("{op}/{kernel}: {}\n", ls[0].config));
            }
        }
        if launches.iter().any(|(_, l)| !l.regs_measured) {
            out.push_str("(regs~: the scheduler's estimate; the driver reports them on a GPU)\n");
        }
        if self.backend == "sim" {
            let (w, b) = launches.iter().fold((0, 0), |a, (_, l)| {
                let c = l.record.sim.unwrap_or_default();
                (a.0 + c.warp_instructions, a.1 + c.bank_conflicts)
            });
            out.push_str(&format!(
                "simulator: {w} warp-instructions, {b} shared-memory bank-conflict wavefronts\n"
            ));
        }
        out
    }

    /// The Chrome/Perfetto trace (JSON): a host track with one event per
    /// op call (its compile time a nested event, its fusion decisions in
    /// its arguments) and a device track with one event per launch.
    pub fn trace(&self) -> String {
        let us = |t: Instant| t.saturating_duration_since(self.epoch).as_secs_f64() * 1e6;
        let mut events = vec![
            serde_json::json!({"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "host"}}),
            serde_json::json!({"name": "process_name", "ph": "M", "pid": 2, "tid": 1,
                "args": {"name": format!("device ({}, {})", self.backend, self.arch.name)}}),
        ];
        for c in &self.calls {
            events.push(serde_json::json!({
                "name": c.op, "cat": "op", "ph": "X", "pid": 1, "tid": 1,
                "ts": us(c.start), "dur": c.ms * 1e3,
                "args": {"compile_ms": c.compile_ms, "launches": c.launches.len(), "fusion": c.fusion},
            }));
            events.push(serde_json::json!({
                "name": "compile", "cat": "compile", "ph": "X", "pid": 1, "tid": 1,
                "ts": us(c.start), "dur": c.compile_ms * 1e3,
            }));
            for l in &c.launches {
                let r = &l.record;
                events.push(serde_json::json!({
                    "name": l.kernel, "cat": "kernel", "ph": "X", "pid": 2, "tid": 1,
                    "ts": us(r.start), "dur": l.device_ms * 1e3,
                    "args": {
                        "op": c.op, "kind": l.kind, "config": l.config,
                        "grid": r.grid, "block": r.threads, "registers": l.regs,
                        "registers_measured": l.regs_measured, "shared_bytes": r.shared_bytes,
                        "occupancy_pct": l.occupancy_pct, "bytes": l.bytes, "flops": l.flops,
                        "gb_per_s": l.gbs(), "tflop_per_s": l.tflops(),
                        "peak_fraction": self.peak_fraction(l),
                        "host_ms": r.ms,
                        "sim": r.sim.map(|s| serde_json::json!({
                            "warp_instructions": s.warp_instructions,
                            "thread_instructions": s.thread_instructions,
                            "shared_wavefronts": s.shared_wavefronts,
                            "bank_conflicts": s.bank_conflicts,
                        })),
                    },
                }));
            }
        }
        let trace = serde_json::json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "metadata": {
                "backend": self.backend,
                "arch": self.arch.name,
                "compiler": tessera_launch::compiler_id(),
            },
        });
        serde_json::to_string_pretty(&trace).unwrap_or_default() + "\n"
    }
}
