//! What a backend reports of each kernel launch of a Tile IR program to a
//! profiler (`tsrc run --profile`): the CPU executor, the simulator and
//! the GPU launcher all fill this one record.

use std::time::Instant;

/// How a launch's time was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// CUDA events around the launch: device time.
    Events,
    /// The host's clock around the launch (the CPU backend).
    Wall,
    /// The simulator: its wall clock, and an issue-bound estimate of the
    /// device time from the instructions it executed.
    Sim,
}

/// Counts the simulator keeps of one launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimCounts {
    /// Warp-instructions issued.
    pub warp_instructions: u64,
    /// Thread-instructions executed.
    pub thread_instructions: u64,
    /// Shared-memory wavefronts (bank conflicts included).
    pub shared_wavefronts: u64,
    /// Wavefronts beyond the least: the cost of bank conflicts.
    pub bank_conflicts: u64,
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRecord {
    /// The kernel's index in the program.
    pub kernel: usize,
    /// Programs along each grid axis.
    pub grid: [u32; 3],
    /// Threads per program.
    pub threads: u32,
    /// Shared memory per program, in bytes.
    pub shared_bytes: u64,
    /// When it was launched, on the host's clock.
    pub start: Instant,
    /// Milliseconds: device time (events), host time (wall), or the
    /// simulator's host time (see [`SimCounts`] for its device estimate).
    pub ms: f64,
    /// How `ms` was taken.
    pub clock: Clock,
    /// Registers per thread as the driver reports them (CUDA only).
    pub registers: Option<u32>,
    /// The simulator's counts.
    pub sim: Option<SimCounts>,
}

/// Where records go.
pub type LaunchSink<'a> = dyn FnMut(LaunchRecord) + 'a;
