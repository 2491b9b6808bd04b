//! How a block's threads synchronise beyond `bar.sync 0`: `mbarrier`
//! phases (arrivals, transaction bytes, TMA copies landing on them, waits
//! by parity), named barriers for part of the block, and the deadlock a
//! pass of the block without progress means. Completing a phase or
//! opening a barrier ticks the race checks' clock (see `check.rs`).

use super::{lanes, BlockRunner, Lane, R, SHARED_BASE, WARP};
use crate::memory::View;
use crate::tma::{Mbar, TensorMap};
use crate::{SimError, SimErrorKind};

impl BlockRunner<'_> {
    /// The error of a block whose warps wait on mbarrier phases that never
    /// complete (warp `w` among them).
    pub(super) fn deadlock(&self, w: usize) -> SimError {
        if let Some((l, id)) = (0..WARP).find_map(|l| match self.warps[w].lane[l] {
            Lane::AtNamed(id) => Some((l, id)),
            _ => None,
        }) {
            let (arrived, expected) = self.named[usize::from(id)];
            return self.error(
                w,
                l,
                SimErrorKind::Barrier,
                format!(
                    "deadlock: waits at named barrier {id}, which {arrived} of the {expected} \
                     threads it waits for have reached, and no other warp can make progress"
                ),
            );
        }
        let (off, parity) = self.warps[w].waiting_on;
        let state = match self.mbars.get(&off) {
            Some(m) => format!(
                "phase {} is current; {} of its {} arrivals and {} transaction bytes are missing",
                m.phase, m.pending, m.expected, m.tx
            ),
            None => "it was never initialised".into(),
        };
        let l = (0..WARP)
            .find(|&l| self.warps[w].lane[l] == Lane::Running)
            .unwrap_or(0);
        self.error(
            w,
            l,
            SimErrorKind::Async,
            format!(
                "deadlock: waits on the mbarrier at shared byte {off} for the phase of parity \
                 {parity}, which never completes ({state}), and no other warp can make progress"
            ),
        )
    }

    /// The mbarrier at shared address `a` for lane `l` of warp `w`.
    fn mbar(&mut self, w: usize, l: usize, a: u64) -> R<(usize, &mut Mbar)> {
        let off = self.shared_offset(w, l, a, 8)?;
        if !self.mbars.contains_key(&off) {
            return Err(self.error(
                w,
                l,
                SimErrorKind::Async,
                format!("uses the mbarrier at shared byte {off} before mbarrier.init"),
            ));
        }
        Ok((off, self.mbars.get_mut(&off).expect("checked above")))
    }

    /// One arrival of lane `l` on the mbarrier at `a`, owing `tx` more
    /// transaction bytes.
    pub(super) fn mbar_arrive(&mut self, w: usize, l: usize, a: u64, tx: u32) -> R<()> {
        let next = self.clock + 1;
        let (off, m) = self.mbar(w, l, a)?;
        if m.pending == 0 {
            let expected = m.expected;
            return Err(self.error(
                w,
                l,
                SimErrorKind::Async,
                format!(
                    "arrives on the mbarrier at shared byte {off} more often than the {expected} \
                     arrivals its phase expects"
                ),
            ));
        }
        m.pending -= 1;
        m.tx += i64::from(tx);
        if m.settle(next) {
            self.clock = next;
        }
        self.progress += 1;
        Ok(())
    }

    /// `cp.async.bulk.tensor` for lane `l`: the box gathered now, its bytes
    /// in flight to the barrier at `mbar` (landing at a wait).
    pub(super) fn tma_load(
        &mut self,
        w: usize,
        l: usize,
        (dst, map, coords, mbar): (u64, u64, Vec<i64>, u64),
        mem: &mut View,
    ) -> R<()> {
        let mut raw = [0u8; 128];
        mem.read(map, &mut raw)
            .map_err(|_| self.global_fault(w, l, map, 128, false))?;
        let m = TensorMap::decode(&raw).map_err(|e| self.error(w, l, SimErrorKind::Async, e))?;
        if coords.len() != m.dims.len() {
            return Err(self.error(
                w,
                l,
                SimErrorKind::Async,
                format!(
                    "{} coordinates for a tensor map of rank {}",
                    coords.len(),
                    m.dims.len()
                ),
            ));
        }
        let bytes = m.box_bytes() as usize;
        let off = self.window(
            w,
            l,
            (dst, bytes),
            SHARED_BASE,
            self.shared.len() as u64,
            "the block's",
            "shared",
        )?;
        self.aligned(w, l, dst, 128)?;
        self.check_wg_reads(w, l, off, bytes)?;
        let e = m.elem_bytes as usize;
        let mut data = vec![0u8; bytes];
        for (at, global) in m.elements(dst, &coords) {
            if let Some(g) = global {
                let at = at as usize;
                mem.read(g, &mut data[at..at + e])
                    .map_err(|_| self.global_fault(w, l, g, e, false))?;
            }
        }
        let tid = (w * WARP + l) as u32;
        if let Err(v) = self.check.start_async(off, bytes, tid, self.stamp(tid)) {
            return Err(self.error(w, l, v.kind(), v.message()));
        }
        let (_, b) = self.mbar(w, l, mbar)?;
        b.inflight.push((off, data));
        self.progress += 1;
        Ok(())
    }

    /// `mbarrier.try_wait.parity` for lane `l`: lands the barrier's copies,
    /// then whether the phase of `parity` has completed.
    pub(super) fn mbar_try_wait(&mut self, w: usize, l: usize, a: u64, parity: u32) -> R<bool> {
        let next = self.clock + 1;
        let (off, m) = self.mbar(w, l, a)?;
        let landed = std::mem::take(&mut m.inflight);
        let mut ticked = false;
        if !landed.is_empty() {
            m.tx -= landed.iter().map(|(_, d)| d.len() as i64).sum::<i64>();
            ticked = m.settle(next);
        }
        let done = (m.phase & 1) != (parity & 1);
        let done_at = m.done_at[(parity & 1) as usize];
        if ticked {
            self.clock = next;
        }
        // Waiting for a phase orders what happened before it completed
        // before what this thread does next.
        if done {
            let tid = w * WARP + l;
            self.since[tid] = self.since[tid].max(done_at);
        }
        let moved = !landed.is_empty();
        for (at, data) in landed {
            self.shared[at..at + data.len()].copy_from_slice(&data);
            self.check.land_synchronised(at, data.len());
        }
        if moved || done {
            self.progress += 1;
        }
        if !done {
            self.warps[w].stalled = true;
            self.warps[w].waiting_on = (off, parity);
        }
        Ok(done)
    }

    /// Lanes `mask` of warp `w` arrive at named barrier `id`, which opens
    /// when `threads` have arrived: they and the threads waiting there go
    /// on, synchronised.
    pub(super) fn named_barrier(&mut self, w: usize, mask: u32, id: u32, threads: u32) -> R<()> {
        let l = mask.trailing_zeros() as usize;
        let slot = match usize::try_from(id) {
            Ok(i @ 1..=15) => i,
            _ => {
                return Err(self.error(
                    w,
                    l,
                    SimErrorKind::Barrier,
                    format!("bar.sync {id}: named barriers are 1 to 15"),
                ))
            }
        };
        let (arrived, expected) = self.named[slot];
        if expected != 0 && expected != threads {
            return Err(self.error(
                w,
                l,
                SimErrorKind::Barrier,
                format!(
                    "arrives at barrier {id} for {threads} threads while {arrived} wait there \
                     for {expected}"
                ),
            ));
        }
        for l in lanes(mask) {
            self.warps[w].lane[l] = Lane::AtNamed(slot as u8);
        }
        let arrived = arrived + mask.count_ones();
        self.named[slot] = (arrived, threads);
        self.progress += 1;
        if arrived > threads {
            return Err(self.error(
                w,
                l,
                SimErrorKind::Barrier,
                format!("{arrived} threads arrive at barrier {id}, which waits for {threads}"),
            ));
        }
        if arrived == threads {
            self.named[slot] = (0, 0);
            self.clock += 1;
            for (v, warp) in self.warps.iter_mut().enumerate() {
                for l in 0..WARP {
                    if warp.lane[l] == Lane::AtNamed(slot as u8) {
                        warp.lane[l] = Lane::Running;
                        warp.pc[l] += 1;
                        self.since[v * WARP + l] = self.clock;
                    }
                }
            }
        }
        Ok(())
    }
}
