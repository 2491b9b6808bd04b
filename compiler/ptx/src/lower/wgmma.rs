//! `dot` on Hopper's warpgroup tensor cores (sm_90a): `wgmma.mma_async`
//! with B (and A, unless it is in registers) read from shared memory
//! through matrix descriptors.
//!
//! A product qualifies when its operands are 16-bit floats of one format
//! (or both fp8, `k32`, read K-major both: `a @ w.T` with `w` stored
//! `[N, K]`),
//! the block is whole warpgroups (a multiple of 4 warps) and every warp
//! owns 16 rows of the result (`M = 16 × warps`, the layout `Mma { wm:
//! warps, wn: 1 }`, which is exactly wgmma's: warpgroup `g` computes rows
//! `64g ..`, its warp `q` rows `64g + 16q ..`, each 8 columns in
//! `mma.sync`'s C fragment), `N` a multiple of 8 and `K` of 16. B must be
//! a tile staged in a canonical layout (`smem.rs`), K-major (stored column
//! by column, as a staged Kᵀ) or N-major (`imm-trans-b`); A a staged
//! K-major tile (rows of the tile stored as rows) or, in a chain of
//! products (attention's P·V), registers in the accumulator layout of the
//! earlier product, which per warp is wgmma's register layout of A
//! (`mma.sync`'s A fragment). Otherwise the product runs on `mma.sync`
//! with the same accumulator layout.
//!
//! The accumulators are copied into fresh registers, fenced
//! (`wgmma.fence`), updated in place by one `wgmma` per 16 of K and up to
//! 256 columns, committed and awaited (`wgmma.wait_group 0`) before the
//! product's result is used, so the buffers it read may be refilled after
//! the next barrier. Shared memory written by threads (`cp.async`,
//! `st.shared`) reaches wgmma's asynchronous proxy through a
//! `fence.proxy.async` before every barrier of such a kernel.

use super::{Layout, Lower, Val, R};
use crate::ir::*;
use tessera_core::Dtype;
use tessera_tile::{TOp, Value};

/// A staged operand of a wgmma, as its descriptors see it.
#[derive(Clone, Copy)]
struct WgOperand {
    /// The tile's shared layout.
    st: super::smem::Stored,
    /// Its shared offset.
    off: u64,
    /// Whether its K elements are the contiguous ones.
    k_major: bool,
}

impl<'k> Lower<'k> {
    /// Whether the tensor-core `dot` giving `v`, of `fmt` operands, an
    /// `[m, n]` result over `k`, runs on wgmma here (given staged
    /// operands). fp8 products only in one k-tile of a bf16 accumulator
    /// (`bf16_acc`): wgmma aligns fp8 products to the largest and sums them
    /// with about 14 bits (measured on an H200: 1e-4 relative error at
    /// K = 77, 7e-3 at K = 8192), short of the exact fp32 sum
    /// `accumulate = fp32` promises, which `mma.sync` gives.
    pub(super) fn wgmma_shape(&self, v: Value, fmt: [Fmt; 2], m: i64, n: i64, k: i64) -> bool {
        let warps = self.threads as u64 / 32;
        let dims = [m, n, k].map(|x| u64::try_from(x).unwrap_or(0));
        // (Asked before the dot is lowered too: found in the body, not `defs`.)
        let bf16_acc = || {
            self.k.body.all().iter().any(|i| {
                i.results.first() == Some(&v) && matches!(i.op, TOp::Dot { bf16_acc: true, .. })
            })
        };
        let formats = (fmt[0] == fmt[1] && fmt[0].wgmma_transposes())
            || (fmt[0].is_fp8() && fmt[1].is_fp8() && dims[2] % 32 == 0 && bf16_acc());
        formats && self.arch.wgmma_fits(warps, dims[0], dims[1], dims[2])
    }

    /// Whether the loaded tile `load` is staged for a product that runs
    /// on wgmma (B a staged load, A one too or in registers): then it
    /// takes wgmma's layouts and alignment. Other staged tiles keep theirs (and
    /// the `ldmatrix` paths that read them).
    pub(super) fn wgmma_reads(&self, load: Value) -> bool {
        if !self.arch.has_wgmma {
            return false;
        }
        let insts = self.k.body.all();
        // The load a stage result stages.
        let staged = |v: Value| {
            insts.iter().find_map(|i| match &i.op {
                TOp::Stage { value, .. } if i.results.first() == Some(&v) => Some(*value),
                _ => None,
            })
        };
        insts.iter().any(|i| {
            let (TOp::Dot { a, b, tf32, .. }, Some(&v)) = (&i.op, i.results.first()) else {
                return false;
            };
            // B staged, A staged or in registers (a chain's P); both
            // K-major for formats without transposes.
            let (sa, sb) = (staged(*a), staged(*b));
            let k_major = |load: Option<Value>, b: bool| {
                load.and_then(|l| {
                    let (param, index, _, _) = self.load_of(l)?;
                    let s = self.index_strides(param, index).ok()??;
                    Some(if b { s[0] == 1 } else { s[1] == 1 })
                }) == Some(true)
            };
            let transposes = self
                .mma_format(v, *a, *b, *tf32)
                .is_some_and(|f| f[0].wgmma_transposes());
            self.wgmma_dot_shape(v, *a, *b, *tf32)
                && sb.is_some()
                && (sa == Some(load) || sb == Some(load))
                && (sa.is_some() || self.in_dot_chain(v, *a))
                && (transposes || (k_major(sa, false) && k_major(sb, true)))
        })
    }

    /// [`Lower::wgmma_shape`] of the dot computing `v` from `a` and `b`.
    pub(super) fn wgmma_dot_shape(&self, v: Value, a: Value, b: Value, tf32: bool) -> bool {
        let (Some(fmt), Some(s), Some(sa)) = (
            self.mma_format(v, a, b, tf32),
            self.shapes[v.index()].as_ref(),
            self.shapes[a.index()].as_ref(),
        ) else {
            return false;
        };
        s.len() == 2 && sa.len() == 2 && self.wgmma_shape(v, fmt, s[0], s[1], sa[1])
    }

    /// Operand `v` of a wgmma (`b`: the B operand) when it is a staged
    /// tile in a canonical layout: swizzled rows of 32, 64 or 128 bytes
    /// (or 128-byte panels) at a multiple of 1024 bytes. A is K-major only.
    fn wg_operand(&mut self, v: Value, b: bool, fmt: Fmt) -> R<Option<WgOperand>> {
        let Val::Shared(off) = self.val(v)? else {
            return Ok(None);
        };
        let Some(st) = self.stored(v) else {
            return Ok(None);
        };
        let native = match fmt {
            Fmt::Bf16 => Dtype::Bf16,
            Fmt::E4m3 => Dtype::Fp8E4m3,
            Fmt::E5m2 => Dtype::Fp8E5m2,
            _ => Dtype::Fp16,
        };
        let canonical = st.canonical_swizzle().is_some();
        let k_major = st.by_columns == b;
        if self.k.ty(v).dtype != native || !canonical || off % 1024 != 0 || (!b && !k_major) {
            return Ok(None);
        }
        Ok(Some(WgOperand { st, off, k_major }))
    }

    /// `dot` of `a` `[M, K]` and `b` `[K, N]` into `acc` on wgmma, the
    /// result in `layout`; `false` (nothing emitted) when the product or
    /// its operands do not qualify (see the module docs).
    pub(super) fn wgmma_dot(
        &mut self,
        v: Value,
        (a, b, acc): (Value, Value, Value),
        layout: Layout,
        tf32: bool,
    ) -> R<bool> {
        if !self.wgmma_dot_shape(v, a, b, tf32)
            || layout
                != (Layout::Mma {
                    wm: self.threads / 32,
                    wn: 1,
                })
        {
            return Ok(false);
        }
        let fmt = self
            .mma_format(v, a, b, tf32)
            .ok_or("internal error: no mma format")?;
        let Some(ob) = self.wg_operand(b, true, fmt[1])? else {
            return Ok(false);
        };
        // A staged in shared memory, or (attention's P) in registers.
        let oa = self.wg_operand(a, false, fmt[0])?;
        if oa.is_none() && !self.has_register_a(v, a, layout)? {
            return Ok(false);
        }
        // Formats without transposes read both operands K-major from
        // shared memory.
        if !fmt[0].wgmma_transposes() && (oa.is_none() || !ob.k_major) {
            return Ok(false);
        }
        let shape = self.shape(v)?;
        let (n, k) = (shape[1], self.shape(a)?[1]);
        let a_regs = match oa {
            Some(_) => None,
            None => self.register_a(v, a, layout)?,
        };
        let accs = self.fresh_accumulators(acc, layout, Ty::F32)?;
        self.f.push(Inst::Comment(format!(
            "{v} = dot on wgmma, {} warpgroups, {}, A from {}",
            self.threads / 128,
            fmt[0].name(),
            if oa.is_some() {
                "shared memory"
            } else {
                "registers"
            }
        )));
        // Warpgroup g's rows of A start 64 rows (8 groups of 8) further.
        let da = match oa {
            Some(oa) => {
                let wg = self.f.bin(BinOp::Shr, Ty::S64, self.tid, Operand::Int(7));
                let wg = self.f.cvt(Ty::U32, wg);
                let rows = Operand::Int(8 * 8 * oa.st.row_bytes());
                let a_rows = self.f.bin(BinOp::Mul, Ty::U32, wg, rows);
                Some(self.descriptor(oa, Some(a_rows)))
            }
            None => None,
        };
        let db = self.descriptor(ob, None);
        let kstep = fmt[0].mma_k();
        // A's fragments, packed before the fence (which orders them).
        let mut a_frags = Vec::new();
        for k0 in (0..k).step_by(kstep as usize) {
            a_frags.push(match (oa.zip(da), &a_regs) {
                (Some((oa, da)), _) => {
                    let at = Operand::Int(self.k_offset(oa, k0) >> 4);
                    WgmmaA::Desc(self.f.bin(BinOp::Add, Ty::S64, da, at))
                }
                (None, Some(regs)) => WgmmaA::Regs(self.pack_a(regs, fmt[0], 0, k0)),
                (None, None) => return Err("internal error: wgmma's A is nowhere".into()),
            });
        }
        self.f.push(Inst::WgmmaFence);
        for n0 in (0..n).step_by(256) {
            let cols = (n - n0).min(256);
            let d = accs[(n0 / 2) as usize..((n0 + cols) / 2) as usize].to_vec();
            for (step, k0) in (0..k).step_by(kstep as usize).enumerate() {
                let b_at = self.k_offset(ob, k0) + self.x_offset(ob, n0);
                let b = self.f.bin(BinOp::Add, Ty::S64, db, Operand::Int(b_at >> 4));
                self.f.push(Inst::Wgmma {
                    fmt,
                    d: d.clone(),
                    a: a_frags[step],
                    b,
                    accumulate: true,
                    trans_a: false,
                    trans_b: !ob.k_major,
                });
            }
        }
        self.f.push(Inst::WgmmaCommit);
        self.f.push(Inst::WgmmaWait(0));
        self.finish_dot(v, accs, layout)?;
        Ok(true)
    }

    /// The descriptor (b64) of operand `o` at its first element, plus the
    /// bytes in `extra` (u32): start address, leading and stride byte
    /// offsets, swizzle mode (see the PTX ISA's matrix descriptors).
    fn descriptor(&mut self, o: WgOperand, extra: Option<Reg>) -> Reg {
        let s = o.st.row_bytes();
        let mode: i64 = match s {
            128 => 1,
            64 => 2,
            _ => 3,
        };
        // K-major: 8 rows of `s` bytes apart (the leading offset unused);
        // N-major: 8 stored rows (of K) apart, panels `bytes` apart.
        let sbo = 8 * s;
        let lbo = match (o.k_major, o.st.panel) {
            (false, Some(p)) => p.bytes,
            _ => 16,
        };
        let hi = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62);
        let base = self.shared_base(o.st);
        let mut addr = self
            .f
            .bin(BinOp::Add, Ty::U32, base, Operand::Int(o.off as i64));
        if let Some(x) = extra {
            addr = self.f.bin(BinOp::Add, Ty::U32, addr, Operand::Reg(x));
        }
        let lo = self.f.bin(BinOp::Shr, Ty::U32, addr, Operand::Int(4));
        let lo = self.f.bin(BinOp::And, Ty::U32, lo, Operand::Int(0x3FFF));
        let lo = self.f.cvt(Ty::U64, lo);
        self.f.bin(BinOp::Or, Ty::B64, lo, Operand::Int(hi))
    }

    /// Bytes from operand `o`'s first element to its k-th along K.
    fn k_offset(&self, o: WgOperand, k: i64) -> i64 {
        let s = o.st.row_bytes();
        if o.k_major {
            match o.st.panel {
                Some(p) => k / p.per * p.bytes + k % p.per * o.st.width,
                None => k * o.st.width,
            }
        } else {
            k * s
        }
    }

    /// Bytes from operand `o`'s first element to its x-th row (A) or
    /// column (B), `x` a multiple of 8 (and of a panel's elements when
    /// N-major).
    fn x_offset(&self, o: WgOperand, x: i64) -> i64 {
        if o.k_major {
            x * o.st.row_bytes()
        } else {
            match o.st.panel {
                Some(p) => x / p.per * p.bytes,
                None => x * o.st.width,
            }
        }
    }
}

/// Puts `fence.proxy.async.shared::cta` before every barrier of a kernel
/// that issues wgmma: what threads wrote to shared memory before the
/// barrier is then visible to the wgmma that read it after.
pub(super) fn fence_async_reads(body: &mut Vec<Inst>) {
    if !body.iter().any(|i| matches!(i, Inst::Wgmma { .. })) {
        return;
    }
    let mut out = Vec::with_capacity(body.len() + 16);
    for i in body.drain(..) {
        if matches!(i, Inst::Barrier | Inst::NamedBarrier { .. }) {
            out.push(Inst::FenceProxyAsync);
        }
        out.push(i);
    }
    *body = out;
}
