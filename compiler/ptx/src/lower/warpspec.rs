//! Warp specialisation (sm_90a): a kernel whose software-pipelined loops
//! stage every tile with the TMA gets one more warpgroup, the producer,
//! that does nothing but issue those copies, running ahead of the
//! kernel's own warps (the consumers) by the depth of each ring.
//!
//! - Each ring buffer has two `mbarrier`s: "full" (one arrival, the
//!   producer's `expect_tx`, plus the copies' bytes) and "empty" (one
//!   arrival per consumer thread). A consumer trip waits for its buffer's
//!   full phase, computes, and arrives on its empty barrier; the producer
//!   waits for a buffer's empty phase of the previous lap (the first lap
//!   passes at once: the phase before the first counts as complete) before
//!   refilling it. No block-wide barrier is left in the main loop.
//! - The consumers run the kernel as lowered without specialisation, less
//!   the copies, with their `bar.sync 0`s turned into named barrier 1 for
//!   their own threads (the producer exits early). The producer is a second
//!   lowering of the kernel body that keeps only uniform values, index
//!   arithmetic and the loops' copy issue: one elected thread of its first
//!   warp runs it.
//! - `setmaxnreg` moves registers from the producer warpgroup (which needs
//!   few) to the consumers, within the block's launch allocation.
//! - Rings of specialised loops are never reused by later code: the
//!   producer may fill a later loop's ring while consumers still work in an
//!   earlier one.
//! - A specialised kernel is persistent: the launcher starts only the blocks
//!   the SMs hold at once and each block loops over the kernel's programs (block
//!   `b` runs `b`, `b + nctaid.x`, ...), program ids derived from the
//!   program's number. The
//!   rings' positions and phases carry over from one program to the next,
//!   so the producer fetches a program's first tiles while the consumers
//!   still run the previous one's epilogue; the consumers meet once per
//!   program before reusing its shared memory.
//!
//! A kernel qualifies when its warps form whole warpgroups with room for
//! one more, every pipelined loop lies at the top level of the kernel, and
//! every staged load in them is one the TMA copies; otherwise (or when the
//! extra shared memory does not fit) it is lowered without specialisation.

use super::pipeline::Stages;
use super::{Lower, Val, R};
use crate::ir::*;
use tessera_core::Bindings;
use tessera_tile::{Access, Block, Kernel, TOp};

/// Threads in the producer warpgroup.
pub(super) const PRODUCER_THREADS: u32 = 128;

/// Registers per thread the producer keeps after `setmaxnreg.dec`.
const PRODUCER_REGS: u32 = 40;

/// The most registers per thread the consumers claim.
const CONSUMER_REGS_MAX: u32 = 240;

/// The named barrier the consumers meet on.
const CONSUMER_BARRIER: u32 = 1;

/// Warp specialisation state of the kernel being lowered.
pub(super) struct WarpSpec<'k> {
    /// Consumer threads: the kernel's own warps.
    consumers: u32,
    /// The specialised loops, in program order.
    loops: Vec<Ring<'k>>,
}

impl WarpSpec<'_> {
    /// Specialisation for a kernel of `consumers` threads.
    pub fn new(consumers: u32) -> Self {
        WarpSpec {
            consumers,
            loops: Vec::new(),
        }
    }
}

/// The program a persistent kernel's block is running.
#[derive(Clone, Copy)]
pub(super) struct Persist {
    /// Its number (u32), row-major over the grid.
    program: Reg,
    /// The kernel's grid.
    pub grid: [i64; 3],
}

/// The grid of kernel `k` under `b` and its number of programs, when a
/// persistent loop over them is worth it (more than one program, few
/// enough for 32-bit numbers).
pub(super) fn programs(k: &Kernel, b: &Bindings) -> Option<([i64; 3], i64)> {
    let mut grid = [1i64; 3];
    for (g, s) in grid.iter_mut().zip(&k.grid) {
        *g = s.eval(b).ok()?;
    }
    let n = grid.iter().try_fold(1i64, |n, g| n.checked_mul(*g))?;
    (n > 1 && n < i64::from(i32::MAX)).then_some((grid, n))
}

/// What a consumer of a specialised loop waits on and releases.
#[derive(Clone, Copy)]
pub(super) struct Consumer {
    /// Shared offsets of the first full and the first empty barrier.
    pub full: u64,
    pub empty: u64,
    /// Bytes from the first barrier to the one this trip uses (u32).
    pub rbar: Reg,
    /// The parity of this trip's phase of its full barrier (u32).
    pub parity: Reg,
}

/// Where the producer is in a ring: the tensor maps of its loads, and
/// the buffer (bytes from the first), barrier (bytes from the first) and
/// empty-phase parity of the next trip (u32).
struct Position {
    maps: Vec<(super::tma::TmaPlan, Reg)>,
    slot: Reg,
    bar: Reg,
    parity: Reg,
}

/// A specialised loop, as its producer needs it.
struct Ring<'k> {
    /// The loop body (the producer finds the loop by it).
    body: &'k Block,
    /// The staged loads and their buffers.
    stages: Stages<'k>,
    /// Buffers per load.
    depth: usize,
    /// Bytes from one buffer of every load to the next.
    step: i64,
    /// Shared offsets of the first full and the first empty barrier.
    full: u64,
    empty: u64,
    /// Bytes the TMA copies of one trip deliver.
    bytes: u32,
}

/// Whether kernel `k` may be specialised (cheap, structural test: the
/// lowering decides the rest).
pub(super) fn may_specialise(k: &Kernel) -> bool {
    let pipelined = k.body.insts.iter().any(|i| match &i.op {
        TOp::For { body, .. } => body
            .insts
            .iter()
            .any(|j| matches!(j.op, TOp::Stage { shared, .. } if k.shared[shared].stages >= 2)),
        _ => false,
    });
    k.threads.is_multiple_of(128) && k.threads + PRODUCER_THREADS <= 1024 && pipelined
}

impl<'k> Lower<'k> {
    /// The consumers' side of a specialised pipelined loop over `body`
    /// whose `stages` lie in a ring of `depth` buffers `step` bytes apart:
    /// allocates its barriers and records what the producer needs.
    pub(super) fn plan_consumer(
        &mut self,
        body: &'k Block,
        stages: &Stages<'k>,
        depth: usize,
        step: i64,
    ) -> R<Consumer> {
        if let Some((_, p, _)) = stages.iter().find(|(_, p, _)| p.tma.is_none()) {
            return Err(format!(
                "warp specialisation needs every staged tile copied by the TMA; {} is not",
                p.value
            ));
        }
        let bytes = stages
            .iter()
            .filter_map(|(_, p, _)| p.tma.map(|t| t.bytes))
            .sum();
        let n = 8 * depth as u64;
        let full = self.alloc_shared_aligned("full barriers".into(), n, 8);
        let empty = self.alloc_shared_aligned("empty barriers".into(), n, 8);
        let ws = self.ws.as_mut().ok_or("internal error: not specialised")?;
        ws.loops.push(Ring {
            body,
            stages: stages.clone(),
            depth,
            step,
            full,
            empty,
            bytes,
        });
        self.f.push(Inst::Comment(format!(
            "warp-specialised pipeline: {} staged loads, {depth} buffers each, \
             copied by the producer warpgroup",
            stages.len()
        )));
        // (In the prologue: a persistent kernel's next program goes on
        // with the phases where this one left them.)
        let (rbar, parity) = self.in_prologue(|l| {
            (
                l.f.mov(Ty::U32, Operand::Int(0)),
                l.f.mov(Ty::U32, Operand::Int(0)),
            )
        });
        Ok(Consumer {
            full,
            empty,
            rbar,
            parity,
        })
    }

    /// Completes a specialised kernel whose consumers' code (ending in
    /// `ret`) is lowered: the consumers' barriers become their named
    /// barrier, the producer's code follows theirs, and the prologue ends
    /// by initialising the rings' barriers and sending each warpgroup its
    /// way. `max_regs` is the launch's registers per thread.
    pub(super) fn finish_specialised(&mut self, ws: WarpSpec<'k>, max_regs: u32) -> R<()> {
        if ws.loops.is_empty() {
            return Err("no loop to specialise".into());
        }
        let c = ws.consumers;
        for i in &mut self.f.body[self.prologue_end..] {
            if matches!(i, Inst::Barrier) {
                *i = Inst::NamedBarrier {
                    id: CONSUMER_BARRIER,
                    threads: c,
                };
            }
        }
        // Registers: the producer keeps few, the consumers take the rest of
        // the block's allocation (when that is more than they have).
        let total = (c + PRODUCER_THREADS) * max_regs;
        let claim = ((total - PRODUCER_THREADS * PRODUCER_REGS.min(max_regs)) / c)
            .min(CONSUMER_REGS_MAX)
            & !7;
        let rebalance = claim > max_regs;
        // The producer.
        let producer = self.f.label();
        self.f.push(Inst::Label(producer));
        if rebalance {
            self.f.push(Inst::SetMaxNReg {
                inc: false,
                regs: PRODUCER_REGS,
            });
        }
        self.produce(&ws, c)?;
        self.f.push(Inst::Ret);
        // The split, at the end of the prologue.
        self.in_prologue(|l| {
            let first = l.f.setp(Cmp::Eq, Ty::S64, l.tid, Operand::Int(0));
            let skip = l.f.label();
            l.f.push(Inst::Bra {
                target: skip,
                guard: Some(Guard {
                    pred: first,
                    negated: true,
                }),
            });
            for ring in &ws.loops {
                for b in 0..ring.depth as i64 {
                    l.f.push(Inst::MbarInit {
                        addr: Addr::Shared(ring.full as i64 + 8 * b),
                        count: 1,
                    });
                    l.f.push(Inst::MbarInit {
                        addr: Addr::Shared(ring.empty as i64 + 8 * b),
                        count: c,
                    });
                }
            }
            l.f.push(Inst::Label(skip));
            l.f.push(Inst::Barrier);
            let producing =
                l.f.setp(Cmp::Ge, Ty::S64, l.tid, Operand::Int(i64::from(c)));
            l.f.push(Inst::Bra {
                target: producer,
                guard: Some(Guard {
                    pred: producing,
                    negated: false,
                }),
            });
            if rebalance {
                l.f.push(Inst::SetMaxNReg {
                    inc: true,
                    regs: claim,
                });
            }
        });
        Ok(())
    }

    /// Runs `body` (which lowers the kernel body) once per program of a
    /// persistent kernel with `grid` (`n` programs): block `b` takes
    /// programs `b`, `b + nctaid.x`, ... After each, the block's threads
    /// meet when `meet` (before the next program reuses shared memory).
    pub(super) fn each_program(
        &mut self,
        grid: [i64; 3],
        n: i64,
        meet: bool,
        body: impl FnOnce(&mut Self) -> R<()>,
    ) -> R<()> {
        let first = self.f.reg(Ty::U32);
        self.f.push(Inst::Special {
            dst: first,
            reg: Special::Ctaid(0),
        });
        let blocks = self.f.reg(Ty::U32);
        self.f.push(Inst::Special {
            dst: blocks,
            reg: Special::Nctaid(0),
        });
        let program = self.f.mov(Ty::U32, Operand::Reg(first));
        let end = self.f.mov(Ty::U32, Operand::Int(n));
        let (top, exit) = (self.f.label(), self.f.label());
        self.f.push(Inst::Comment(format!(
            "persistent: each block runs programs ctaid.x, ctaid.x + nctaid.x, ... of {n}"
        )));
        self.f.loop_test(top, exit, (Ty::U32, program, end));
        self.memo.clear();
        let saved = self.persist.replace(Persist { program, grid });
        body(self)?;
        self.persist = saved;
        if meet {
            self.f.push(Inst::Barrier);
        }
        let next = self
            .f
            .bin(BinOp::Add, Ty::U32, program, Operand::Reg(blocks));
        self.f.push(Inst::Mov {
            dst: program,
            src: Operand::Reg(next),
        });
        self.f.loop_back(top, exit);
        self.memo.clear();
        Ok(())
    }

    /// The id along `axis` (u32) of the program a persistent kernel's
    /// block is running: its number in row-major order over the grid.
    pub(super) fn program_id(&mut self, axis: u8) -> Reg {
        let Some(Persist { program, grid }) = self.persist else {
            unreachable!("program ids of a persistent kernel are asked inside its loop")
        };
        let (inner, extent) = match axis {
            0 => (1, grid[0]),
            1 => (grid[0], grid[1]),
            _ => (grid[0] * grid[1], grid[2]),
        };
        let mut r = program;
        if inner > 1 {
            r = self.f.bin(BinOp::Div, Ty::U32, r, Operand::Int(inner));
        }
        if axis < 2 && inner * extent < grid.iter().product::<i64>() {
            r = self.f.bin(BinOp::Rem, Ty::U32, r, Operand::Int(extent));
        }
        r
    }

    /// The producer's code: the kernel body again, keeping only uniform
    /// values, lazy index arithmetic and loads, and the copy loops of the
    /// specialised loops, run by one elected thread of the producer's first
    /// warp.
    fn produce(&mut self, ws: &WarpSpec<'k>, consumers: u32) -> R<()> {
        // Nothing the consumers computed is available here.
        self.vals.iter_mut().for_each(|v| *v = None);
        self.memo.clear();
        self.vec_loads.clear();
        self.spilled.clear();
        self.spill_bytes.clear();
        self.free_spills.clear();
        self.stored.clear();
        self.cur = None;
        self.pipe = None;
        self.tensor_maps.clear();
        let elected = self.f.reg(Ty::Pred);
        self.f.push(Inst::Elect { dst: elected });
        let first_warp = self.f.setp(
            Cmp::Lt,
            Ty::S64,
            self.tid,
            Operand::Int(i64::from(consumers) + 32),
        );
        let issuer = self.f.pred_op(Some(BinOp::And), elected, first_warp);
        let done = self.f.label();
        self.f.push(Inst::Bra {
            target: done,
            guard: Some(Guard {
                pred: issuer,
                negated: true,
            }),
        });
        // Each ring's tensor maps and position, which carry over from one
        // program to the next.
        let mut states = Vec::new();
        for ring in &ws.loops {
            let maps = ring
                .stages
                .iter()
                .map(|(_, p, _)| {
                    let t = p
                        .tma
                        .ok_or("internal error: a specialised load without TMA")?;
                    Ok((t, self.tensor_map(t.decl(p.source().0))))
                })
                .collect::<R<Vec<_>>>()?;
            let [slot, bar, parity] = [0; 3].map(|_| self.f.mov(Ty::U32, Operand::Int(0)));
            states.push(Position {
                maps,
                slot,
                bar,
                parity,
            });
        }
        let k = self.k;
        let walk = |l: &mut Self| -> R<()> {
            let mut next = 0;
            for inst in &k.body.insts {
                match &inst.op {
                    TOp::For {
                        lo, hi, step, body, ..
                    } => {
                        let ring = ws.loops.get(next).filter(|r| std::ptr::eq(r.body, body));
                        if let (Some(ring), Some(state)) = (ring, states.get(next)) {
                            next += 1;
                            l.produce_loop(ring, state, (*lo, *hi, *step), issuer)?;
                        }
                    }
                    _ => l.produce_value(inst)?,
                }
            }
            if next != ws.loops.len() {
                return Err("a warp-specialised loop lies inside another loop".into());
            }
            Ok(())
        };
        match programs(k, self.b) {
            Some((grid, n)) => self.each_program(grid, n, false, walk)?,
            None => walk(self)?,
        }
        self.f.push(Inst::Label(done));
        Ok(())
    }

    /// Lowers `inst` for the producer where it is a uniform or lazy value
    /// (which emits code only for scalars); skips it otherwise.
    fn produce_value(&mut self, inst: &'k tessera_tile::Inst) -> R<()> {
        match &inst.op {
            TOp::ProgramId(_) | TOp::NumPrograms(_) => self.inst(inst),
            TOp::Load { param, .. }
                if self.k.params[*param].access == Access::In && self.all_lazy(inst) =>
            {
                self.lazy(inst)
            }
            op if super::elementwise_op(op) && self.all_lazy(inst) => self.elementwise(inst),
            _ => Ok(()),
        }
    }

    /// The producer's loop of `ring` (the loop's bounds and step): for
    /// each trip, wait until the consumers released the buffer, then expect
    /// its bytes on its full barrier and issue its copies.
    fn produce_loop(
        &mut self,
        ring: &Ring<'k>,
        state: &Position,
        (lo, hi, step): (
            tessera_tile::Value,
            tessera_tile::Value,
            tessera_tile::Value,
        ),
        issuer: Reg,
    ) -> R<()> {
        let Position {
            ref maps,
            slot,
            bar,
            parity,
        } = *state;
        let lo = self.elem(lo, &[])?;
        let hi = self.elem(hi, &[])?;
        let step = self.elem(step, &[])?;
        let ivty = self.f.ty(lo);
        let iv = self.f.mov(ivty, Operand::Reg(lo));
        let arg = *ring
            .body
            .args
            .first()
            .ok_or("internal error: a pipelined loop without a variable")?;
        let (top, exit) = (self.f.label(), self.f.label());
        self.f.push(Inst::Comment(format!(
            "producer: {} staged loads into {} buffers",
            ring.stages.len(),
            ring.depth
        )));
        self.f.loop_test(top, exit, (ivty, iv, hi));
        self.memo.clear();
        // The body's index arithmetic and loads, at this trip.
        self.vals[arg.index()] = Some(Val::Uniform(iv));
        for inst in &ring.body.insts {
            self.produce_value(inst)?;
        }
        // The previous lap's consumers are done with the buffer.
        let previous = self.f.bin(BinOp::Xor, Ty::B32, parity, Operand::Int(1));
        self.wait_phase(ring.empty, bar, Operand::Reg(previous));
        let base = self.shared_plus(Some(bar));
        let full = Addr::Reg(base, ring.full as i64);
        self.f.push(Inst::MbarExpectTx {
            addr: full,
            bytes: ring.bytes,
            guard: None,
        });
        for ((_, plan, offs), (tma, map)) in ring.stages.iter().zip(maps) {
            let (_, index) = plan.source();
            self.emit_tma(index, tma, (offs[0], Some(slot)), full, (*map, issuer))?;
        }
        let next = self.f.bin(BinOp::Add, ivty, iv, step);
        self.f.push(Inst::Mov {
            dst: iv,
            src: Operand::Reg(next),
        });
        let end = ring.step * ring.depth as i64;
        let next = self
            .f
            .bin(BinOp::Add, Ty::U32, slot, Operand::Int(ring.step));
        let wrap = self.f.setp(Cmp::Ge, Ty::U32, next, Operand::Int(end));
        let next = self
            .f
            .selp(Ty::U32, wrap, Operand::Int(0), Operand::Reg(next));
        self.f.push(Inst::Mov {
            dst: slot,
            src: Operand::Reg(next),
        });
        self.rotate_barrier(bar, parity, ring.depth as i64);
        self.f.loop_back(top, exit);
        self.memo.clear();
        Ok(())
    }
}
