//! Shared-memory checks: races between synchronisations, reads of memory
//! nobody wrote, and reads of bytes an asynchronous copy has not
//! delivered yet.
//!
//! The block keeps a clock that ticks at every synchronisation: a barrier
//! opening (`bar.sync 0`, a named barrier) or an `mbarrier` phase
//! completing. Every access is stamped with the clock's value, and every
//! thread has a horizon: the clock at its latest synchronisation (the
//! barrier it passed, the mbarrier phase it waited for). What any thread
//! did before a thread's horizon is ordered before that thread's next
//! accesses; what happened at or after it is concurrent. (A barrier or a
//! phase orders everything before it, not only what its participants did:
//! the compiler's protocols meet that, and hand-written code that relies
//! on a third thread's ordering is not told apart.)
//!
//! Every shared byte has a shadow: whether it was ever written, the last
//! writer and the stamp of that write, and the latest readers. Two
//! concurrent accesses by different threads conflict when one of them
//! writes; threads of one warp count as different threads (since Volta
//! they are scheduled independently, and only a barrier or
//! `bar.warp.sync` orders them).

use crate::SimErrorKind;

/// No thread.
const NONE: u32 = u32::MAX;
/// Several threads.
const MANY: u32 = u32::MAX - 1;

/// The shadow of one shared byte.
#[derive(Clone, Copy)]
pub struct Shadow {
    written: bool,
    /// An asynchronous copy into this byte is in flight.
    pending: bool,
    writer: u32,
    write_at: u32,
    reader: u32,
    read_at: u32,
}

/// When a thread accesses shared memory: the block's clock now, and the
/// thread's horizon (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The clock.
    pub now: u32,
    /// The accessing thread's latest synchronisation (at most `now`).
    pub since: u32,
}

const FRESH: Shadow = Shadow {
    written: false,
    pending: false,
    writer: NONE,
    write_at: 0,
    reader: NONE,
    read_at: 0,
};

/// A check that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Two threads wrote the byte in one barrier interval.
    WriteWrite { offset: usize, other: u32 },
    /// One thread read what another wrote in the same interval (in either
    /// order).
    ReadWrite {
        offset: usize,
        other: u32,
        read_first: bool,
    },
    /// Read before any write.
    Uninitialised { offset: usize },
    /// Read while an asynchronous copy into it is in flight.
    Pending { offset: usize },
}

impl Violation {
    /// The error kind.
    pub fn kind(&self) -> SimErrorKind {
        match self {
            Violation::Uninitialised { .. } => SimErrorKind::Uninitialised,
            _ => SimErrorKind::Race,
        }
    }

    /// What happened, for the error message.
    pub fn message(&self) -> String {
        match self {
            Violation::WriteWrite { offset, other } => format!(
                "shared-memory race: writes byte {offset}, which thread {other} wrote since the last barrier"
            ),
            Violation::ReadWrite {
                offset,
                other,
                read_first: true,
            } => format!(
                "shared-memory race: writes byte {offset}, which {} read since the last barrier",
                if *other == MANY {
                    "other threads".to_owned()
                } else {
                    format!("thread {other}")
                }
            ),
            Violation::ReadWrite { offset, other, .. } => format!(
                "shared-memory race: reads byte {offset}, which thread {other} wrote since the last barrier"
            ),
            Violation::Uninitialised { offset } => {
                format!("reads byte {offset} of shared memory, which nothing has written")
            }
            Violation::Pending { offset } => format!(
                "reads byte {offset} of shared memory while an asynchronous copy into it is in flight (missing cp.async.wait_group, or an mbarrier wait for a TMA load?)"
            ),
        }
    }
}

/// The shadow of a block's shared memory.
pub struct SharedCheck {
    on: bool,
    shadow: Vec<Shadow>,
}

impl SharedCheck {
    /// Shadows `bytes` bytes; `on == false` checks nothing.
    pub fn new(bytes: usize, on: bool) -> SharedCheck {
        SharedCheck {
            on,
            shadow: if on { vec![FRESH; bytes] } else { Vec::new() },
        }
    }

    /// Forgets everything (a new block).
    pub fn reset(&mut self) {
        self.shadow.fill(FRESH);
    }

    /// Thread `tid` reads `[off, off + size)` at `at`.
    pub fn read(&mut self, off: usize, size: usize, tid: u32, at: Stamp) -> Result<(), Violation> {
        if !self.on {
            return Ok(());
        }
        for (i, s) in self.shadow[off..off + size].iter_mut().enumerate() {
            let offset = off + i;
            if s.pending {
                return Err(Violation::Pending { offset });
            }
            if !s.written {
                return Err(Violation::Uninitialised { offset });
            }
            if s.write_at >= at.since && s.writer != tid {
                return Err(Violation::ReadWrite {
                    offset,
                    other: s.writer,
                    read_first: false,
                });
            }
            // Earlier reads ordered before this one are ordered before
            // whatever is ordered after it.
            if s.read_at < at.since {
                s.reader = tid;
            } else if s.reader != tid {
                s.reader = MANY;
            }
            s.read_at = at.now;
        }
        Ok(())
    }

    /// Thread `tid` writes `[off, off + size)` at `at`.
    pub fn write(&mut self, off: usize, size: usize, tid: u32, at: Stamp) -> Result<(), Violation> {
        if !self.on {
            return Ok(());
        }
        for (i, s) in self.shadow[off..off + size].iter_mut().enumerate() {
            let offset = off + i;
            if s.write_at >= at.since && s.writer != tid {
                return Err(Violation::WriteWrite {
                    offset,
                    other: s.writer,
                });
            }
            if s.read_at >= at.since && s.reader != tid {
                return Err(Violation::ReadWrite {
                    offset,
                    other: s.reader,
                    read_first: true,
                });
            }
            s.written = true;
            s.writer = tid;
            s.write_at = at.now;
        }
        Ok(())
    }

    /// Thread `tid` starts an asynchronous copy into `[off, off + size)`:
    /// checked as a write now; the bytes stay unreadable until
    /// [`finish_async`](Self::finish_async).
    pub fn start_async(
        &mut self,
        off: usize,
        size: usize,
        tid: u32,
        at: Stamp,
    ) -> Result<(), Violation> {
        self.write(off, size, tid, at)?;
        if self.on {
            for s in &mut self.shadow[off..off + size] {
                s.pending = true;
            }
        }
        Ok(())
    }

    /// A copy into `[off, off + size)` has landed and a barrier wait made
    /// it visible to every thread (an `mbarrier`'s completed phase): its
    /// bytes are as if written before anything that waits for them.
    pub fn land_synchronised(&mut self, off: usize, size: usize) {
        if self.on {
            for s in &mut self.shadow[off..off + size] {
                s.pending = false;
                s.write_at = 0;
            }
        }
    }

    /// The copy into `[off, off + size)` has landed.
    pub fn finish_async(&mut self, off: usize, size: usize) {
        if self.on {
            for s in &mut self.shadow[off..off + size] {
                s.pending = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stamp after `n` barriers, for a thread that passed them all.
    fn e(n: u32) -> Stamp {
        Stamp { now: n, since: n }
    }

    #[test]
    fn conflicts_need_two_threads_and_one_interval() {
        let mut c = SharedCheck::new(16, true);
        assert_eq!(
            c.read(0, 4, 0, e(1)),
            Err(Violation::Uninitialised { offset: 0 })
        );
        c.write(0, 4, 0, e(1)).unwrap();
        // The writer may read its own bytes.
        c.read(0, 4, 0, e(1)).unwrap();
        assert!(matches!(
            c.read(0, 4, 1, e(1)),
            Err(Violation::ReadWrite { .. })
        ));
        // After a barrier, anyone may.
        c.read(0, 4, 1, e(2)).unwrap();
        c.read(0, 4, 2, e(2)).unwrap();
        assert!(matches!(
            c.write(0, 1, 3, e(2)),
            Err(Violation::ReadWrite {
                read_first: true,
                ..
            })
        ));
        c.write(8, 4, 5, e(3)).unwrap();
        assert!(matches!(
            c.write(10, 2, 6, e(3)),
            Err(Violation::WriteWrite { other: 5, .. })
        ));
        c.start_async(4, 4, 7, e(3)).unwrap();
        assert_eq!(c.read(4, 4, 7, e(3)), Err(Violation::Pending { offset: 4 }));
        c.finish_async(4, 4);
        c.read(4, 4, 7, e(3)).unwrap();
    }

    #[test]
    fn horizons_order_what_came_before_them() {
        let mut c = SharedCheck::new(16, true);
        // Thread 1 reads at clock 3; the clock then ticks (a phase
        // completes) to 4.
        c.write(0, 4, 0, e(1)).unwrap();
        c.read(0, 4, 1, e(3)).unwrap();
        // A thread that waited for that phase writes without a race...
        c.write(0, 4, 2, Stamp { now: 4, since: 4 }).unwrap();
        // ...one that did not races with the read and with the write.
        assert!(matches!(
            c.write(0, 4, 3, Stamp { now: 4, since: 3 }),
            Err(Violation::WriteWrite { other: 2, .. })
        ));
        assert!(matches!(
            c.read(0, 4, 1, Stamp { now: 4, since: 3 }),
            Err(Violation::ReadWrite {
                read_first: false,
                ..
            })
        ));
        // Readers behind a thread's horizon are forgotten: the last reader
        // may then write.
        c.write(8, 4, 4, e(5)).unwrap();
        c.read(8, 4, 5, e(6)).unwrap();
        c.read(8, 4, 6, e(7)).unwrap();
        c.write(8, 4, 6, e(7)).unwrap();
        // A thread behind that write still races with it.
        assert!(matches!(
            c.write(8, 4, 5, Stamp { now: 7, since: 6 }),
            Err(Violation::WriteWrite { other: 6, .. })
        ));
    }
}
