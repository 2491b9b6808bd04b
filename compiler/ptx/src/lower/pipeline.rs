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
}

/// Which buffer copies go to: a fixed one (before the loop), or the one
/// a ring register selects.
#[derive(Clone, Copy)]
enum Buf {
    Fixed(usize),
    Ring(Reg),
}

impl Pipe<'_> {
    /// Buffers in the ring (the pipeline's stages).
    fn depth(&self) -> usize {
        self.stages.first().map_or(1, |(_, _, offs)| offs.len())
    }
}

/// A pipelined loop's variable: the body's argument, its register, the
/// step and the bound.
#[derive(Clone, Copy)]
struct Trip {
    arg: Value,
    iv: Reg,
    step: Reg,
    hi: Reg,
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
        // Record the body's lazy values (index arithmetic and the loads
        // themselves) with the loop variable bound to the first trip.
        self.vals[iv_arg.index()] = Some(Val::Uniform(iv));
        self.memo.clear();
        let defined: Vec<Value> = body.insts.iter().flat_map(|i| i.results.clone()).collect();
        for inst in &body.insts {
            let lazy_kind = matches!(
                inst.op,
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
            );
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
        // Buffer b of every load, then buffer b + 1: a ring of equal steps.
        for b in 0..depth {
            for (_, plan, offs) in &mut stages {
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
        self.f.push(Inst::Comment(format!(
            "software pipeline: {} staged loads, {depth} buffers each",
            stages.len()
        )));
        // The tiles of the first depth - 1 trips, those that exist.
        let trip = Trip {
            arg: iv_arg,
            iv,
            step,
            hi,
        };
        // The buffers may be regions an earlier loop (or the previous trip
        // of an enclosing loop) was still reading.
        self.f.push(Inst::Barrier);
        for t in 0..depth - 1 {
            self.trip_copies(&stages, trip, t, Buf::Fixed(t))?;
        }
        let read = self.f.mov(Ty::U32, Operand::Int(0));
        let write = self
            .f
            .mov(Ty::U32, Operand::Int((depth as i64 - 1) * ring_step));
        self.pipe = Some(Pipe {
            stages,
            trip,
            read,
            write,
            step: ring_step,
            issued: false,
        });
        Ok(depth)
    }

    /// Issues the copies of the trip `ahead` trips after the one whose
    /// loop variable is in `trip.iv` into
    /// buffer `buf`, skipped past the bound, committed either way.
    fn trip_copies(
        &mut self,
        stages: &[(Value, CopyPlan<'k>, Vec<u64>)],
        Trip { arg, iv, step, hi }: Trip,
        ahead: usize,
        buf: Buf,
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

    /// Issues the copies of `stages` into buffer `buf` where `pred` holds,
    /// then commits them as one group.
    fn copies_unless(
        &mut self,
        pred: Reg,
        stages: &[(Value, CopyPlan<'k>, Vec<u64>)],
        buf: Buf,
    ) -> R<()> {
        let skip = self.f.label();
        self.f.push(Inst::Bra {
            target: skip,
            guard: Some(Guard {
                pred,
                negated: true,
            }),
        });
        for (_, plan, offs) in stages {
            match buf {
                Buf::Fixed(b) => self.emit_copy(plan, offs[b], None)?,
                Buf::Ring(r) => self.emit_copy(plan, offs[0], Some(r))?,
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
        if !pipe.issued {
            let pipe = self.pipe.take().expect("checked above");
            // This trip's group is the oldest of depth - 1 in flight.
            let depth = pipe.depth();
            self.f.push(Inst::CpAsyncWait(depth as u32 - 2));
            self.f.push(Inst::Barrier);
            // The trip depth - 1 ahead reuses the previous trip's buffer.
            let result =
                self.trip_copies(&pipe.stages, pipe.trip, depth - 1, Buf::Ring(pipe.write));
            self.pipe = Some(Pipe {
                issued: true,
                ..pipe
            });
            result?;
        }
        self.stored.insert(v, stored);
        Ok(Some(off))
    }

    /// Ends a pipelined trip: the buffer it read is the next one to
    /// refill, and the next trip reads the following buffer of the ring.
    pub(super) fn advance_ring(&mut self) {
        let Some(pipe) = &mut self.pipe else {
            return;
        };
        pipe.issued = false;
        let (read, write, step) = (pipe.read, pipe.write, pipe.step);
        let end = step * pipe.depth() as i64;
        self.f.push(Inst::Mov {
            dst: write,
            src: Operand::Reg(read),
        });
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
}
