//! Software pipelining of a loop's staged loads (`pipeline_stages` = S ≥
//! 2): while one trip computes on its tiles in shared memory, the
//! `cp.async` copies of the next S - 1 trips' tiles are already in flight
//! into the other buffers of a ring of S.
//!
//! A loop qualifies when every `stage` in its body stages a load that
//! `cp.async` can copy (see `stage.rs`), whose index depends on the trip
//! only through lazily evaluated values, and whose shared declaration asks
//! for at least two stages (S is the smallest such count, at most
//! [`MAX_STAGES`]). Then:
//!
//! - the buffers form a ring: buffer `b` of every staged load lies `b`
//!   times the bytes of one set of buffers after buffer 0, so one register
//!   (`read`, bytes) selects the buffer a trip reads and another (`write`)
//!   the one it refills; the loop body is emitted once, its shared
//!   addresses offset by those registers, which advance at each trip's end;
//! - before the loop, the tiles of trips 0 .. S - 2 are copied into buffers
//!   0 .. S - 2, one commit group per trip;
//! - at a trip's first `stage`: wait until at most S - 2 groups are in
//!   flight (this trip's tiles have landed), meet at a barrier (the tiles
//!   are visible, and every thread is done reading the buffer the previous
//!   trip used), then issue the copies of the trip S - 1 ahead into that
//!   buffer, evaluated with the loop variable advanced by S - 1 steps and
//!   skipped past the end (the group is committed anyway, so the counting
//!   stays uniform).
//!
//! In a warp-specialised kernel (`warpspec.rs`) the copies are issued by a
//! producer warp instead: the loop's consumers only wait for each trip's
//! tiles on the buffer's "full" barrier and, at the trip's end, release
//! the buffer on its "empty" barrier.

use super::stage::CopyPlan;
use super::{Lower, Val, R};
use crate::ir::*;
use tessera_tile::{Block, TOp, Value};

/// The most buffers a pipelined loop rotates through.
pub(super) const MAX_STAGES: usize = 4;

/// The pipeline of the loop being lowered.
pub(super) struct Pipe<'k> {
    /// Per staged load: the stage's result, how to copy it, its buffers
    /// (one per stage).
    stages: Vec<(Value, CopyPlan<'k>, Vec<u64>)>,
    /// The loop's variable, step and bound.
    trip: Trip,
    /// Bytes from buffer 0 to the buffer this trip reads, and to the one
    /// it refills (u32 registers, advanced by [`Lower::advance_ring`]).
    read: Reg,
    write: Reg,
    /// Bytes of one buffer of every staged load (the ring's step).
    step: i64,
    /// Whether this trip has issued the next trip's copies.
    pub issued: bool,
    /// The barriers of the loads the TMA copies, if any.
    tma: Option<TmaRing>,
    /// In a warp-specialised kernel: the barriers the consumers wait on
    /// and release.
    pub(super) ws: Option<super::warpspec::Consumer>,
    /// The loop body's barrier that only follows its stages, which the
    /// pipeline's own wait makes redundant.
    pub(super) redundant_barrier: Option<&'k tessera_tile::Inst>,
}

/// The `mbarrier`s of a pipeline whose loads (some of them) the TMA
/// copies (see `tma.rs`): one per buffer of the ring, thread 0 expecting
/// the bytes of every TMA copy into the buffer before issuing them, every
/// thread waiting on the barrier of the buffer its trip reads, with the
/// parity of that buffer's use.
#[derive(Clone)]
struct TmaRing {
    /// Shared offset of the first barrier (8 bytes each).
    bars: u64,
    /// Bytes from the first barrier to the one this trip reads, and to the
    /// one it refills (u32).
    rbar: Reg,
    wbar: Reg,
    /// The phase parity of the barrier this trip reads (u32).
    parity: Reg,
    /// Whether this is the one thread (of warp 0) that issues.
    p0: Reg,
    /// Per staged load: the tensor map's address, for those the TMA copies.
    maps: Vec<Option<Reg>>,
    /// Bytes the TMA copies of one trip deliver.
    bytes: u32,
}

/// Which buffer copies go to: a fixed one (before the loop), or the one
/// a ring register selects.
#[derive(Clone, Copy)]
enum Buf {
    Fixed(usize),
    Ring(Reg),
}

impl<'k> Pipe<'k> {
    /// The pipeline of `stages` over `trip`, its ring's read and write
    /// registers and step, and its barriers (TMA issued by one of the
    /// block's threads, or a producer warp's).
    fn new(
        stages: Stages<'k>,
        trip: Trip,
        (read, write, step): (Reg, Reg, i64),
        (tma, ws): (Option<TmaRing>, Option<super::warpspec::Consumer>),
        redundant_barrier: Option<&'k tessera_tile::Inst>,
    ) -> Self {
        Pipe {
            stages,
            trip,
            read,
            write,
            step,
            issued: false,
            tma,
            ws,
            redundant_barrier,
        }
    }

    /// Buffers in the ring (the pipeline's stages).
    pub(super) fn depth(&self) -> usize {
        self.stages.first().map_or(1, |(_, _, offs)| offs.len())
    }
}

/// A pipelined loop's variable: the body's argument, its register, the
/// step and the bound.
#[derive(Clone, Copy)]
pub(super) struct Trip {
    pub arg: Value,
    pub iv: Reg,
    pub step: Reg,
    pub hi: Reg,
}

/// The staged loads of a pipelined loop: per load, the stage's result,
/// how to copy it and its buffers (one per stage).
pub(super) type Stages<'k> = Vec<(Value, CopyPlan<'k>, Vec<u64>)>;

/// Whether `op` computes index arithmetic, masks or loads: what a loop
/// body's lazy values are made of.
fn index_op(op: &TOp) -> bool {
    matches!(
        op,
        TOp::Load { .. }
            | TOp::Arange(..)
            | TOp::Unary(..)
            | TOp::Binary(..)
            | TOp::Reshape(..)
            | TOp::Broadcast(..)
            | TOp::Permute(..)
            | TOp::Const(_)
            | TOp::Cast(_)
            | TOp::Select(..)
    )
}

/// Whether `op` only computes indices, loads or stages (what a loop body
/// does before the barrier that publishes its stages).
fn only_indexes(op: &TOp) -> bool {
    index_op(op) || matches!(op, TOp::Stage { .. } | TOp::Size(_))
}

impl<'k> Lower<'k> {
    /// Whether `v` (defined in the loop body, or the loop variable) is
    /// evaluated lazily all the way down to uniform values defined outside
    /// the body: then it follows the loop variable when that is rebound.
    fn follows_trip(&self, v: Value, body: &[Value], iv_arg: Value, depth: u32) -> bool {
        if v == iv_arg || !body.contains(&v) {
            return true;
        }
        if depth > 64 || !matches!(self.vals[v.index()], Some(Val::Lazy)) {
            return false;
        }
        match self.defs.get(&v) {
            Some(inst) => inst
                .op
                .operands()
                .iter()
                .all(|o| self.follows_trip(*o, body, iv_arg, depth + 1)),
            None => false,
        }
    }

    /// Sets up the pipeline of a loop over `body` (loop variable in `iv`,
    /// bound `hi`, step `step`), issuing the first trips' copies, and
    /// returns its depth (buffers per staged load), or 0 when the loop does
    /// not qualify (having emitted nothing that matters).
    pub(super) fn plan_pipeline(
        &mut self,
        body: &'k Block,
        iv: Reg,
        hi: Reg,
        step: Reg,
    ) -> R<usize> {
        if self.pipe.is_some() || !self.pipelining {
            return Ok(0);
        }
        let Some(iv_arg) = body.args.first().copied() else {
            return Ok(0);
        };
        let staged: Vec<(Value, Value, usize)> = body
            .insts
            .iter()
            .filter_map(|i| match (&i.op, i.results.first()) {
                (TOp::Stage { value, shared }, Some(r)) => Some((*r, *value, *shared)),
                _ => None,
            })
            .collect();
        let Some(depth) = staged
            .iter()
            .map(|(_, _, s)| self.k.shared[*s].stages as usize)
            .min()
            .filter(|d| *d >= 2)
            .map(|d| d.min(MAX_STAGES))
        else {
            return Ok(0);
        };
        self.bind_lazy_body(body, iv_arg, iv)?;
        let defined: Vec<Value> = body.insts.iter().flat_map(|i| i.results.clone()).collect();
        let mut stages = Vec::new();
        for (result, value, shared) in &staged {
            let Some(plan) = self.copy_plan(*value, *shared)? else {
                return Ok(0);
            };
            let Some(load) = self.defs.get(value) else {
                return Ok(0);
            };
            let follows = load
                .op
                .operands()
                .iter()
                .all(|o| self.follows_trip(*o, &defined, iv_arg, 0));
            if !follows {
                return Ok(0);
            }
            stages.push((*result, plan, Vec::new()));
        }
        let trip = Trip {
            arg: iv_arg,
            iv,
            step,
            hi,
        };
        // The body's first barrier, when only index arithmetic, loads and
        // stages come before it: the pipeline's wait at the first stage
        // already publishes the tiles.
        let redundant_barrier = body
            .insts
            .iter()
            .find(|i| !only_indexes(&i.op))
            .filter(|i| matches!(i.op, TOp::Barrier));
        if self.ws.is_some() {
            let ring_step = self.alloc_ring(&mut stages, depth)?;
            let ws = self.plan_consumer(body, &stages, depth, ring_step)?;
            // The ring's position carries over from one program of a
            // persistent kernel to the next: it starts in the prologue.
            // (The consumers refill nothing: no write position.)
            let read = self.in_prologue(|l| l.f.mov(Ty::U32, Operand::Int(0)));
            let ring = (read, read, ring_step);
            self.pipe = Some(Pipe::new(
                stages,
                trip,
                ring,
                (None, Some(ws)),
                redundant_barrier,
            ));
            return Ok(depth);
        }
        let ring_step = self.alloc_ring(&mut stages, depth)?;
        self.f.push(Inst::Comment(format!(
            "software pipeline: {} staged loads, {depth} buffers each",
            stages.len()
        )));
        // The tiles of the first depth - 1 trips, those that exist.
        let tma = self.tma_ring(&stages, depth);
        // The buffers may be regions an earlier loop (or the previous trip
        // of an enclosing loop) was still reading; the barriers are
        // initialised before anyone waits.
        self.f.push(Inst::Barrier);
        for t in 0..depth - 1 {
            self.trip_copies(&stages, trip, t, (Buf::Fixed(t), tma.as_ref()))?;
        }
        let read = self.f.mov(Ty::U32, Operand::Int(0));
        let write = self
            .f
            .mov(Ty::U32, Operand::Int((depth as i64 - 1) * ring_step));
        let ring = (read, write, ring_step);
        self.pipe = Some(Pipe::new(
            stages,
            trip,
            ring,
            (tma, None),
            redundant_barrier,
        ));
        Ok(depth)
    }

    /// Records the lazy values of a loop `body` (index arithmetic and the
    /// loads themselves) with its variable `iv_arg` bound to register
    /// `iv`.
    pub(super) fn bind_lazy_body(&mut self, body: &'k Block, iv_arg: Value, iv: Reg) -> R<()> {
        self.vals[iv_arg.index()] = Some(Val::Uniform(iv));
        self.memo.clear();
        for inst in &body.insts {
            let lazy_kind = index_op(&inst.op);
            let ready = inst.op.operands().iter().all(|o| {
                matches!(
                    self.vals[o.index()],
                    Some(Val::Uniform(_)) | Some(Val::Lazy)
                )
            });
            let has_tensor_result = inst
                .results
                .first()
                .is_some_and(|r| self.shape(*r).is_ok_and(|s| !s.is_empty()));
            if lazy_kind && ready && has_tensor_result && self.all_lazy(inst) {
                self.inst(inst)?;
            }
        }
        Ok(())
    }

    /// Allocates the ring of `depth` buffers of every staged load (buffer
    /// b of every load, then buffer b + 1: a ring of equal steps) and
    /// returns its step in bytes.
    fn alloc_ring(&mut self, stages: &mut Stages<'k>, depth: usize) -> R<i64> {
        for b in 0..depth {
            for (_, plan, offs) in stages.iter_mut() {
                let name = format!("{}.{b}", plan.value);
                offs.push(self.alloc_shared_aligned(name, plan.bytes(), plan.align));
            }
        }
        let ring_step: i64 = stages.iter().map(|(_, p, _)| p.bytes() as i64).sum();
        let even = stages.iter().all(|(_, _, offs)| {
            (0..depth).all(|b| offs[b] == offs[0] + (b as i64 * ring_step) as u64)
        });
        if !even {
            return Err("internal error: the pipeline's buffers are not evenly spaced".into());
        }
        Ok(ring_step)
    }

    /// The barriers of a pipeline of `depth` buffers whose `stages` the
    /// TMA copies (some of them), initialised by thread 0 (a barrier must
    /// follow), with the maps' parameters; `None` when every load takes
    /// `cp.async`.
    fn tma_ring(
        &mut self,
        stages: &[(Value, CopyPlan<'k>, Vec<u64>)],
        depth: usize,
    ) -> Option<TmaRing> {
        if stages.iter().all(|(_, p, _)| p.tma.is_none()) {
            return None;
        }
        let bars = self.alloc_shared_aligned("mbarriers".into(), 8 * depth as u64, 8);
        let maps: Vec<Option<Reg>> = stages
            .iter()
            .map(|(_, p, _)| p.tma.map(|t| self.tensor_map(t.decl(p.source().0))))
            .collect();
        let bytes = stages
            .iter()
            .filter_map(|(_, p, _)| p.tma.map(|t| t.bytes))
            .sum();
        // One elected lane of warp 0 issues: `elect.sync` tells ptxas that
        // exactly one lane runs the TMA instructions (with `tid == 0` it
        // loops over the lanes that might).
        let elected = self.f.reg(Ty::Pred);
        self.f.push(Inst::Elect { dst: elected });
        let warp0 = self.f.setp(Cmp::Lt, Ty::S64, self.tid, Operand::Int(32));
        let p0 = self.f.pred_op(Some(BinOp::And), elected, warp0);
        let skip = self.f.label();
        self.f.push(Inst::Bra {
            target: skip,
            guard: Some(Guard {
                pred: p0,
                negated: true,
            }),
        });
        for b in 0..depth as i64 {
            self.f.push(Inst::MbarInit {
                addr: Addr::Shared(bars as i64 + 8 * b),
                count: 1,
            });
        }
        self.f.push(Inst::Label(skip));
        Some(TmaRing {
            bars,
            rbar: self.f.mov(Ty::U32, Operand::Int(0)),
            wbar: self.f.mov(Ty::U32, Operand::Int(8 * (depth as i64 - 1))),
            parity: self.f.mov(Ty::U32, Operand::Int(0)),
            p0,
            maps,
            bytes,
        })
    }

    /// Issues the copies of the trip `ahead` trips after the one whose
    /// loop variable is in `trip.iv` into
    /// buffer `buf`, skipped past the bound, committed either way.
    fn trip_copies(
        &mut self,
        stages: &[(Value, CopyPlan<'k>, Vec<u64>)],
        Trip { arg, iv, step, hi }: Trip,
        ahead: usize,
        buf: (Buf, Option<&TmaRing>),
    ) -> R<()> {
        let ivty = self.f.ty(iv);
        let at = if ahead == 0 {
            iv
        } else {
            self.f.fma(ivty, step, Operand::Int(ahead as i64), iv)
        };
        let exists = self.f.setp(Cmp::Lt, ivty, at, Operand::Reg(hi));
        let saved = self.vals[arg.index()].take();
        self.vals[arg.index()] = Some(Val::Uniform(at));
        self.memo.clear();
        let result = self.copies_unless(exists, stages, buf);
        self.vals[arg.index()] = saved;
        self.memo.clear();
        result
    }

    /// Issues the copies of `stages` into buffer `buf` where `pred` holds:
    /// the `cp.async` ones committed as one group (empty or not), the TMA
    /// ones by thread 0 on the buffer's barrier.
    fn copies_unless(
        &mut self,
        pred: Reg,
        stages: &[(Value, CopyPlan<'k>, Vec<u64>)],
        (buf, tma): (Buf, Option<&TmaRing>),
    ) -> R<()> {
        let skip = self.f.label();
        self.f.push(Inst::Bra {
            target: skip,
            guard: Some(Guard {
                pred,
                negated: true,
            }),
        });
        let at = |offs: &[u64]| match buf {
            Buf::Fixed(b) => (offs[b], None),
            Buf::Ring(r) => (offs[0], Some(r)),
        };
        for (_, plan, offs) in stages {
            if plan.tma.is_none() {
                let (off, ring) = at(offs);
                self.emit_copy(plan, off, ring)?;
            }
        }
        if let Some(ring) = tma {
            let bar = match buf {
                Buf::Fixed(b) => Addr::Shared(ring.bars as i64 + 8 * b as i64),
                Buf::Ring(_) => Addr::Reg(self.shared_plus(Some(ring.wbar)), ring.bars as i64),
            };
            let guard = Some(Guard {
                pred: ring.p0,
                negated: false,
            });
            self.f.push(Inst::MbarExpectTx {
                addr: bar,
                bytes: ring.bytes,
                guard,
            });
            for ((_, plan, offs), map) in stages.iter().zip(&ring.maps) {
                if let (Some(t), Some(map)) = (plan.tma, map) {
                    let (_, index) = plan.source();
                    self.emit_tma(index, &t, at(offs), bar, (*map, ring.p0))?;
                }
            }
        }
        self.f.push(Inst::Label(skip));
        self.f.push(Inst::CpAsyncCommit);
        Ok(())
    }

    /// The shared offset of stage result `v` in the current trip, when the
    /// loop is pipelined; at the trip's first stage, waits for its tiles
    /// and issues the next trip's copies.
    pub(super) fn pipelined_stage(&mut self, v: Value) -> R<Option<u64>> {
        let Some(pipe) = &self.pipe else {
            return Ok(None);
        };
        let Some((_, plan, offs)) = pipe.stages.iter().find(|(r, _, _)| *r == v) else {
            return Ok(None);
        };
        let off = offs[0];
        let stored = super::smem::Stored {
            ring: Some(pipe.read),
            ..plan.stored
        };
        if !pipe.issued && pipe.ws.is_some() {
            // A producer warp issues the copies: wait for this trip's.
            let mut pipe = self.pipe.take().expect("checked above");
            if let Some(ws) = &pipe.ws {
                self.wait_phase(ws.full, ws.rbar, Operand::Reg(ws.parity));
            }
            pipe.issued = true;
            self.pipe = Some(pipe);
        } else if !pipe.issued {
            let pipe = self.pipe.take().expect("checked above");
            // This trip's group is the oldest of depth - 1 in flight.
            let depth = pipe.depth();
            self.f.push(Inst::CpAsyncWait(depth as u32 - 2));
            if let Some(ring) = &pipe.tma {
                self.wait_phase(ring.bars, ring.rbar, Operand::Reg(ring.parity));
            }
            self.f.push(Inst::Barrier);
            // The trip depth - 1 ahead reuses the previous trip's buffer.
            let buf = (Buf::Ring(pipe.write), pipe.tma.as_ref());
            let result = self.trip_copies(&pipe.stages, pipe.trip, depth - 1, buf);
            self.pipe = Some(Pipe {
                issued: true,
                ..pipe
            });
            result?;
        }
        self.stored.insert(v, stored);
        Ok(Some(off))
    }

    /// Waits until the phase of `parity` of the barrier `rbar` bytes after
    /// shared offset `bars` has completed (for the TMA copies into the
    /// buffer a trip reads: until they have landed).
    pub(super) fn wait_phase(&mut self, bars: u64, rbar: Reg, parity: Operand) {
        let bar = self.shared_plus(Some(rbar));
        let again = self.f.label();
        self.f.push(Inst::Label(again));
        let done = self.f.reg(Ty::Pred);
        self.f.push(Inst::MbarTryWait {
            dst: done,
            addr: Addr::Reg(bar, bars as i64),
            parity,
        });
        self.f.push(Inst::Bra {
            target: again,
            guard: Some(Guard {
                pred: done,
                negated: true,
            }),
        });
    }

    /// Ends a pipelined trip: the buffer it read is the next one to
    /// refill, and the next trip reads the following buffer of the ring
    /// (the barriers rotate alike; the read parity flips at each lap).
    pub(super) fn advance_ring(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return;
        };
        pipe.issued = false;
        let (read, write, step) = (pipe.read, pipe.write, pipe.step);
        let depth = pipe.depth() as i64;
        let ws = pipe.ws;
        if let Some(ring) = pipe.tma.clone() {
            self.f.push(Inst::Mov {
                dst: ring.wbar,
                src: Operand::Reg(ring.rbar),
            });
            self.rotate_barrier(ring.rbar, ring.parity, depth);
        }
        if let Some(ws) = ws {
            // Every consumer thread is done with the buffer: the producer
            // may refill it.
            let bar = self.shared_plus(Some(ws.rbar));
            self.f.push(Inst::MbarArrive {
                addr: Addr::Reg(bar, ws.empty as i64),
                guard: None,
            });
            self.rotate_barrier(ws.rbar, ws.parity, depth);
        }
        let end = step * depth;
        if ws.is_none() {
            self.f.push(Inst::Mov {
                dst: write,
                src: Operand::Reg(read),
            });
        }
        let next = self.f.bin(BinOp::Add, Ty::U32, read, Operand::Int(step));
        let wrap = self.f.setp(Cmp::Ge, Ty::U32, next, Operand::Int(end));
        let next = self
            .f
            .selp(Ty::U32, wrap, Operand::Int(0), Operand::Reg(next));
        self.f.push(Inst::Mov {
            dst: read,
            src: Operand::Reg(next),
        });
    }

    /// Moves `bar` (bytes from a ring's first barrier) on to the next of
    /// `depth` barriers, flipping `parity` at each lap.
    pub(super) fn rotate_barrier(&mut self, bar: Reg, parity: Reg, depth: i64) {
        let next = self.f.bin(BinOp::Add, Ty::U32, bar, Operand::Int(8));
        let wrap = self.f.setp(Cmp::Ge, Ty::U32, next, Operand::Int(8 * depth));
        let next = self
            .f
            .selp(Ty::U32, wrap, Operand::Int(0), Operand::Reg(next));
        self.f.push(Inst::Mov {
            dst: bar,
            src: Operand::Reg(next),
        });
        let flipped = self.f.bin(BinOp::Xor, Ty::B32, parity, Operand::Int(1));
        let flipped = self
            .f
            .selp(Ty::U32, wrap, Operand::Reg(flipped), Operand::Reg(parity));
        self.f.push(Inst::Mov {
            dst: parity,
            src: Operand::Reg(flipped),
        });
    }
}
