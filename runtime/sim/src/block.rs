//! One thread block on the CPU: warps of 32 lanes in lockstep, divergence
//! and reconvergence, barriers, shared memory with its checks, and
//! asynchronous copies.
//!
//! A warp runs the instruction at the smallest program counter among its
//! running lanes, for every lane that is there: lanes that branch apart
//! run their paths one after the other and meet again where the paths
//! join (for the structured code compilers emit, the immediate
//! post-dominator). Warps of a block run in turn until each has finished
//! or waits at `bar.sync`; the barrier then opens.

mod mma;
mod sync;

use crate::alu;
use crate::check::{SharedCheck, Stamp};
use crate::memory::View;
use crate::tma::Mbar;
use crate::wgmma::{self, WgOp};
use crate::{Kernel, Options, SimError, SimErrorKind, Stats};
use std::collections::VecDeque;
use tessera_ptx::ir::*;

/// Lanes of a warp.
pub const WARP: usize = 32;

/// Where the shared window starts: address 0 stays invalid, so that a
/// zero or global pointer used as a shared address faults.
pub const SHARED_BASE: u64 = 0x400;

/// Where each thread's local array starts (its own window: every thread
/// sees its array at this address).
pub const LOCAL_BASE: u64 = 0x1_0000_0000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lane {
    /// Not part of the block (the last warp of a block whose size is not a
    /// multiple of 32).
    Absent,
    Running,
    /// Waiting at the `bar.sync 0` its program counter points at.
    AtBarrier,
    /// Waiting at the named barrier (`bar.sync id, threads`) of this
    /// number, which its program counter points at.
    AtNamed(u8),
    Exited,
}

/// One asynchronous 16-byte copy.
#[derive(Clone, Copy)]
struct AsyncCopy {
    src: u64,
    dst: u64,
}

/// The state of one warp.
struct Warp {
    /// Register `r` of lane `l` is `regs[r * WARP + l]`.
    regs: Vec<u64>,
    pc: [usize; WARP],
    lane: [Lane; WARP],
    /// Per lane: copies issued and not yet committed, then committed
    /// groups, oldest first.
    pending: Vec<Vec<AsyncCopy>>,
    groups: Vec<VecDeque<Vec<AsyncCopy>>>,
    /// Issued `wgmma.mma_async` not yet committed, then committed groups,
    /// oldest first.
    wg_pending: Vec<WgOp>,
    wg_groups: VecDeque<Vec<WgOp>>,
    /// Whether a `wgmma.fence` came since the last `wgmma.wait_group`.
    wg_fenced: bool,
    /// Per register: the in-flight wgmmas writing it; and how many
    /// registers have some.
    locked: Vec<u16>,
    locked_n: usize,
    /// Whether the warp's last `mbarrier.try_wait` failed: it yields.
    stalled: bool,
    /// The barrier (shared offset) and parity of that wait.
    waiting_on: (usize, u32),
}

impl Warp {
    fn new(nregs: usize) -> Warp {
        Warp {
            regs: vec![0; nregs * WARP],
            pc: [0; WARP],
            lane: [Lane::Absent; WARP],
            pending: vec![Vec::new(); WARP],
            groups: vec![Default::default(); WARP],
            wg_pending: Vec::new(),
            wg_groups: VecDeque::new(),
            wg_fenced: false,
            locked: vec![0; nregs],
            locked_n: 0,
            stalled: false,
            waiting_on: (0, 0),
        }
    }

    fn reset(&mut self, present: usize) {
        self.regs.fill(0);
        self.pc = [0; WARP];
        for (l, s) in self.lane.iter_mut().enumerate() {
            *s = if l < present {
                Lane::Running
            } else {
                Lane::Absent
            };
        }
        self.pending.iter_mut().for_each(Vec::clear);
        self.groups.iter_mut().for_each(|g| g.clear());
        self.wg_pending.clear();
        self.wg_groups.clear();
        self.wg_fenced = false;
        self.locked.fill(0);
        self.locked_n = 0;
        self.stalled = false;
    }
}

/// A host thread's reusable state for running blocks of one launch.
pub struct BlockRunner<'k> {
    k: &'k Kernel<'k>,
    opts: &'k Options,
    warps: Vec<Warp>,
    shared: Vec<u8>,
    /// Every thread's local array, thread after thread.
    local: Vec<u8>,
    check: SharedCheck,
    /// The race checks' clock: synchronisations so far (see `check.rs`).
    clock: u32,
    /// Per thread: the clock at its latest synchronisation.
    since: Vec<u32>,
    /// Per named barrier: threads arrived, and the count it waits for (0:
    /// none waiting).
    named: [(u32, u32); 16],
    /// Per 16-byte shared chunk: the in-flight wgmmas reading it; and
    /// how many chunks have some.
    wg_reads: Vec<u16>,
    wg_live: usize,
    /// The block's `mbarrier` objects, by shared offset.
    mbars: std::collections::HashMap<usize, Mbar>,
    /// Events that let a waiting warp go on (arrivals, phases, barriers,
    /// exits): a pass of the block without any, with warps waiting, is a
    /// deadlock.
    progress: u64,
    ctaid: [u32; 3],
    /// What the blocks this runner ran did.
    pub stats: Stats,
}

/// The lane `shfl.sync` reads for `lane`, as the PTX ISA defines it:
/// `clamp` holds the clamp value in bits 0..5 and the segment mask in
/// bits 8..13; a source past the clamp reads the lane's own value.
fn shfl_source(mode: ShflMode, lane: usize, b: usize, clamp: u32) -> usize {
    let c = clamp as usize & 31;
    let seg = (clamp as usize >> 8) & 31;
    let max_lane = (lane & seg) | (c & !seg);
    let min_lane = lane & seg;
    let (j, ok) = match mode {
        ShflMode::Up => {
            let j = lane as isize - b as isize;
            (j.max(0) as usize, j >= max_lane as isize)
        }
        ShflMode::Down => (lane + b, lane + b <= max_lane),
        ShflMode::Bfly => (lane ^ b, (lane ^ b) <= max_lane),
        ShflMode::Idx => {
            let j = min_lane | (b & !seg);
            (j, j <= max_lane)
        }
    };
    if ok && j < WARP {
        j
    } else {
        lane
    }
}

/// The registers a load writes, or the operands a store reads.
#[derive(Clone, Copy)]
enum Values<'a> {
    Load(&'a [Reg]),
    Store(&'a [Operand]),
}

/// The lanes in `mask`, in order.
fn lanes(mask: u32) -> impl Iterator<Item = usize> {
    (0..WARP).filter(move |l| mask & (1 << l) != 0)
}

type R<T> = Result<T, SimError>;

impl<'k> BlockRunner<'k> {
    /// A runner for blocks of `threads` threads.
    pub fn new(k: &'k Kernel<'k>, opts: &'k Options, threads: usize, shared_bytes: usize) -> Self {
        let nregs = k.f.regs.len();
        BlockRunner {
            k,
            opts,
            warps: (0..threads.div_ceil(WARP))
                .map(|_| Warp::new(nregs))
                .collect(),
            shared: vec![0; shared_bytes],
            local: vec![0; threads * k.f.local_bytes as usize],
            check: SharedCheck::new(shared_bytes, opts.checks),
            clock: 1,
            since: vec![1; threads],
            named: [(0, 0); 16],
            wg_reads: vec![0; shared_bytes.div_ceil(16)],
            wg_live: 0,
            mbars: Default::default(),
            progress: 0,
            ctaid: [0; 3],
            stats: Stats::default(),
        }
    }

    /// Runs block `ctaid` to completion.
    pub fn run(&mut self, ctaid: [u32; 3], threads: usize, mem: &mut View) -> R<()> {
        self.ctaid = ctaid;
        self.clock = 1;
        self.since.fill(1);
        self.named = [(0, 0); 16];
        self.shared.fill(0);
        self.local.fill(0);
        self.check.reset();
        self.wg_reads.fill(0);
        self.wg_live = 0;
        self.mbars.clear();
        for (w, warp) in self.warps.iter_mut().enumerate() {
            warp.reset(threads.saturating_sub(w * WARP).min(WARP));
        }
        loop {
            let before = self.progress;
            for w in 0..self.warps.len() {
                self.warps[w].stalled = false;
                self.run_warp(w, mem)?;
            }
            // Warps whose mbarrier wait failed, or that wait at a named
            // barrier, go around again (as do lanes a named barrier let go
            // after their warp's turn), unless nothing happened that could
            // let them go on.
            let named = |w: &Warp| w.lane.iter().any(|s| matches!(s, Lane::AtNamed(_)));
            let running = |w: &Warp| w.lane.contains(&Lane::Running);
            if let Some(w) = self
                .warps
                .iter()
                .position(|w| w.stalled || named(w) || running(w))
            {
                if self.progress == before {
                    return Err(self.deadlock(w));
                }
                continue;
            }
            // Every warp has finished or waits at a barrier.
            let (mut waiting, mut exited, mut at) = (0usize, 0usize, None);
            for (w, warp) in self.warps.iter().enumerate() {
                for l in 0..WARP {
                    match warp.lane[l] {
                        Lane::AtBarrier => {
                            waiting += 1;
                            at.get_or_insert((w, l));
                        }
                        Lane::Exited => exited += 1,
                        _ => {}
                    }
                }
            }
            let Some((w, l)) = at else {
                return Ok(());
            };
            if exited > 0 {
                return Err(self.error(
                    w,
                    l,
                    SimErrorKind::Barrier,
                    format!(
                        "reached by {waiting} of the block's {} threads; the other {exited} had exited",
                        waiting + exited
                    ),
                ));
            }
            for warp in &mut self.warps {
                for l in 0..WARP {
                    if warp.lane[l] == Lane::AtBarrier {
                        warp.lane[l] = Lane::Running;
                        warp.pc[l] += 1;
                    }
                }
            }
            self.clock += 1;
            self.since.fill(self.clock);
        }
    }

    /// The race checks' stamp of an access by thread `tid` now.
    fn stamp(&self, tid: u32) -> Stamp {
        Stamp {
            now: self.clock,
            since: self.since[tid as usize],
        }
    }

    /// An error at lane `l` of warp `w`, at its program counter.
    fn error(&self, w: usize, l: usize, kind: SimErrorKind, message: String) -> SimError {
        let pc = self.warps[w].pc[l];
        self.k
            .error(self.ctaid, (w * WARP + l) as u32, pc, kind, message)
    }

    /// Runs warp `w` until all its lanes exited or wait at a barrier.
    fn run_warp(&mut self, w: usize, mem: &mut View) -> R<()> {
        let code = &self.k.code;
        let mut budget = self.opts.max_steps;
        loop {
            let warp = &self.warps[w];
            let mut pc = usize::MAX;
            let mut mask = 0u32;
            for l in 0..WARP {
                if warp.lane[l] == Lane::Running {
                    match warp.pc[l].cmp(&pc) {
                        std::cmp::Ordering::Less => {
                            pc = warp.pc[l];
                            mask = 1 << l;
                        }
                        std::cmp::Ordering::Equal => mask |= 1 << l,
                        _ => {}
                    }
                }
            }
            if mask == 0 {
                return Ok(());
            }
            if budget == 0 {
                let l = mask.trailing_zeros() as usize;
                return Err(self.error(
                    w,
                    l,
                    SimErrorKind::Timeout,
                    format!(
                        "the warp executed {} instructions without finishing (an endless loop?)",
                        self.opts.max_steps
                    ),
                ));
            }
            budget -= 1;
            self.stats.warp_instructions += 1;
            self.stats.thread_instructions += u64::from(mask.count_ones());
            let Some(inst) = code.get(pc) else {
                // Running off the end of the body returns.
                for l in lanes(mask) {
                    self.warps[w].lane[l] = Lane::Exited;
                }
                self.progress += 1;
                continue;
            };
            if self.warps[w].locked_n > 0 && !matches!(inst, Inst::Wgmma { .. }) {
                self.check_unlocked(w, mask, inst)?;
            }
            self.step(w, mask, pc, inst, mem)?;
            if self.warps[w].stalled {
                return Ok(());
            }
        }
    }

    /// Fails when `inst` reads or writes an accumulator of one of warp
    /// `w`'s wgmmas still in flight.
    fn check_unlocked(&self, w: usize, mask: u32, inst: &Inst) -> R<()> {
        let (uses, defs) = tessera_ptx::verify::uses_defs(inst);
        let warp = &self.warps[w];
        if let Some(r) = uses
            .iter()
            .chain(&defs)
            .find(|r| warp.locked.get(r.index()).is_some_and(|&n| n > 0))
        {
            return Err(self.error(
                w,
                mask.trailing_zeros() as usize,
                SimErrorKind::Async,
                format!(
                    "{r} is an accumulator of a wgmma.mma_async still in flight: \
                     touch it only after the wgmma.wait_group that retires it"
                ),
            ));
        }
        Ok(())
    }

    /// Fails when shared bytes `[off, off + size)` are read by a wgmma
    /// still in flight (a write there would race with it).
    fn check_wg_reads(&self, w: usize, l: usize, off: usize, size: usize) -> R<()> {
        if self.wg_live == 0 {
            return Ok(());
        }
        let busy = (off / 16..(off + size).div_ceil(16))
            .any(|c| self.wg_reads.get(c).is_some_and(|&n| n > 0));
        if busy {
            return Err(self.error(
                w,
                l,
                SimErrorKind::Async,
                format!(
                    "writes shared bytes {off}..{} which a wgmma.mma_async still in flight \
                     reads: wait for it (wgmma.wait_group) before reusing the buffer",
                    off + size
                ),
            ));
        }
        Ok(())
    }

    /// Register `r` of lane `l` of warp `w`.
    fn reg(&self, w: usize, r: Reg, l: usize) -> u64 {
        self.warps[w].regs[r.index() * WARP + l]
    }

    fn set(&mut self, w: usize, r: Reg, l: usize, v: u64) {
        self.warps[w].regs[r.index() * WARP + l] = v;
    }

    /// Operand `o` used at type `ty`, for lane `l`.
    fn op(&self, w: usize, o: &Operand, ty: Ty, l: usize) -> u64 {
        match o {
            Operand::Reg(r) => self.reg(w, *r, l),
            imm => alu::immediate(*imm, ty),
        }
    }

    /// Whether lane `l` passes guard `g`.
    fn guarded(&self, w: usize, g: &Option<Guard>, l: usize) -> bool {
        match g {
            None => true,
            Some(g) => (self.reg(w, g.pred, l) != 0) != g.negated,
        }
    }

    /// The address `a` names for lane `l`.
    fn addr(&self, w: usize, a: &Addr, l: usize) -> u64 {
        match a {
            Addr::Reg(r, off) => self.reg(w, *r, l).wrapping_add(*off as u64),
            Addr::Shared(off) => SHARED_BASE.wrapping_add(*off as u64),
        }
    }

    /// Checks that `[addr, addr + size)` is inside the shared memory and
    /// aligned; returns its offset.
    fn shared_offset(&self, w: usize, l: usize, addr: u64, size: usize) -> R<usize> {
        let limit = self.shared.len() as u64;
        let off = self.window(
            w,
            l,
            (addr, size),
            SHARED_BASE,
            limit,
            "the block's",
            "shared",
        )?;
        self.aligned(w, l, addr, size)?;
        Ok(off)
    }

    /// The offset of `[a, a + size)` in a window of `limit` bytes at
    /// `base`, or an out-of-bounds error naming `whose` `what` memory.
    fn window(
        &self,
        w: usize,
        l: usize,
        (a, size): (u64, usize),
        base: u64,
        limit: u64,
        whose: &str,
        what: &str,
    ) -> R<usize> {
        let off = a.wrapping_sub(base);
        if a < base || off.saturating_add(size as u64) > limit {
            return Err(self.error(
                w,
                l,
                SimErrorKind::OutOfBounds,
                format!(
                    "{what} access of {size} bytes at offset {} is outside {whose} {limit} bytes of {what} memory",
                    off as i64
                ),
            ));
        }
        Ok(off as usize)
    }

    fn aligned(&self, w: usize, l: usize, addr: u64, size: usize) -> R<()> {
        if addr % size as u64 != 0 {
            return Err(self.error(
                w,
                l,
                SimErrorKind::Misaligned,
                format!("{size}-byte access at address {addr:#x} is not {size}-byte aligned"),
            ));
        }
        Ok(())
    }

    /// `ld`/`st` of one value or `ld.vN`/`st.vN` for the lanes of `mask`:
    /// each access aligned to its whole size, narrow loads widened.
    #[allow(clippy::too_many_arguments)]
    fn access_lanes(
        &mut self,
        w: usize,
        mask: u32,
        (space, ty): (Space, Ty),
        values: Values<'_>,
        addr: &Addr,
        guard: &Option<Guard>,
        mem: &mut View,
    ) -> R<()> {
        let size = ty.bytes() as usize;
        let n = match values {
            Values::Load(d) => d.len(),
            Values::Store(s) => s.len(),
        };
        let mut banked = Vec::new();
        for l in lanes(mask) {
            if !self.guarded(w, guard, l) {
                continue;
            }
            let a = self.addr(w, addr, l);
            self.aligned(w, l, a, size * n)?;
            if space == Space::Shared {
                banked.push((l, a.wrapping_sub(SHARED_BASE)));
            }
            for i in 0..n {
                let at = a + (i * size) as u64;
                match values {
                    Values::Load(dst) => {
                        let raw = self.load(w, l, space, at, size, mem)?;
                        let v = alu::cvt(ty.reg(), ty, Round::None, raw);
                        self.set(w, dst[i], l, v);
                    }
                    Values::Store(src) => {
                        let v = self.op(w, &src[i], ty.reg(), l);
                        self.store(w, l, space, at, size, v, mem)?;
                    }
                }
            }
        }
        self.count_shared(&banked, size * n);
        Ok(())
    }

    /// Counts the wavefronts of a warp-wide shared access of `size` bytes
    /// per lane at `(lane, offset)` (see [`crate::banks`]).
    fn count_shared(&mut self, accesses: &[(usize, u64)], size: usize) {
        if accesses.is_empty() {
            return;
        }
        let (total, least) = crate::banks::wavefronts(accesses, size);
        self.stats.shared_wavefronts += total;
        self.stats.bank_conflicts += total - least;
    }

    /// Reads `size` bytes at `a` in `space` for thread `(w, l)` (alignment
    /// already checked).
    fn load(
        &mut self,
        w: usize,
        l: usize,
        space: Space,
        a: u64,
        size: usize,
        mem: &mut View,
    ) -> R<u64> {
        match space {
            Space::Global => mem
                .load(a, size)
                .map_err(|_| self.global_fault(w, l, a, size, false)),
            Space::Shared => {
                let off = self.shared_offset(w, l, a, size)?;
                self.shared_read(w, l, off, size)
            }
            Space::Local => {
                let at = self.local_offset(w, l, a, size)?;
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(&self.local[at..at + size]);
                Ok(u64::from_le_bytes(b))
            }
        }
    }

    /// Writes the low `size` bytes of `v` at `a` in `space` for thread
    /// `(w, l)` (alignment already checked).
    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        w: usize,
        l: usize,
        space: Space,
        a: u64,
        size: usize,
        v: u64,
        mem: &mut View,
    ) -> R<()> {
        match space {
            Space::Global => mem
                .store(a, size, v)
                .map_err(|_| self.global_fault(w, l, a, size, true)),
            Space::Shared => {
                let off = self.shared_offset(w, l, a, size)?;
                self.shared_write(w, l, off, size, v)
            }
            Space::Local => {
                let at = self.local_offset(w, l, a, size)?;
                self.local[at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
                Ok(())
            }
        }
    }

    /// Where thread `(w, l)`'s local bytes `[a, a + size)` are in the
    /// block's local memory, or an error outside the thread's array.
    fn local_offset(&self, w: usize, l: usize, a: u64, size: usize) -> R<usize> {
        let n = self.k.f.local_bytes;
        let off = self.window(w, l, (a, size), LOCAL_BASE, n, "the thread's", "local")?;
        Ok((w * WARP + l) * n as usize + off)
    }

    /// Reads shared bytes for thread `(w, l)`, with the checks.
    fn shared_read(&mut self, w: usize, l: usize, off: usize, size: usize) -> R<u64> {
        let tid = (w * WARP + l) as u32;
        if let Err(e) = self.check.read(off, size, tid, self.stamp(tid)) {
            return Err(self.error(w, l, e.kind(), e.message()));
        }
        let mut b = [0u8; 8];
        b[..size].copy_from_slice(&self.shared[off..off + size]);
        Ok(u64::from_le_bytes(b))
    }

    /// Writes shared bytes for thread `(w, l)`, with the checks.
    fn shared_write(&mut self, w: usize, l: usize, off: usize, size: usize, v: u64) -> R<()> {
        self.check_wg_reads(w, l, off, size)?;
        let tid = (w * WARP + l) as u32;
        if let Err(e) = self.check.write(off, size, tid, self.stamp(tid)) {
            return Err(self.error(w, l, e.kind(), e.message()));
        }
        self.shared[off..off + size].copy_from_slice(&v.to_le_bytes()[..size]);
        Ok(())
    }

    fn global_fault(&self, w: usize, l: usize, addr: u64, size: usize, write: bool) -> SimError {
        self.error(
            w,
            l,
            SimErrorKind::OutOfBounds,
            format!(
                "global {} of {size} bytes at address {addr:#x} is outside every allocation",
                if write { "write" } else { "read" }
            ),
        )
    }

    /// Runs the instruction at `pc` for the lanes of `mask`.
    fn step(&mut self, w: usize, mask: u32, pc: usize, inst: &Inst, mem: &mut View) -> R<()> {
        let f = self.k.f;
        match inst {
            Inst::Mov { dst, src } => {
                let ty = f.regs[dst.index()];
                for l in lanes(mask) {
                    let v = self.op(w, src, ty, l);
                    self.set(w, *dst, l, v);
                }
            }
            Inst::Special { dst, reg } => {
                for l in lanes(mask) {
                    let v = match reg {
                        Special::TidX => (w * WARP + l) as u64,
                        Special::Ctaid(a) => u64::from(self.ctaid[*a as usize % 3]),
                        Special::Nctaid(a) => u64::from(self.k.grid[*a as usize % 3]),
                    };
                    self.set(w, *dst, l, v);
                }
            }
            Inst::Bin { op, ty, dst, a, b } => {
                for l in lanes(mask) {
                    let v = alu::bin(*op, *ty, self.op(w, a, *ty, l), self.op(w, b, *ty, l));
                    self.set(w, *dst, l, v);
                }
            }
            Inst::Un { op, ty, dst, a } => {
                for l in lanes(mask) {
                    let v = alu::un(*op, *ty, self.op(w, a, *ty, l));
                    self.set(w, *dst, l, v);
                }
            }
            Inst::Fma { ty, dst, a, b, c } => {
                for l in lanes(mask) {
                    let v = alu::fma(
                        *ty,
                        self.op(w, a, *ty, l),
                        self.op(w, b, *ty, l),
                        self.op(w, c, *ty, l),
                    );
                    self.set(w, *dst, l, v);
                }
            }
            Inst::Setp { cmp, ty, dst, a, b } => {
                for l in lanes(mask) {
                    let v = alu::setp(*cmp, *ty, self.op(w, a, *ty, l), self.op(w, b, *ty, l));
                    self.set(w, *dst, l, u64::from(v));
                }
            }
            Inst::Selp {
                ty,
                dst,
                a,
                b,
                pred,
            } => {
                for l in lanes(mask) {
                    let v = if self.reg(w, *pred, l) != 0 {
                        self.op(w, a, *ty, l)
                    } else {
                        self.op(w, b, *ty, l)
                    };
                    self.set(w, *dst, l, v);
                }
            }
            Inst::PredOp { op, dst, a, b } => {
                for l in lanes(mask) {
                    let (x, y) = (self.reg(w, *a, l) != 0, self.reg(w, *b, l) != 0);
                    let v = match op {
                        None => !x,
                        Some(BinOp::And) => x && y,
                        Some(BinOp::Or) => x || y,
                        Some(_) => x != y,
                    };
                    self.set(w, *dst, l, u64::from(v));
                }
            }
            Inst::Cvt {
                to,
                from,
                round,
                dst,
                src,
            } => {
                for l in lanes(mask) {
                    let v = alu::cvt(*to, *from, *round, self.reg(w, *src, l));
                    self.set(w, *dst, l, v);
                }
            }
            Inst::CvtHalf {
                bf16,
                widen,
                dst,
                src,
            } => {
                for l in lanes(mask) {
                    let x = self.reg(w, *src, l);
                    let v = if *widen {
                        u64::from(alu::widen(*bf16, x as u16).to_bits())
                    } else {
                        u64::from(alu::narrow(*bf16, f32::from_bits(x as u32)))
                    };
                    self.set(w, *dst, l, v);
                }
            }
            Inst::CvtPack { fmt, dst, hi, lo } => {
                for l in lanes(mask) {
                    let h = alu::pack(*fmt, f32::from_bits(self.reg(w, *hi, l) as u32));
                    let o = alu::pack(*fmt, f32::from_bits(self.reg(w, *lo, l) as u32));
                    let half = if fmt.is_fp8() { 8 } else { 16 };
                    self.set(w, *dst, l, (h << half) | o);
                }
            }
            Inst::CvtF8Widen { fmt, dst, src } => {
                for l in lanes(mask) {
                    let x = self.reg(w, *src, l);
                    let lo = alu::to_f16(alu::operand(*fmt, x as u32 & 0xFF));
                    let hi = alu::to_f16(alu::operand(*fmt, (x >> 8) as u32 & 0xFF));
                    self.set(w, *dst, l, (u64::from(hi) << 16) | u64::from(lo));
                }
            }
            Inst::CvtTf32 { rna, dst, src } => {
                for l in lanes(mask) {
                    let x = f32::from_bits(self.reg(w, *src, l) as u32);
                    self.set(w, *dst, l, u64::from(alu::to_tf32(*rna, x)));
                }
            }
            Inst::Join { dst, lo, hi } => {
                for l in lanes(mask) {
                    let v = (self.reg(w, *hi, l) & 0xFFFF) << 16 | (self.reg(w, *lo, l) & 0xFFFF);
                    self.set(w, *dst, l, v);
                }
            }
            Inst::Ld {
                space,
                ty,
                dst,
                addr,
                guard,
            } => {
                let dst = std::slice::from_ref(dst);
                self.access_lanes(w, mask, (*space, *ty), Values::Load(dst), addr, guard, mem)?;
            }
            Inst::LdV {
                space,
                ty,
                dst,
                addr,
                guard,
            } => self.access_lanes(w, mask, (*space, *ty), Values::Load(dst), addr, guard, mem)?,
            Inst::St {
                space,
                ty,
                addr,
                src,
                guard,
            } => {
                let srcs = [*src];
                self.access_lanes(
                    w,
                    mask,
                    (*space, *ty),
                    Values::Store(&srcs),
                    addr,
                    guard,
                    mem,
                )?;
            }
            Inst::StV {
                space,
                ty,
                addr,
                src,
                guard,
            } => {
                let srcs: Vec<Operand> = src.iter().map(|r| Operand::Reg(*r)).collect();
                self.access_lanes(
                    w,
                    mask,
                    (*space, *ty),
                    Values::Store(&srcs),
                    addr,
                    guard,
                    mem,
                )?;
            }
            Inst::Red {
                op,
                ty,
                addr,
                src,
                guard,
            } => {
                let size = ty.bytes() as usize;
                // Lane by lane: lanes aimed at one element all count.
                for l in lanes(mask) {
                    if !self.guarded(w, guard, l) {
                        continue;
                    }
                    let a = self.addr(w, addr, l);
                    self.aligned(w, l, a, size)?;
                    let v = self.reg(w, *src, l);
                    mem.update(a, size, |old| alu::reduce(*op, *ty, old, v))
                        .map_err(|_| self.global_fault(w, l, a, size, true))?;
                }
            }
            Inst::LocalBase { dst } => {
                for l in lanes(mask) {
                    self.set(w, *dst, l, LOCAL_BASE);
                }
            }
            Inst::LdParam { dst, param } => {
                let v = self.k.params.get(*param).copied().unwrap_or(0);
                for l in lanes(mask) {
                    self.set(w, *dst, l, v);
                }
            }
            Inst::SharedBase { dst } => {
                for l in lanes(mask) {
                    self.set(w, *dst, l, SHARED_BASE);
                }
            }
            Inst::Mma { fmt, d, a, b, c } => {
                self.full_warp(w, mask, "mma.sync")?;
                self.mma(w, *fmt, mma::MmaRegs { d, a, b, c });
            }
            Inst::Shfl {
                mode,
                dst,
                src,
                b,
                clamp,
            } => {
                self.full_warp(w, mask, "shfl.sync with the full member mask")?;
                let vals: Vec<u64> = (0..WARP).map(|l| self.reg(w, *src, l)).collect();
                for l in lanes(mask) {
                    let bval = self.op(w, b, Ty::U32, l) as usize & 31;
                    let j = shfl_source(*mode, l, bval, *clamp);
                    self.set(w, *dst, l, vals[j]);
                }
            }
            Inst::Ldmatrix { trans, dst, addr } => {
                self.full_warp(w, mask, "ldmatrix")?;
                // Matrix q's rows come from lanes 8q..8q+7; each row is 8
                // 16-bit elements.
                let mut m = vec![[[0u16; 8]; 8]; dst.len()];
                let mut banked = Vec::new();
                for (q, mat) in m.iter_mut().enumerate() {
                    for (r, row) in mat.iter_mut().enumerate() {
                        let l = 8 * q + r;
                        let a = self.addr(w, addr, l);
                        let off = self.shared_offset(w, l, a, 16)?;
                        banked.push((l, off as u64));
                        for (e, x) in row.iter_mut().enumerate() {
                            *x = self.shared_read(w, l, off + 2 * e, 2)? as u16;
                        }
                    }
                }
                self.count_shared(&banked, 16);
                for l in 0..WARP {
                    let (g, t) = (l / 4, l % 4);
                    for (q, r) in dst.iter().enumerate() {
                        let (lo, hi) = if *trans {
                            (m[q][2 * t][g], m[q][2 * t + 1][g])
                        } else {
                            (m[q][g][2 * t], m[q][g][2 * t + 1])
                        };
                        self.set(w, *r, l, u64::from(lo) | (u64::from(hi) << 16));
                    }
                }
            }
            Inst::CpAsync { dst, src, guard } => {
                let mut banked = Vec::new();
                for l in lanes(mask) {
                    if !self.guarded(w, guard, l) {
                        continue;
                    }
                    let s = self.reg(w, *src, l);
                    let a = self.addr(w, dst, l);
                    self.aligned(w, l, s, 16)?;
                    let off = self.shared_offset(w, l, a, 16)?;
                    self.check_wg_reads(w, l, off, 16)?;
                    banked.push((l, off as u64));
                    // The source must be readable now.
                    let mut probe = [0u8; 16];
                    mem.read(s, &mut probe)
                        .map_err(|_| self.global_fault(w, l, s, 16, false))?;
                    let tid = (w * WARP + l) as u32;
                    if let Err(e) = self.check.start_async(off, 16, tid, self.stamp(tid)) {
                        return Err(self.error(w, l, e.kind(), e.message()));
                    }
                    self.warps[w].pending[l].push(AsyncCopy {
                        src: s,
                        dst: off as u64,
                    });
                }
                self.count_shared(&banked, 16);
            }
            Inst::CpAsyncCommit => {
                for l in lanes(mask) {
                    let group = std::mem::take(&mut self.warps[w].pending[l]);
                    self.warps[w].groups[l].push_back(group);
                }
            }
            Inst::CpAsyncWait(n) => {
                for l in lanes(mask) {
                    while self.warps[w].groups[l].len() > *n as usize {
                        let group = self.warps[w].groups[l].pop_front().unwrap_or_default();
                        for c in group {
                            let mut data = [0u8; 16];
                            mem.read(c.src, &mut data)
                                .map_err(|_| self.global_fault(w, l, c.src, 16, false))?;
                            let off = c.dst as usize;
                            self.shared[off..off + 16].copy_from_slice(&data);
                            self.check.finish_async(off, 16);
                        }
                    }
                }
            }
            Inst::Wgmma {
                fmt,
                d,
                a,
                b,
                accumulate,
                trans_a,
                trans_b,
            } => {
                self.full_warp(w, mask, "wgmma.mma_async")?;
                self.wgmma_issue(w, *fmt, d, (*a, *b), *accumulate, [*trans_a, *trans_b])?;
            }
            Inst::Elect { dst } => {
                self.full_warp(w, mask, "elect.sync")?;
                // The lowest lane is elected.
                for l in 0..WARP {
                    self.set(w, *dst, l, u64::from(l == 0));
                }
            }
            Inst::WgmmaFence => {
                self.full_warp(w, mask, "wgmma.fence")?;
                self.warps[w].wg_fenced = true;
            }
            Inst::WgmmaCommit => {
                self.full_warp(w, mask, "wgmma.commit_group")?;
                let warp = &mut self.warps[w];
                let group = std::mem::take(&mut warp.wg_pending);
                warp.wg_groups.push_back(group);
            }
            Inst::WgmmaWait(n) => {
                self.full_warp(w, mask, "wgmma.wait_group")?;
                while self.warps[w].wg_groups.len() > *n as usize {
                    let group = self.warps[w].wg_groups.pop_front().unwrap_or_default();
                    for op in group {
                        self.wgmma_retire(w, op)?;
                    }
                }
                self.warps[w].wg_fenced = false;
            }
            // The simulator's shared memory and tensor maps have one view:
            // nothing to order.
            Inst::FenceProxyAsync | Inst::FenceTensorMap { .. } => {}
            Inst::MbarInit { addr, count } => {
                for l in lanes(mask) {
                    let a = self.addr(w, addr, l);
                    let off = self.shared_offset(w, l, a, 8)?;
                    self.mbars.insert(
                        off,
                        Mbar {
                            expected: *count,
                            pending: *count,
                            ..Mbar::default()
                        },
                    );
                    self.progress += 1;
                }
            }
            Inst::MbarExpectTx { addr, bytes, guard } => {
                for l in lanes(mask) {
                    if self.guarded(w, guard, l) {
                        let a = self.addr(w, addr, l);
                        self.mbar_arrive(w, l, a, *bytes)?;
                    }
                }
            }
            Inst::MbarArrive { addr, guard } => {
                for l in lanes(mask) {
                    if self.guarded(w, guard, l) {
                        let a = self.addr(w, addr, l);
                        self.mbar_arrive(w, l, a, 0)?;
                    }
                }
            }
            Inst::MbarTryWait { dst, addr, parity } => {
                for l in lanes(mask) {
                    let a = self.addr(w, addr, l);
                    let p = self.op(w, parity, Ty::U32, l) as u32;
                    let done = self.mbar_try_wait(w, l, a, p)?;
                    self.set(w, *dst, l, u64::from(done));
                }
            }
            Inst::TmaLoad {
                dst,
                map,
                coords,
                mbar,
                guard,
            } => {
                for l in lanes(mask) {
                    if !self.guarded(w, guard, l) {
                        continue;
                    }
                    let d = self.addr(w, dst, l);
                    let m = self.reg(w, *map, l);
                    let c = coords
                        .iter()
                        .map(|r| i64::from(self.reg(w, *r, l) as u32 as i32))
                        .collect();
                    let b = self.addr(w, mbar, l);
                    self.tma_load(w, l, (d, m, c, b), mem)?;
                }
            }
            Inst::Barrier => {
                for l in lanes(mask) {
                    self.warps[w].lane[l] = Lane::AtBarrier;
                }
                self.progress += 1;
                return Ok(());
            }
            Inst::NamedBarrier { id, threads } => {
                // The barrier moves the lanes on when it opens.
                return self.named_barrier(w, mask, *id, *threads);
            }
            Inst::SetMaxNReg { regs, .. } => {
                // The simulator holds every register; what it checks is
                // that whole warps ask, for a count the hardware takes.
                self.full_warp(w, mask, "setmaxnreg")?;
                if !(24..=256).contains(regs) || regs % 8 != 0 {
                    let l = mask.trailing_zeros() as usize;
                    return Err(self.error(
                        w,
                        l,
                        SimErrorKind::Divergence,
                        format!("setmaxnreg asks for {regs} registers: 24 to 256, a multiple of 8"),
                    ));
                }
            }
            Inst::Bra { target, guard } => {
                let dest = self.k.label(*target);
                for l in lanes(mask) {
                    let warp = &mut self.warps[w];
                    let taken = match guard {
                        None => true,
                        Some(g) => (warp.regs[g.pred.index() * WARP + l] != 0) != g.negated,
                    };
                    warp.pc[l] = if taken { dest } else { pc + 1 };
                }
                return Ok(());
            }
            Inst::Ret => {
                for l in lanes(mask) {
                    self.warps[w].lane[l] = Lane::Exited;
                }
                self.progress += 1;
                return Ok(());
            }
            Inst::Trap { guard } => {
                for l in lanes(mask) {
                    let warp = &self.warps[w];
                    if (warp.regs[guard.pred.index() * WARP + l] != 0) != guard.negated {
                        // The back end traps where an `assert` fails
                        // (a negated guard: the condition is false), after
                        // a comment saying what that means, and where an
                        // integer divisor is zero (a plain one).
                        let why = if guard.negated {
                            let said = self.k.asserts.get(pc).copied().flatten();
                            format!(
                                "an `assert` failed: {}",
                                said.unwrap_or("its condition is false")
                            )
                        } else {
                            "an integer division (or remainder) by zero".to_owned()
                        };
                        return Err(self.error(
                            w,
                            l,
                            SimErrorKind::Trap,
                            format!("the kernel trapped: {why}"),
                        ));
                    }
                }
            }
            Inst::Label(_) | Inst::Comment(_) | Inst::Loc { .. } | Inst::Source(_) => {}
        }
        for l in lanes(mask) {
            self.warps[w].pc[l] = pc + 1;
        }
        Ok(())
    }

    /// Records warp `w`'s `wgmma.mma_async` (see [`crate::wgmma`]).
    fn wgmma_issue(
        &mut self,
        w: usize,
        fmt: [Fmt; 2],
        d: &[Reg],
        (a, b): (WgmmaA, Reg),
        accumulate: bool,
        trans: [bool; 2],
    ) -> R<()> {
        let fail = |s: &Self, m: String| Err(s.error(w, 0, SimErrorKind::Async, m));
        if self.warps.len() % 4 != 0 {
            return fail(
                self,
                format!(
                    "wgmma.mma_async needs whole warpgroups (4 warps); the block has {} warps",
                    self.warps.len()
                ),
            );
        }
        if !self.warps[w].wg_fenced {
            return fail(
                self,
                "wgmma.mma_async without a wgmma.fence since the warp's last wgmma.wait_group"
                    .into(),
            );
        }
        let (a_desc, a_regs) = match a {
            WgmmaA::Desc(r) => (Some(r), None),
            WgmmaA::Regs(rs) => (None, Some(rs)),
        };
        if a_regs.is_some() && fmt[0].per_reg() != 2 {
            return fail(
                self,
                "the simulator runs wgmma with A in registers for 16-bit formats only".into(),
            );
        }
        let mut desc = [0u64; 2];
        for (j, r) in [(0, a_desc), (1, Some(b))] {
            let Some(r) = r else { continue };
            desc[j] = self.reg(w, r, 0);
            if let Some(l) = (1..WARP).find(|&l| self.reg(w, r, l) != desc[j]) {
                return Err(self.error(
                    w,
                    l,
                    SimErrorKind::Async,
                    format!(
                        "the descriptor of {} differs between lanes 0 and {l}",
                        if j == 0 { "A" } else { "B" }
                    ),
                ));
            }
        }
        let mut op = WgOp {
            fmt,
            d: d.to_vec(),
            desc,
            accumulate,
            trans,
            a_regs,
            chunks: Vec::new(),
        };
        // What it reads: this warp's 16 rows of A (when in shared memory)
        // and all of B.
        let q = (w % 4) as u64;
        let k = fmt[0].mma_k() as u64;
        let mut chunks = Vec::new();
        let a_rows = if a_regs.is_some() {
            0..0
        } else {
            16 * q..16 * q + 16
        };
        for (j, rows) in [(0, a_rows), (1, 0..op.n() as u64)] {
            let dd = wgmma::Desc::decode(desc[j])
                .map_err(|m| self.error(w, 0, SimErrorKind::Async, m))?;
            let bytes = 4 / fmt[j].per_reg() as u64;
            for x in rows {
                for kk in 0..k {
                    let a = wgmma::element(&dd, trans[j], x, kk, bytes);
                    let off = self.shared_offset(w, 0, a, bytes as usize)?;
                    chunks.push((off / 16) as u32);
                }
            }
        }
        chunks.sort_unstable();
        chunks.dedup();
        for &c in &chunks {
            let n = &mut self.wg_reads[c as usize];
            if *n == 0 {
                self.wg_live += 1;
            }
            *n += 1;
        }
        op.chunks = chunks;
        let warp = &mut self.warps[w];
        for r in d.iter().chain(a_regs.iter().flatten()) {
            let n = &mut warp.locked[r.index()];
            if *n == 0 {
                warp.locked_n += 1;
            }
            *n += 1;
        }
        warp.wg_pending.push(op);
        Ok(())
    }

    /// Carries out warp `w`'s recorded `op`: its 16 rows of the 64×N tile
    /// `A·B (+ D)`, with the operands as shared memory holds them now.
    fn wgmma_retire(&mut self, w: usize, op: WgOp) -> R<()> {
        let q = (w % 4) as u64;
        let (k, n) = (op.fmt[0].mma_k() as usize, op.n());
        let read = |s: &Self, j: usize, x: u64, kk: u64| -> R<f32> {
            let dd = wgmma::Desc::decode(op.desc[j])
                .map_err(|m| s.error(w, 0, SimErrorKind::Async, m))?;
            let bytes = 4 / op.fmt[j].per_reg() as u64;
            let a = wgmma::element(&dd, op.trans[j], x, kk, bytes);
            let off = s.shared_offset(w, 0, a, bytes as usize)?;
            let mut b = [0u8; 4];
            b[..bytes as usize].copy_from_slice(&s.shared[off..off + bytes as usize]);
            Ok(alu::operand(op.fmt[j], u32::from_le_bytes(b)))
        };
        let mut am = vec![0f32; 16 * k];
        match op.a_regs {
            // Lane l's register j holds row l/4 + 8(j % 2), elements
            // 2(l % 4) + 8(j / 2) and the next (16-bit formats), the low
            // half first.
            Some(regs) => {
                for l in 0..WARP {
                    let (g, t) = (l / 4, l % 4);
                    for (j, r) in regs.iter().enumerate() {
                        let v = self.reg(w, *r, l);
                        let row = g + 8 * (j % 2);
                        for h in 0..2 {
                            let bits = (v >> (16 * h)) as u32 & 0xFFFF;
                            am[row * k + 2 * t + 8 * (j / 2) + h] = alu::operand(op.fmt[0], bits);
                        }
                    }
                }
            }
            None => {
                for r in 0..16 {
                    for kk in 0..k {
                        am[r * k + kk] = read(self, 0, 16 * q + r as u64, kk as u64)?;
                    }
                }
            }
        }
        let mut bm = vec![0f32; k * n];
        for kk in 0..k {
            for c in 0..n {
                bm[kk * n + c] = read(self, 1, c as u64, kk as u64)?;
            }
        }
        for l in 0..WARP {
            for (i, r) in op.d.iter().enumerate() {
                let (row, col) = wgmma::d_coord(0, l, i);
                let mut s = if op.accumulate {
                    f64::from(f32::from_bits(self.reg(w, *r, l) as u32))
                } else {
                    0.0
                };
                for kk in 0..k {
                    s += f64::from(am[row * k + kk]) * f64::from(bm[kk * n + col]);
                }
                self.set(w, *r, l, u64::from((s as f32).to_bits()));
            }
        }
        for &c in &op.chunks {
            let cnt = &mut self.wg_reads[c as usize];
            *cnt -= 1;
            if *cnt == 0 {
                self.wg_live -= 1;
            }
        }
        let warp = &mut self.warps[w];
        for r in op.d.iter().chain(op.a_regs.iter().flatten()) {
            let cnt = &mut warp.locked[r.index()];
            *cnt -= 1;
            if *cnt == 0 {
                warp.locked_n -= 1;
            }
        }
        Ok(())
    }

    /// Checks that all 32 lanes of warp `w` run a warp-wide instruction
    /// together.
    fn full_warp(&self, w: usize, mask: u32, what: &str) -> R<()> {
        let present = self.warps[w]
            .lane
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != Lane::Absent)
            .fold(0u32, |m, (l, _)| m | 1 << l);
        if mask != u32::MAX || present != u32::MAX {
            let l = mask.trailing_zeros() as usize;
            return Err(self.error(
                w,
                l,
                SimErrorKind::Divergence,
                format!(
                    "{what} needs all 32 lanes of the warp; {} are here",
                    mask.count_ones()
                ),
            ));
        }
        Ok(())
    }
}
