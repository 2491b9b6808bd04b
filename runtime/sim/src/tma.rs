//! The Tensor Memory Accelerator and `mbarrier` on the simulator.
//!
//! A tensor map is 128 bytes the kernel receives by address. A GPU reads
//! the driver's encoding (`cuTensorMapEncodeTiled`); the simulator reads
//! its own, [`TensorMap`], which the launcher writes for it. A TMA load
//! copies the map's box at the given coordinates (zeros outside the
//! tensor), swizzled as the map says, into shared memory; its bytes land,
//! and count on its barrier's transactions, when a thread next waits on
//! that barrier (until then reading them is an error, as on the GPU where
//! they may not have arrived).
//!
//! An `mbarrier` completes a phase when all its expected arrivals have
//! arrived and its transaction count is back to zero; `try_wait.parity P`
//! is true once the phase of parity `P` before the current one has
//! completed. A warp whose wait fails yields to the others; when no warp
//! can make progress the block is deadlocked, which is an error naming the
//! barrier's state.

/// The simulator's encoding of a tiled tensor map (interleave none,
/// element strides 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMap {
    /// The tensor's global address.
    pub base: u64,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Extents, innermost (contiguous) first; 1 to 5 of them.
    pub dims: Vec<u64>,
    /// Byte strides of dimensions 1.. (dimension 0 is contiguous).
    pub strides: Vec<u64>,
    /// The box copied, in elements per dimension (innermost first).
    pub boxes: Vec<u32>,
    /// Swizzle width in bytes: 0 (none), 32, 64 or 128.
    pub swizzle: u32,
}

const MAGIC: &[u8; 4] = b"TSRM";

impl TensorMap {
    /// The 128 bytes the kernel reads.
    pub fn encode(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(MAGIC);
        b[4..8].copy_from_slice(&(self.dims.len() as u32).to_le_bytes());
        b[8..12].copy_from_slice(&self.elem_bytes.to_le_bytes());
        b[12..16].copy_from_slice(&self.swizzle.to_le_bytes());
        b[16..24].copy_from_slice(&self.base.to_le_bytes());
        for (i, d) in self.dims.iter().enumerate().take(5) {
            b[24 + 8 * i..32 + 8 * i].copy_from_slice(&d.to_le_bytes());
        }
        for (i, s) in self.strides.iter().enumerate().take(4) {
            b[64 + 8 * i..72 + 8 * i].copy_from_slice(&s.to_le_bytes());
        }
        for (i, x) in self.boxes.iter().enumerate().take(5) {
            b[96 + 4 * i..100 + 4 * i].copy_from_slice(&x.to_le_bytes());
        }
        b
    }

    /// Reads a map [`TensorMap::encode`] wrote.
    pub fn decode(b: &[u8; 128]) -> Result<TensorMap, String> {
        if &b[0..4] != MAGIC {
            return Err("the tensor map was not written for the simulator".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let rank = u32_at(4) as usize;
        if !(1..=5).contains(&rank) {
            return Err(format!("a tensor map of rank {rank}"));
        }
        let m = TensorMap {
            base: u64_at(16),
            elem_bytes: u32_at(8),
            dims: (0..rank).map(|i| u64_at(24 + 8 * i)).collect(),
            strides: (0..rank - 1).map(|i| u64_at(64 + 8 * i)).collect(),
            boxes: (0..rank).map(|i| u32_at(96 + 4 * i)).collect(),
            swizzle: u32_at(12),
        };
        let row = u64::from(m.boxes[0]) * u64::from(m.elem_bytes);
        if !matches!(m.swizzle, 0 | 32 | 64 | 128)
            || (m.swizzle != 0 && row != u64::from(m.swizzle))
        {
            return Err(format!(
                "a tensor map with {}-byte box rows and a {}-byte swizzle (the simulator needs \
                 swizzled rows exactly the swizzle's width)",
                row, m.swizzle
            ));
        }
        Ok(m)
    }

    /// Bytes of one box.
    pub fn box_bytes(&self) -> u64 {
        self.boxes.iter().map(|&x| u64::from(x)).product::<u64>() * u64::from(self.elem_bytes)
    }

    /// For each element of the box at `coords` (innermost first): its
    /// byte offset in shared memory from a destination at shared address
    /// `dst` (the swizzle applied to the absolute address), and its global
    /// address, or `None` outside the tensor (zero filled).
    pub fn elements(&self, dst: u64, coords: &[i64]) -> Vec<(u64, Option<u64>)> {
        let n: u64 = self.boxes.iter().map(|&x| u64::from(x)).product();
        let e = u64::from(self.elem_bytes);
        let mut out = Vec::with_capacity(n as usize);
        let mut idx = vec![0u64; self.dims.len()];
        for lin in 0..n {
            let mut rest = lin;
            for (d, i) in idx.iter_mut().enumerate() {
                let b = u64::from(self.boxes[d]);
                *i = rest % b;
                rest /= b;
            }
            let mut global = Some(self.base);
            for (d, i) in idx.iter().enumerate() {
                let c = coords[d] + *i as i64;
                if c < 0 || c as u64 >= self.dims[d] {
                    global = None;
                    break;
                }
                let stride = if d == 0 { e } else { self.strides[d - 1] };
                global = global.map(|g| g + c as u64 * stride);
            }
            let mut a = dst + lin * e;
            if self.swizzle != 0 {
                let bits = (u64::from(self.swizzle) / 16).trailing_zeros() as u64;
                a ^= ((a >> 7) & ((1 << bits) - 1)) << 4;
            }
            out.push((a - dst, global));
        }
        out
    }
}

/// One `mbarrier` object.
#[derive(Clone, Debug, Default)]
pub struct Mbar {
    /// Arrivals that complete a phase.
    pub expected: u32,
    /// Arrivals still missing in the current phase.
    pub pending: u32,
    /// Transaction bytes still owed to the current phase.
    pub tx: i64,
    /// Phases completed so far (the current phase's parity is `phase & 1`).
    pub phase: u32,
    /// TMA copies not yet landed: (shared offset, bytes).
    pub inflight: Vec<(usize, Vec<u8>)>,
    /// The race checks' clock when the latest phase of each parity
    /// completed (0: none yet).
    pub done_at: [u32; 2],
}

impl Mbar {
    /// Completes the phase if nothing is owed, at clock `now`; whether it
    /// did.
    pub fn settle(&mut self, now: u32) -> bool {
        if self.pending == 0 && self.tx == 0 {
            self.done_at[(self.phase & 1) as usize] = now;
            self.phase += 1;
            self.pending = self.expected;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_round_trip() {
        let m = TensorMap {
            base: 0x1000,
            elem_bytes: 2,
            dims: vec![100, 70, 3],
            strides: vec![200, 14000],
            boxes: vec![64, 32, 1],
            swizzle: 128,
        };
        assert_eq!(TensorMap::decode(&m.encode()).unwrap(), m);
        assert_eq!(m.box_bytes(), 64 * 32 * 2);
    }

    #[test]
    fn boxes_swizzle_and_fill_zeros_outside() {
        let m = TensorMap {
            base: 0,
            elem_bytes: 2,
            dims: vec![100, 70],
            strides: vec![200],
            boxes: vec![64, 16],
            swizzle: 128,
        };
        let els = m.elements(1024, &[64, 60]);
        // Row 1, element 9: chunk 1 of row 1 lands in chunk 1 ^ 1 = 0.
        let (off, g) = els[64 + 9];
        assert_eq!(off, 128 + 2);
        assert_eq!(g, Some((61 * 200 + (64 + 9) * 2) as u64));
        // Column 100 and row 70 are outside.
        assert_eq!(els[36].1, None);
        assert_eq!(els[10 * 64].1, None);
    }
}
