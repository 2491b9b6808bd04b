//! Kernel arguments (`KernelArg`) and their packing into the parameter array `cuLaunchKernel` takes.
//!
//! `cuLaunchKernel` wants one pointer per kernel parameter, each pointing at the parameter's
//! value in the exact size of the PTX `.param` (4 bytes for `.u32`, 8 for `.u64`, ...).
//! `PackedArgs` holds every value in its own 8-byte slot, value in the slot's first bytes in
//! the host's byte order, so each pointer it hands out points at a correctly sized value.

use std::ffi::c_void;
use std::fmt;

use crate::buffer::DeviceBuffer;

/// One argument of a kernel launch, matching one `.param` of the PTX entry function.
///
/// Buffers are passed as 64-bit device pointers (`.param .u64`); scalars by value in their
/// own width.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// The device address of a buffer, as a `.u64` parameter.
    Buffer(&'a DeviceBuffer),
    /// A `.s32` / `.b32` parameter.
    I32(i32),
    /// A `.s64` / `.b64` parameter.
    I64(i64),
    /// A `.u32` / `.b32` parameter.
    U32(u32),
    /// A `.u64` / `.b64` parameter (also a raw device address).
    U64(u64),
    /// A `.f32` parameter.
    F32(f32),
    /// A `.f64` parameter.
    F64(f64),
}

impl KernelArg<'_> {
    /// The size of the parameter in bytes: 4 or 8.
    pub fn size_bytes(&self) -> usize {
        match self {
            KernelArg::I32(_) | KernelArg::U32(_) | KernelArg::F32(_) => 4,
            KernelArg::Buffer(_) | KernelArg::I64(_) | KernelArg::U64(_) | KernelArg::F64(_) => 8,
        }
    }

    /// The PTX type of the parameter this argument fills: `.u64` for a buffer, `.s32`, ...
    pub fn ptx_type(&self) -> &'static str {
        match self {
            KernelArg::Buffer(_) | KernelArg::U64(_) => ".u64",
            KernelArg::I32(_) => ".s32",
            KernelArg::I64(_) => ".s64",
            KernelArg::U32(_) => ".u32",
            KernelArg::F32(_) => ".f32",
            KernelArg::F64(_) => ".f64",
        }
    }

    /// The value's bytes in the host's byte order, as the driver reads them: the first
    /// [`KernelArg::size_bytes`] bytes of the result, the rest zero.
    pub fn to_ne_bytes(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        match *self {
            KernelArg::Buffer(b) => out = b.device_ptr().to_ne_bytes(),
            KernelArg::I32(v) => out[..4].copy_from_slice(&v.to_ne_bytes()),
            KernelArg::I64(v) => out = v.to_ne_bytes(),
            KernelArg::U32(v) => out[..4].copy_from_slice(&v.to_ne_bytes()),
            KernelArg::U64(v) => out = v.to_ne_bytes(),
            KernelArg::F32(v) => out[..4].copy_from_slice(&v.to_ne_bytes()),
            KernelArg::F64(v) => out = v.to_ne_bytes(),
        }
        out
    }
}

impl fmt::Display for KernelArg<'_> {
    /// The argument as errors show it: `buffer(4096 bytes)`, `i32 7`, `f32 0.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelArg::Buffer(b) => write!(f, "buffer({} bytes)", b.len()),
            KernelArg::I32(v) => write!(f, "i32 {v}"),
            KernelArg::I64(v) => write!(f, "i64 {v}"),
            KernelArg::U32(v) => write!(f, "u32 {v}"),
            KernelArg::U64(v) => write!(f, "u64 {v}"),
            KernelArg::F32(v) => write!(f, "f32 {v:?}"),
            KernelArg::F64(v) => write!(f, "f64 {v:?}"),
        }
    }
}

/// The values of a launch's arguments, one 8-byte slot each, ready for `cuLaunchKernel`.
///
/// The slots are `u64`, so each is 8-byte aligned, which every scalar parameter needs.
pub(crate) struct PackedArgs {
    slots: Vec<u64>,
}

impl PackedArgs {
    /// Packs `args` in order.
    pub fn new(args: &[KernelArg<'_>]) -> PackedArgs {
        PackedArgs {
            slots: args
                .iter()
                .map(|a| u64::from_ne_bytes(a.to_ne_bytes()))
                .collect(),
        }
    }

    /// The slot of argument `i` as bytes (host order), for tests and diagnostics.
    #[cfg(test)]
    pub fn slot_bytes(&self, i: usize) -> [u8; 8] {
        self.slots[i].to_ne_bytes()
    }

    /// One pointer per argument, to its slot: the `kernelParams` of `cuLaunchKernel`. The
    /// pointers are valid while `self` is neither moved nor dropped.
    pub fn param_pointers(&mut self) -> Vec<*mut c_void> {
        self.slots
            .iter_mut()
            .map(|slot| slot as *mut u64 as *mut c_void)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_sizes_and_types() {
        let cases: [(KernelArg<'static>, usize, &str); 6] = [
            (KernelArg::I32(-1), 4, ".s32"),
            (KernelArg::U32(1), 4, ".u32"),
            (KernelArg::F32(1.0), 4, ".f32"),
            (KernelArg::I64(-1), 8, ".s64"),
            (KernelArg::U64(1), 8, ".u64"),
            (KernelArg::F64(1.0), 8, ".f64"),
        ];
        for (arg, size, ty) in cases {
            assert_eq!(arg.size_bytes(), size, "{arg}");
            assert_eq!(arg.ptx_type(), ty, "{arg}");
        }
    }

    #[test]
    fn packing_puts_each_value_at_the_start_of_its_slot() {
        let args = [
            KernelArg::I32(-2),
            KernelArg::U64(0x0102_0304_0506_0708),
            KernelArg::F32(1.5),
            KernelArg::F64(-0.25),
            KernelArg::U32(0xdead_beef),
            KernelArg::I64(i64::MIN),
        ];
        let mut packed = PackedArgs::new(&args);
        assert_eq!(&packed.slot_bytes(0)[..4], &(-2i32).to_ne_bytes());
        assert_eq!(&packed.slot_bytes(0)[4..], &[0; 4]);
        assert_eq!(packed.slot_bytes(1), 0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(&packed.slot_bytes(2)[..4], &1.5f32.to_ne_bytes());
        assert_eq!(packed.slot_bytes(3), (-0.25f64).to_ne_bytes());
        assert_eq!(&packed.slot_bytes(4)[..4], &0xdead_beefu32.to_ne_bytes());
        assert_eq!(packed.slot_bytes(5), i64::MIN.to_ne_bytes());

        // Each pointer reads back its own value at the parameter's width.
        let ptrs = packed.param_pointers();
        assert_eq!(ptrs.len(), args.len());
        unsafe {
            assert_eq!(*(ptrs[0] as *const i32), -2);
            assert_eq!(*(ptrs[1] as *const u64), 0x0102_0304_0506_0708);
            assert_eq!(*(ptrs[2] as *const f32), 1.5);
            assert_eq!(*(ptrs[3] as *const f64), -0.25);
            assert_eq!(*(ptrs[4] as *const u32), 0xdead_beef);
            assert_eq!(*(ptrs[5] as *const i64), i64::MIN);
        }
        for p in &ptrs {
            assert_eq!(*p as usize % 8, 0, "slots are 8-byte aligned");
        }
    }

    #[test]
    fn display() {
        assert_eq!(KernelArg::F32(0.5).to_string(), "f32 0.5");
        assert_eq!(KernelArg::I64(-3).to_string(), "i64 -3");
        assert_eq!(KernelArg::U32(7).to_string(), "u32 7");
    }
}
