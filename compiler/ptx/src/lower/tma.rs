//! Staging with the Tensor Memory Accelerator (sm_90 and newer): a tile
//! that a warpgroup MMA reads, in a software pipeline, is copied by one
//! thread's `cp.async.bulk.tensor` per 128-byte panel instead of every
//! thread's 16-byte `cp.async`s, completing on an `mbarrier` that the
//! consumers wait on (`pipeline.rs`).
//!
//! A load qualifies when it is unmasked (the TMA's zero fill outside the
//! tensor is then exactly the load's out-of-bounds value), each dimension
//! of the tensor follows at most one axis of the tile with coefficient 1
//! (`affine`) and each tile axis of extent above 1 one dimension, the
//! tile's contiguous axis follows the tensor's last dimension, the
//! tensor's row strides are multiples of 16 bytes, and the tile lies in
//! shared memory in a layout the TMA writes: rows of the swizzle's width
//! (32, 64 or 128 bytes), or 128-byte panels, each a box of its own. The
//! kernel receives one tensor map per such load (`TensorMapDecl`).

use super::smem::Stored;
use super::{Lower, C, R};
use crate::ir::*;
use tessera_tile::Value;

/// How the TMA copies one staged tile.
#[derive(Clone, Copy, Debug)]
pub(super) struct TmaPlan {
    /// The tensor's rank.
    rank: usize,
    /// Box extents, innermost dimension first (a panel's, when panelled).
    boxes: [u32; 5],
    /// Swizzle width in bytes.
    swizzle: u32,
    /// Panels: how many, elements of the inner axis each, bytes apart in
    /// shared memory.
    panels: (i64, i64, i64),
    /// Bytes one copy of the tile delivers.
    pub bytes: u32,
}

impl TmaPlan {
    /// The tensor map this plan's loads of parameter `tensor` read.
    pub fn decl(&self, tensor: usize) -> TensorMapDecl {
        TensorMapDecl {
            tensor,
            boxes: self.boxes[..self.rank].to_vec(),
            swizzle: self.swizzle,
        }
    }
}

impl<'k> Lower<'k> {
    /// The TMA plan of a staged load of `param` through `index` (a tile of
    /// `outer` stored rows of `inner` elements, stored as `st`), or `None`
    /// when it does not qualify (see the module docs).
    pub(super) fn tma_plan(
        &self,
        (param, index, mask): (usize, &[Value], Option<Value>),
        st: &Stored,
        (outer, inner): (i64, i64),
    ) -> R<Option<TmaPlan>> {
        if !self.arch.has_tma || mask.is_some() || st.swizzle.is_none() {
            return Ok(None);
        }
        let (dims, strides) = self.param_strides(param)?;
        let rank = dims.len();
        let width = st.width;
        let row_bytes_ok = strides[..rank.saturating_sub(1)]
            .iter()
            .all(|s| (s * width) % 16 == 0);
        if !(1..=5).contains(&rank) || index.len() != rank || !row_bytes_ok {
            return Ok(None);
        }
        let Some(s) = st.canonical_swizzle() else {
            return Ok(None);
        };
        // The tile axis each dimension follows.
        let contiguous_axis = usize::from(!st.by_columns);
        let extent = |axis: usize| {
            if axis == contiguous_axis {
                inner
            } else {
                outer
            }
        };
        let mut follows = vec![None; rank];
        let mut covered = [false; 2];
        for (d, iv) in index.iter().enumerate() {
            let Some(sh) = self.shapes.get(iv.index()).cloned().flatten() else {
                return Ok(None);
            };
            let Some(c) = self.affine(*iv) else {
                return Ok(None);
            };
            let Some(lead) = 2usize.checked_sub(sh.len()) else {
                return Ok(None);
            };
            for (j, n) in sh.iter().enumerate() {
                let axis = lead + j;
                match (c[j], *n) {
                    (0, _) | (_, 1) => {}
                    (1, _) if follows[d].is_none() && !covered[axis] => {
                        follows[d] = Some(axis);
                        covered[axis] = true;
                    }
                    _ => return Ok(None),
                }
            }
        }
        // Every axis of the tile is some dimension's; the contiguous one
        // the innermost.
        if (0..2).any(|a| !covered[a] && extent(a) > 1)
            || (extent(contiguous_axis) > 1 && follows[rank - 1] != Some(contiguous_axis))
        {
            return Ok(None);
        }
        let (count, per, bytes) = match st.panel {
            Some(p) => (p.count, p.per, p.bytes),
            None => (1, inner, 0),
        };
        let mut boxes = [1u32; 5];
        for (d, f) in follows.iter().enumerate() {
            let b = match f {
                Some(a) if *a == contiguous_axis => per,
                Some(a) => extent(*a),
                None => 1,
            };
            let Ok(b) = u32::try_from(b) else {
                return Ok(None);
            };
            if b > 256 {
                return Ok(None);
            }
            boxes[rank - 1 - d] = b;
        }
        Ok(Some(TmaPlan {
            rank,
            boxes,
            swizzle: s as u32,
            panels: (count, per, bytes),
            bytes: u32::try_from(outer * inner * width).unwrap_or(u32::MAX),
        }))
    }

    /// The register holding the address of the tensor map `decl`, a new
    /// kernel parameter (one per distinct map), read and fenced where the
    /// code is now.
    pub(super) fn tensor_map(&mut self, decl: TensorMapDecl) -> Reg {
        if let Some((_, r)) = self.tensor_maps.iter().find(|(d, _)| *d == decl) {
            return *r;
        }
        let r = self.f.reg(Ty::U64);
        let param = self.k.params.len() + self.tensor_maps.len();
        self.f.push(Inst::LdParam { dst: r, param });
        self.f.push(Inst::FenceTensorMap { map: r });
        self.tensor_maps.push((decl, r));
        r
    }

    /// Issues, where `p0` holds, the TMA copies of a tile (loaded through
    /// `index`, as `tma` plans, from the map at `map`) with the coordinates
    /// of the current loop trip into shared offset `off` (plus the bytes in
    /// `ring`), completing on the barrier at `bar`.
    pub(super) fn emit_tma(
        &mut self,
        index: &[Value],
        tma: &TmaPlan,
        (off, ring): (u64, Option<Reg>),
        bar: Addr,
        (map, p0): (Reg, Reg),
    ) -> R<()> {
        // The tile's first element, dimension by dimension, innermost first.
        let mut coords = Vec::new();
        for iv in index.iter().rev() {
            let sh = self.shape(*iv)?;
            let c = Self::bcast(&[C::K(0), C::K(0)], &sh);
            let i = self.elem(*iv, &c)?;
            coords.push(self.convert(i, Ty::S32)?);
        }
        let base = self.shared_plus(ring);
        let (count, per, bytes) = tma.panels;
        for p in 0..count {
            let mut at = coords.clone();
            if p > 0 {
                at[0] = self
                    .f
                    .bin(BinOp::Add, Ty::S32, coords[0], Operand::Int(p * per));
            }
            self.f.push(Inst::TmaLoad {
                dst: Addr::Reg(base, off as i64 + p * bytes),
                map,
                coords: at,
                mbar: bar,
                guard: Some(Guard {
                    pred: p0,
                    negated: false,
                }),
            });
        }
        Ok(())
    }
}
