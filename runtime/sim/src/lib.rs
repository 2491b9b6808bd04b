//! A GPU simulator: runs the PTX our compiler emits (read back into Target
//! IR) on the CPU, with the checks compute-sanitizer gives on a real card.
//!
//! [`Sim`] is a device: [`alloc`](Sim::alloc), [`write`](Sim::write) and
//! [`read`](Sim::read) move bytes; [`launch`](Sim::launch) runs one kernel
//! of a [`Module`] over a grid. Blocks run in parallel on all cores; within
//! a block, warps of 32 lanes run in lockstep (see [`block`]). Every
//! global and shared access is bounds- and alignment-checked; shared memory
//! is checked for races between barriers, reads of unwritten bytes and
//! reads of bytes a `cp.async` has not delivered; a `bar.sync` that only
//! part of the block can reach is an error. Errors name the kernel, block,
//! thread, instruction and, through `.loc`, the source line.

mod alu;
pub mod banks;
pub mod block;
mod check;
mod memory;
pub mod tma;
pub mod wgmma;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tessera_ptx::ir::{Function, Inst, Label, Module, ASSERT_COMMENT};

pub use memory::Global;

/// What a simulation checks, and how long it may run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Shared-memory race, initialisation and async-copy checks (bounds
    /// and alignment are always checked).
    pub checks: bool,
    /// Host threads running blocks (0: all cores).
    pub threads: usize,
    /// Warp-instructions one warp may issue between barriers before the
    /// simulation gives up (an endless loop).
    pub max_steps: u64,
    /// The PTX target the simulated device runs (`sm_90a`); `None`: the
    /// launcher's default.
    pub target: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            checks: true,
            threads: 0,
            max_steps: 50_000_000,
            target: None,
        }
    }
}

/// The kind of a simulation error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimErrorKind {
    /// An access outside every allocation, or outside shared memory.
    OutOfBounds,
    /// An access not aligned to its size.
    Misaligned,
    /// Two threads touch the same shared byte between two barriers, one of
    /// them writing.
    Race,
    /// A read of shared memory nothing wrote.
    Uninitialised,
    /// A barrier only part of the block reaches.
    Barrier,
    /// A warp-wide instruction run by part of a warp.
    Divergence,
    /// A warp that never finishes.
    Timeout,
    /// A launch the kernel cannot take (wrong arguments, block too big).
    Launch,
    /// The kernel stopped on a check of its own (`trap`): an integer
    /// division by zero.
    Trap,
    /// A misused asynchronous operation (`wgmma.mma_async`, `mbarrier`,
    /// TMA; a block that waits on an mbarrier phase that never completes
    /// is one too). For wgmma: its
    /// accumulators touched, or the shared memory it reads written, before
    /// `wgmma.wait_group` retires it; no `wgmma.fence` before it; a
    /// descriptor that differs between lanes; a block that is not whole
    /// warpgroups.
    Async,
}

/// A failed launch or a check that fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError {
    /// What went wrong.
    pub kind: SimErrorKind,
    /// The kernel.
    pub kernel: String,
    /// The block index, when a thread failed.
    pub block: Option<[u32; 3]>,
    /// The thread index in its block.
    pub thread: Option<u32>,
    /// The instruction, as PTX.
    pub instruction: Option<String>,
    /// The source position of the instruction (file, line, column), from
    /// the last `.loc` before it.
    pub location: Option<(String, u32, u32)>,
    /// The details.
    pub message: String,
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kernel `{}`", self.kernel)?;
        if let (Some(b), Some(t)) = (self.block, self.thread) {
            write!(f, ", block ({}, {}, {}), thread {t}", b[0], b[1], b[2])?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(i) = &self.instruction {
            write!(f, "\n  at `{i}`")?;
        }
        if let Some((file, line, column)) = &self.location {
            write!(f, "\n  from {file}:{line}:{column}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimError {}

/// What a launch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Thread-instructions executed.
    pub thread_instructions: u64,
    /// Warp-instructions issued.
    pub warp_instructions: u64,
    /// Passes of warp-wide shared-memory accesses (loads, stores,
    /// `ldmatrix`, `cp.async` destinations), bank conflicts included: see
    /// [`banks`].
    pub shared_wavefronts: u64,
    /// Passes beyond the least those accesses could take: the cost of
    /// bank conflicts.
    pub bank_conflicts: u64,
}

impl Stats {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Stats) {
        self.thread_instructions += other.thread_instructions;
        self.warp_instructions += other.warp_instructions;
        self.shared_wavefronts += other.shared_wavefronts;
        self.bank_conflicts += other.bank_conflicts;
    }
}

/// A kernel prepared for one launch: the instructions that run (labels,
/// comments and `.loc` dropped), branch targets, source positions.
pub struct Kernel<'a> {
    /// The function.
    pub f: &'a Function,
    code: Vec<&'a Inst>,
    labels: HashMap<u32, usize>,
    /// Per instruction, the last `.loc` before it.
    locs: Vec<Option<(u32, u32, u32)>>,
    /// Per instruction, what the last `assert` comment before it says a
    /// failure means.
    asserts: Vec<Option<&'a str>>,
    files: &'a [String],
    grid: [u32; 3],
    params: Vec<u64>,
}

impl<'a> Kernel<'a> {
    fn new(m: &'a Module, f: &'a Function, grid: [u32; 3], params: Vec<u64>) -> Kernel<'a> {
        let mut code = Vec::new();
        let mut labels = HashMap::new();
        let mut locs = Vec::new();
        let mut asserts = Vec::new();
        let (mut loc, mut said) = (None, None);
        for i in &f.body {
            match i {
                Inst::Label(l) => {
                    labels.insert(l.0, code.len());
                }
                Inst::Comment(c) => {
                    if let Some(what) = c.strip_prefix(ASSERT_COMMENT) {
                        said = Some(what);
                    }
                }
                Inst::Loc { file, line, column } => loc = Some((*file, *line, *column)),
                i => {
                    code.push(i);
                    locs.push(loc);
                    asserts.push(said);
                }
            }
        }
        Kernel {
            f,
            code,
            labels,
            locs,
            asserts,
            files: &m.files,
            grid,
            params,
        }
    }

    /// The instruction index of label `l` (the end, which returns, when
    /// the label is unknown: the reader and verifier reject those).
    fn label(&self, l: Label) -> usize {
        self.labels.get(&l.0).copied().unwrap_or(self.code.len())
    }

    /// An error of thread `thread` of block `block` at instruction `pc`.
    fn error(
        &self,
        block: [u32; 3],
        thread: u32,
        pc: usize,
        kind: SimErrorKind,
        message: String,
    ) -> SimError {
        let location = self
            .locs
            .get(pc)
            .copied()
            .flatten()
            .map(|(file, line, col)| {
                let name = self
                    .files
                    .get(file as usize - 1)
                    .map_or("?", String::as_str);
                (name.to_owned(), line, col)
            });
        SimError {
            kind,
            kernel: self.f.name.clone(),
            block: Some(block),
            thread: Some(thread),
            instruction: self
                .code
                .get(pc)
                .map(|i| tessera_ptx::print::instruction(self.f, i)),
            location,
            message,
        }
    }
}

/// A simulated device.
#[derive(Default)]
pub struct Sim {
    memory: Global,
    options: Options,
    /// What every launch so far did.
    totals: Mutex<Stats>,
}

impl Sim {
    /// A device with default options (all checks on).
    pub fn new() -> Sim {
        Sim::with_options(Options::default())
    }

    /// A device with `options`.
    pub fn with_options(options: Options) -> Sim {
        Sim {
            memory: Global::new(),
            options,
            totals: Mutex::new(Stats::default()),
        }
    }

    /// The PTX target chosen in the options, if any.
    pub fn target(&self) -> Option<&'static str> {
        self.options.target
    }

    /// What every launch so far did.
    pub fn totals(&self) -> Stats {
        *self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocates `bytes` zeroed bytes of device memory; returns the
    /// device address.
    pub fn alloc(&self, bytes: usize) -> u64 {
        self.memory.alloc(bytes)
    }

    /// Frees the allocation at `addr`.
    pub fn free(&self, addr: u64) {
        self.memory.free(addr);
    }

    /// Copies `data` to device address `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        self.memory
            .view()
            .write(addr, data)
            .map_err(|_| format!("write of {} bytes at {addr:#x}: out of bounds", data.len()))
    }

    /// Copies `len` bytes from device address `addr`.
    pub fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, String> {
        let mut out = vec![0; len];
        self.memory
            .view()
            .read(addr, &mut out)
            .map_err(|_| format!("read of {len} bytes at {addr:#x}: out of bounds"))?;
        Ok(out)
    }

    /// Runs kernel `name` of `module` over `grid` blocks of `block`
    /// threads with `shared` bytes of dynamic shared memory; `params` are
    /// the raw parameter values (device addresses for buffers).
    pub fn launch(
        &self,
        module: &Module,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: &[u64],
    ) -> Result<Stats, SimError> {
        let launch_error = |message: String| SimError {
            kind: SimErrorKind::Launch,
            kernel: name.to_owned(),
            block: None,
            thread: None,
            instruction: None,
            location: None,
            message,
        };
        let f = module
            .functions
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| launch_error("no kernel of this name in the module".to_owned()))?;
        if params.len() != f.params.len() {
            return Err(launch_error(format!(
                "takes {} parameters but was given {}",
                f.params.len(),
                params.len()
            )));
        }
        if block[1] != 1 || block[2] != 1 {
            return Err(launch_error(
                "only one-dimensional blocks are supported (the IR reads %tid.x only)".to_owned(),
            ));
        }
        let threads = block[0] as usize;
        if threads == 0 || threads > 1024 || block[0] > f.threads {
            return Err(launch_error(format!(
                "a block of {threads} threads; the kernel allows 1 to {}",
                f.threads.min(1024)
            )));
        }
        if u64::from(shared) < f.shared_bytes {
            return Err(launch_error(format!(
                "needs {} bytes of dynamic shared memory but the launch gives {shared}",
                f.shared_bytes
            )));
        }
        let kernel = Kernel::new(module, f, grid, params.to_vec());
        let blocks = grid.iter().map(|g| *g as usize).product::<usize>();
        let workers = match self.options.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
        .min(blocks)
        .max(1);
        let next = AtomicUsize::new(0);
        // The lowest failing block so far: blocks are handed out in order,
        // so every lower block has started and runs to the end, and the
        // error reported is the same whatever the thread count.
        let failed_at = AtomicUsize::new(usize::MAX);
        let first_error: Mutex<Option<(usize, SimError)>> = Mutex::new(None);
        let stats = Mutex::new(Stats::default());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    let mut runner =
                        block::BlockRunner::new(&kernel, &self.options, threads, shared as usize);
                    let mut view = self.memory.view();
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        if b >= blocks || b > failed_at.load(Ordering::Relaxed) {
                            break;
                        }
                        let gx = grid[0] as usize;
                        let gy = grid[1] as usize;
                        let ctaid = [
                            (b % gx) as u32,
                            ((b / gx) % gy) as u32,
                            (b / gx / gy) as u32,
                        ];
                        if let Err(e) = runner.run(ctaid, threads, &mut view) {
                            failed_at.fetch_min(b, Ordering::Relaxed);
                            let mut first = first_error.lock().unwrap_or_else(|e| e.into_inner());
                            if first.as_ref().is_none_or(|(fb, _)| b < *fb) {
                                *first = Some((b, e));
                            }
                            break;
                        }
                    }
                    let mut st = stats.lock().unwrap_or_else(|e| e.into_inner());
                    st.add(&runner.stats);
                });
            }
        });
        let stats = stats.into_inner().unwrap_or_else(|e| e.into_inner());
        {
            let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
            t.add(&stats);
        }
        if let Some((_, e)) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        Ok(stats)
    }
}
