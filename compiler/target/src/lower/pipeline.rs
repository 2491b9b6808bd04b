//! Software pipelining of a loop's staged loads (`pipeline_stages` ≥ 2):
//! while one trip computes on its tiles in shared memory, the `cp.async`
//! copies of the next trip's tiles are already in flight into a second
//! buffer.
//!
//! A loop qualifies when every `stage` in its body stages a load that
//! `cp.async` can copy (see `stage.rs`), whose index depends on the trip
//! only through lazily evaluated values, and whose shared declaration asks
//! for at least two stages. Then:
//!
//! - before the loop, the first trip's tiles are copied into buffer 0;
//! - the loop is unrolled by two so that each copy of the body reads fixed
//!   buffers (0, then 1): shared addresses stay constants;
//! - at a trip's first `stage`: wait for the outstanding copies (this
//!   trip's tiles), meet at a barrier (the tiles are visible, and every
//!   thread is done reading the other buffer), then issue the next trip's
//!   copies into the other buffer, evaluated with the loop variable
//!   advanced by one step, skipped on the last trip.

use super::stage::CopyPlan;
use super::{Lower, Val, R};
use crate::ir::*;
use tessera_tile::{Block, TOp, Value};

/// The pipeline of the loop being lowered.
pub(super) struct Pipe<'k> {
    /// Per staged load: the stage's result, how to copy it, its two
    /// buffers.
    stages: Vec<(Value, CopyPlan<'k>, [u64; 2])>,
    /// The loop variable (the body's first argument).
    iv_arg: Value,
    /// Its register, the step and the bound.
    iv: Reg,
    step: Reg,
    hi: Reg,
    /// The buffer the current copy of the body reads.
    pub cur: usize,
    /// Whether this trip has issued the next trip's copies.
    pub issued: bool,
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
            Some(inst) => super::operands(&inst.op)
                .iter()
                .all(|o| self.follows_trip(*o, body, iv_arg, depth + 1)),
            None => false,
        }
    }

    /// Sets up the pipeline of a loop over `body` (loop variable in `iv`,
    /// bound `hi`, step `step`), issuing the first trip's copies, or
    /// returns false when the loop does not qualify (having emitted nothing
    /// that matters).
    pub(super) fn plan_pipeline(
        &mut self,
        body: &'k Block,
        iv: Reg,
        hi: Reg,
        step: Reg,
    ) -> R<bool> {
        if self.pipe.is_some() {
            return Ok(false);
        }
        let Some(iv_arg) = body.args.first().copied() else {
            return Ok(false);
        };
        let staged: Vec<(Value, Value, usize)> = body
            .insts
            .iter()
            .filter_map(|i| match (&i.op, i.results.first()) {
                (TOp::Stage { value, shared }, Some(r)) => Some((*r, *value, *shared)),
                _ => None,
            })
            .collect();
        if staged.is_empty() || staged.iter().any(|(_, _, s)| self.k.shared[*s].stages < 2) {
            return Ok(false);
        }
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
            let ready = super::operands(&inst.op).iter().all(|o| {
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
        for (result, value, _) in &staged {
            let Some(plan) = self.copy_plan(*value)? else {
                return Ok(false);
            };
            let Some(load) = self.defs.get(value) else {
                return Ok(false);
            };
            let follows = super::operands(&load.op)
                .iter()
                .all(|o| self.follows_trip(*o, &defined, iv_arg, 0));
            if !follows {
                return Ok(false);
            }
            stages.push((*result, plan, [0u64; 2]));
        }
        for (_, plan, offs) in &mut stages {
            for (b, off) in offs.iter_mut().enumerate() {
                *off = self.alloc_shared(format!("{}.{b}", plan.value), plan.bytes());
            }
        }
        self.f.push(Inst::Comment(format!(
            "software pipeline: {} staged loads, two buffers each",
            stages.len()
        )));
        // The first trip's tiles, if there is a first trip.
        let any = self.f.setp(Cmp::Lt, self.f.ty(iv), iv, Operand::Reg(hi));
        self.copies_unless(any, &stages, 0)?;
        self.pipe = Some(Pipe {
            stages,
            iv_arg,
            iv,
            step,
            hi,
            cur: 0,
            issued: false,
        });
        Ok(true)
    }

    /// Issues the copies of `stages` into buffer `buf` where `pred` holds,
    /// then commits them as one group.
    fn copies_unless(
        &mut self,
        pred: Reg,
        stages: &[(Value, CopyPlan<'k>, [u64; 2])],
        buf: usize,
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
            self.emit_copy(plan, offs[buf])?;
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
        let (off, by_columns) = (offs[pipe.cur], plan.by_columns);
        if !pipe.issued {
            let pipe = self.pipe.take().expect("checked above");
            self.f.push(Inst::CpAsyncWait(0));
            self.f.push(Inst::Barrier);
            let ivty = self.f.ty(pipe.iv);
            let next = self
                .f
                .bin(BinOp::Add, ivty, pipe.iv, Operand::Reg(pipe.step));
            let more = self.f.setp(Cmp::Lt, ivty, next, Operand::Reg(pipe.hi));
            let saved = self.vals[pipe.iv_arg.index()].take();
            self.vals[pipe.iv_arg.index()] = Some(Val::Uniform(next));
            self.memo.clear();
            let result = self.copies_unless(more, &pipe.stages, 1 - pipe.cur);
            self.vals[pipe.iv_arg.index()] = saved;
            self.memo.clear();
            self.pipe = Some(Pipe {
                issued: true,
                ..pipe
            });
            result?;
        }
        if by_columns {
            self.transposed.insert(v);
        }
        Ok(Some(off))
    }
}
