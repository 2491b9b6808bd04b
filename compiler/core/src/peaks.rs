//! Per-architecture peak throughputs of a reference part, for the tuner's
//! cost model and the profiler's "fraction of peak": the figures vendors
//! publish for dense math and DRAM bandwidth.

use crate::Arch;

/// The peaks of one reference GPU of an architecture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peaks {
    /// The part the figures are of (`H100 SXM`).
    pub part: &'static str,
    /// Streaming multiprocessors.
    pub sms: u64,
    /// Dense 16-bit tensor-core math with fp32 accumulation, in TFLOP/s.
    pub tensor_tflops: f64,
    /// The fraction of [`tensor_tflops`](Self::tensor_tflops) that
    /// `mma.sync` reaches (Hopper's full rate needs `wgmma`, which kernels
    /// that take it reach whole).
    pub mma_sync_fraction: f64,
    /// fp32 FMA math (two FLOPs each), in TFLOP/s.
    pub fp32_tflops: f64,
    /// DRAM bandwidth, in GB/s.
    pub dram_gbs: f64,
    /// L2 bandwidth, in GB/s.
    pub l2_gbs: f64,
    /// L2 capacity, in bytes.
    pub l2_bytes: u64,
    /// Shared-memory bandwidth of one SM, in bytes per cycle.
    pub smem_bytes_per_clk: f64,
    /// Boost clock, in GHz.
    pub clock_ghz: f64,
}

impl Peaks {
    /// Seconds to launch one kernel and see it finish, unloaded.
    pub const LAUNCH_S: f64 = 3e-6;
}

impl Arch {
    /// The peaks of this architecture's reference part.
    pub fn peaks(&self) -> Peaks {
        let p = |part, sms, tensor_tflops, fp32_tflops, dram_gbs, l2_mib: u64, clock_ghz| Peaks {
            part,
            sms,
            tensor_tflops,
            mma_sync_fraction: 1.0,
            fp32_tflops,
            dram_gbs,
            l2_gbs: dram_gbs * 2.5,
            l2_bytes: l2_mib << 20,
            smem_bytes_per_clk: 128.0,
            clock_ghz,
        };
        match self.sm {
            ..=70 => p("V100 SXM2", 80, 125.0, 15.7, 900.0, 6, 1.53),
            71..=75 => p("T4", 40, 65.0, 8.1, 320.0, 4, 1.59),
            76..=80 => p("A100 SXM 80GB", 108, 312.0, 19.5, 2039.0, 40, 1.41),
            81..=86 => p("A10", 72, 125.0, 31.2, 600.0, 6, 1.70),
            87..=89 => p("L40S", 142, 362.0, 91.6, 864.0, 96, 2.52),
            90..=99 => Peaks {
                mma_sync_fraction: 0.66,
                ..p("H100 SXM", 132, 989.0, 67.0, 3350.0, 50, 1.98)
            },
            100..=119 => Peaks {
                mma_sync_fraction: 0.5,
                ..p("B200", 148, 2250.0, 80.0, 8000.0, 126, 1.97)
            },
            _ => p("RTX 5090", 170, 209.5, 104.8, 1792.0, 96, 2.41),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arch_has_peaks_and_hopper_needs_wgmma_for_its_full_rate() {
        for a in Arch::ALL {
            let p = a.peaks();
            assert!(p.sms > 0 && p.tensor_tflops > p.fp32_tflops && p.dram_gbs > 0.0);
        }
        // mma.sync is mma.sync on either Hopper target; wgmma kernels (sm_90a
        // only) reach the full rate.
        assert!(Arch::SM_90.peaks().mma_sync_fraction < 1.0);
        assert_eq!(
            Arch::SM_90A.peaks().mma_sync_fraction,
            Arch::SM_90.peaks().mma_sync_fraction
        );
        assert_eq!(Arch::SM_80.peaks().part, "A100 SXM 80GB");
    }
}
