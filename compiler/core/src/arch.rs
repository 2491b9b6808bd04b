//! NVIDIA architectures: one [`Arch`] value per target, built once from its
//! name, with the hardware's limits (seed table A.2 and the CUDA occupancy
//! tables) and the capabilities the compiler asks about. Every question of
//! the form "does this target have X?" is a flag here, never a comparison
//! of names.

use std::fmt;

/// One compilation target (`sm_80`, `sm_90a`, ...): its limits and
/// capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    /// The target name as PTX spells it: `sm_90`, `sm_90a`.
    pub name: &'static str,
    /// Compute capability times ten: 90 for `sm_90` and `sm_90a`.
    pub sm: u32,
    /// Whether this is an architecture-specific target (the `a` suffix):
    /// its code runs only on that exact architecture.
    pub arch_specific: bool,
    /// The oldest PTX ISA version whose `.target` accepts this name.
    pub ptx_isa: (u32, u32),
    /// Most shared memory one block may use, in bytes.
    pub smem_per_block: u64,
    /// Shared memory per SM, in bytes.
    pub smem_per_sm: u64,
    /// The performance guide's recommended budget per block (seed A.2).
    pub smem_guideline: Option<u64>,
    /// Resident warps per SM.
    pub max_warps: u64,
    /// Resident blocks per SM.
    pub max_blocks: u64,
    /// 32-bit registers per SM.
    pub regs_per_sm: u64,
    /// Most registers one thread may use.
    pub max_regs_per_thread: u64,
    /// Most threads in one block.
    pub max_threads_per_block: u64,
    /// `ldmatrix` (sm_75 and newer).
    pub has_ldmatrix: bool,
    /// `cp.async` global-to-shared copies (sm_80 and newer).
    pub has_cp_async: bool,
    /// `mma.sync` with bf16 and tf32 operands (sm_80 and newer).
    pub has_mma_bf16: bool,
    /// `mma.sync` with fp8 (e4m3/e5m2) operands and the fp8 conversions
    /// (sm_89 and newer).
    pub has_mma_fp8: bool,
    /// `cvt.rn.tf32.f32`, rounding to tf32 with ties to even (sm_90 and
    /// newer; older targets only have `cvt.rna`).
    pub has_cvt_rn_tf32: bool,
    /// The Tensor Memory Accelerator: `cp.async.bulk.tensor` with tensor
    /// maps, and `mbarrier` transaction counts (sm_90 and newer).
    pub has_tma: bool,
    /// Thread-block clusters and distributed shared memory (sm_90 and
    /// newer).
    pub has_clusters: bool,
    /// Warpgroup MMA, `wgmma.mma_async`, and `setmaxnreg` (sm_90a only:
    /// architecture-specific).
    pub has_wgmma: bool,
}

/// The limits every target from sm_70 on shares.
const BASE: Arch = Arch {
    name: "",
    sm: 0,
    arch_specific: false,
    ptx_isa: (6, 0),
    smem_per_block: 0,
    smem_per_sm: 0,
    smem_guideline: None,
    max_warps: 64,
    max_blocks: 32,
    regs_per_sm: 65536,
    max_regs_per_thread: 255,
    max_threads_per_block: 1024,
    has_ldmatrix: false,
    has_cp_async: false,
    has_mma_bf16: false,
    has_mma_fp8: false,
    has_cvt_rn_tf32: false,
    has_tma: false,
    has_clusters: false,
    has_wgmma: false,
};

impl Arch {
    /// Volta.
    pub const SM_70: Arch = Arch {
        name: "sm_70",
        sm: 70,
        smem_per_block: 96 << 10,
        smem_per_sm: 96 << 10,
        ..BASE
    };
    /// Turing.
    pub const SM_75: Arch = Arch {
        name: "sm_75",
        sm: 75,
        ptx_isa: (6, 3),
        smem_per_block: 64 << 10,
        smem_per_sm: 64 << 10,
        max_warps: 32,
        max_blocks: 16,
        has_ldmatrix: true,
        ..BASE
    };
    /// Ampere data centre (A100).
    pub const SM_80: Arch = Arch {
        name: "sm_80",
        sm: 80,
        ptx_isa: (7, 0),
        smem_per_block: 163 << 10,
        smem_per_sm: 164 << 10,
        has_ldmatrix: true,
        has_cp_async: true,
        has_mma_bf16: true,
        ..BASE
    };
    /// Ampere consumer parts.
    pub const SM_86: Arch = Arch {
        name: "sm_86",
        sm: 86,
        ptx_isa: (7, 1),
        smem_per_block: 99 << 10,
        smem_per_sm: 100 << 10,
        max_warps: 48,
        max_blocks: 16,
        ..Arch::SM_80
    };
    /// Ada.
    pub const SM_89: Arch = Arch {
        name: "sm_89",
        sm: 89,
        ptx_isa: (7, 8),
        max_blocks: 24,
        has_mma_fp8: true,
        ..Arch::SM_86
    };
    /// Hopper, portable subset.
    pub const SM_90: Arch = Arch {
        name: "sm_90",
        sm: 90,
        ptx_isa: (7, 8),
        smem_per_block: 227 << 10,
        smem_per_sm: 228 << 10,
        smem_guideline: Some(96 << 10),
        max_warps: 64,
        max_blocks: 32,
        has_cvt_rn_tf32: true,
        has_tma: true,
        has_clusters: true,
        ..Arch::SM_89
    };
    /// Hopper with its architecture-specific instructions (wgmma).
    pub const SM_90A: Arch = Arch {
        name: "sm_90a",
        arch_specific: true,
        ptx_isa: (8, 0),
        has_wgmma: true,
        ..Arch::SM_90
    };
    /// Blackwell data centre, on the instructions it shares with sm_90.
    pub const SM_100: Arch = Arch {
        name: "sm_100",
        sm: 100,
        ptx_isa: (8, 6),
        smem_guideline: Some(128 << 10),
        ..Arch::SM_90
    };
    /// Blackwell consumer parts.
    pub const SM_120: Arch = Arch {
        name: "sm_120",
        sm: 120,
        ptx_isa: (8, 7),
        smem_per_block: 99 << 10,
        smem_per_sm: 100 << 10,
        smem_guideline: None,
        max_warps: 48,
        max_blocks: 24,
        has_tma: true,
        has_clusters: true,
        ..Arch::SM_89
    };

    /// Every target `schedule ... on ARCH` and `--arch` accept, oldest first.
    pub const ALL: &'static [Arch] = &[
        Arch::SM_70,
        Arch::SM_75,
        Arch::SM_80,
        Arch::SM_86,
        Arch::SM_89,
        Arch::SM_90,
        Arch::SM_90A,
        Arch::SM_100,
        Arch::SM_120,
    ];

    /// The target named `name`, if known.
    pub fn from_name(name: &str) -> Option<&'static Arch> {
        Arch::ALL.iter().find(|a| a.name == name)
    }

    /// Whether a tensor-core product of 16-bit operands, an `[m, n]` tile
    /// over `k` computed by `warps` warps, runs on warpgroup MMA
    /// (`wgmma`) here: whole warpgroups, each warp owning 16 rows, `n` a
    /// multiple of 8 and `k` of 16. The PTX back end takes this path for
    /// such products whose operands are staged in shared memory; the
    /// Schedule IR reports it.
    pub fn wgmma_fits(&self, warps: u64, m: u64, n: u64, k: u64) -> bool {
        self.has_wgmma
            && warps.is_multiple_of(4)
            && m == 16 * warps
            && n.is_multiple_of(8)
            && k.is_multiple_of(16)
    }

    /// The portable target an architecture-specific one extends
    /// (`sm_90` for `sm_90a`); the target itself when it is portable. Code
    /// and schedules written for the portable target apply to it too.
    pub fn portable(&self) -> &'static Arch {
        Arch::ALL
            .iter()
            .find(|a| !a.arch_specific && a.sm == self.sm)
            .or_else(|| Arch::from_name(self.name))
            .unwrap_or(&Arch::ALL[0])
    }

    /// The portable target a device of compute capability `major.minor`
    /// runs best: the newest known target (without the `a` suffix, whose
    /// code runs on that exact architecture only) not newer than the device.
    pub fn for_device(major: u32, minor: u32) -> &'static Arch {
        let sm = major * 10 + minor;
        Arch::ALL
            .iter()
            .rfind(|a| !a.arch_specific && a.sm <= sm)
            .unwrap_or(&Arch::ALL[0])
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_flags() {
        for a in Arch::ALL {
            assert_eq!(Arch::from_name(a.name), Some(a));
            assert!(a.smem_per_block <= a.smem_per_sm);
            assert!(a.ptx_isa >= (6, 0));
        }
        assert_eq!(Arch::from_name("sm_91"), None);
        let h = Arch::from_name("sm_90a").unwrap();
        assert!(h.has_wgmma && h.has_tma && h.arch_specific && h.sm == 90);
        assert!(!Arch::SM_90.has_wgmma && Arch::SM_90.has_tma);
        assert!(Arch::SM_89.has_mma_fp8 && !Arch::SM_80.has_mma_fp8);
        assert!(Arch::SM_90.has_cvt_rn_tf32 && !Arch::SM_80.has_cvt_rn_tf32);
        assert!(!Arch::SM_100.has_wgmma && Arch::SM_100.ptx_isa >= (8, 6));
        assert_eq!(Arch::SM_90A.portable().name, "sm_90");
        assert_eq!(Arch::SM_90.portable().name, "sm_90");
        assert_eq!(Arch::SM_80.portable().name, "sm_80");
    }

    #[test]
    fn device_targets() {
        assert_eq!(Arch::for_device(8, 0).name, "sm_80");
        assert_eq!(Arch::for_device(8, 6).name, "sm_86");
        assert_eq!(Arch::for_device(8, 7).name, "sm_86");
        assert_eq!(Arch::for_device(9, 0).name, "sm_90");
        assert_eq!(Arch::for_device(10, 0).name, "sm_100");
        assert_eq!(Arch::for_device(6, 1).name, "sm_70");
    }
}
