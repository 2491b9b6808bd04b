//! A multi-threaded CPU executor for Tile IR programs.
//!
//! [`run_program`] binds the program's dimensions from the shapes of its
//! inputs, allocates its temporaries and outputs, and runs its steps in
//! order. A kernel launch runs every program of the grid on a pool of worker
//! threads; each program interprets the kernel body on tiles, values of
//! concrete shape held in the class of their dtype (`f32` for fp32 and the
//! narrower floats, rounded to the dtype after every operation). Global
//! buffers are arrays of atomics during the run, so that even a kernel whose
//! programs write overlapping elements has no data race.
//!
//! Results do not depend on the number of threads: every operation is
//! computed within one program in a fixed order.

mod bcast;
pub(crate) use bcast::broadcast_shape;
mod buffer;
mod dot;
mod elementwise;
mod interp;
mod launch;
mod memory;
pub(crate) mod reduction;
mod sort;
mod value;

#[cfg(test)]
mod tests;

use crate::EvalError;
use buffer::GlobalBuf;
use tessera_comm::{Buffer, Communicator, Loopback};
use tessera_schedule::{Bindings, Size};
use tessera_tensor::Tensor;
use tessera_tile::profile::{Clock, LaunchRecord, LaunchSink};
use tessera_tile::{BufferDecl, BufferId, Step, TileProgram};

/// The result type of the executor.
pub(crate) type R<T> = Result<T, EvalError>;

/// An error with message `msg`.
pub(crate) fn fail<T>(msg: impl Into<String>) -> R<T> {
    Err(EvalError::new(msg))
}

/// The environment variable that sets [`default_threads`].
pub const THREADS_VAR: &str = "TESSERA_THREADS";

/// The default thread count: the environment variable `TESSERA_THREADS` if
/// it is set to a positive integer, else the machine's available
/// parallelism (1 if unknown).
pub fn default_threads() -> usize {
    std::env::var(THREADS_VAR)
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs a Tile IR program on host tensors with `threads` worker threads
/// (0 is taken as 1). Returns one tensor per output of the program.
///
/// The inputs bind the program's dimension symbols; an input whose dtype
/// differs from the declared one is converted. Results are bitwise the same
/// for any thread count.
pub fn run_program(
    p: &TileProgram,
    inputs: &[Tensor],
    threads: usize,
) -> Result<Vec<Tensor>, EvalError> {
    run_program_with(p, inputs, threads, None)
}

/// [`run_program`], reporting each kernel launch (timed on the host's
/// clock) to `sink` when given.
pub fn run_program_with(
    p: &TileProgram,
    inputs: &[Tensor],
    threads: usize,
    mut sink: Option<&mut LaunchSink<'_>>,
) -> Result<Vec<Tensor>, EvalError> {
    if inputs.len() != p.inputs.len() {
        return fail(format!(
            "`{}` takes {} inputs, {} were given",
            p.name,
            p.inputs.len(),
            inputs.len()
        ));
    }
    let bindings = bind_dims(p, inputs)?;
    let mut ins = Vec::with_capacity(inputs.len());
    for (decl, t) in p.inputs.iter().zip(inputs) {
        let dtype = decl.dtype;
        t.validate().map_err(|e| {
            EvalError::new(format!("input `{}` is not a valid tensor: {e}", decl.name))
        })?;
        let t = if t.dtype == dtype {
            std::borrow::Cow::Borrowed(t)
        } else {
            std::borrow::Cow::Owned(t.convert(dtype))
        };
        ins.push(GlobalBuf::from_tensor(&t)?);
    }
    let temps = alloc_all(&p.temps, &bindings, "temporary")?;
    let outs = alloc_all(&p.outputs, &bindings, "output")?;
    let bufs = Buffers {
        inputs: &ins,
        temps: &temps,
        outputs: &outs,
    };
    let threads = threads.max(1);
    for (k, step) in p.steps.iter().enumerate() {
        let start = std::time::Instant::now();
        run_step(p, &bufs, &bindings, step, threads)
            .map_err(|e| e.within(format_args!("`{}`, step {k}", p.name)))?;
        if let (Some(sink), Step::Launch { kernel, .. }) = (sink.as_deref_mut(), step) {
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let kern = &p.kernels[*kernel];
            let mut grid = [1u32; 3];
            for (g, s) in grid.iter_mut().zip(&kern.grid) {
                *g = s
                    .eval(&bindings)
                    .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
            }
            sink(LaunchRecord {
                kernel: *kernel,
                grid,
                threads: kern.threads,
                shared_bytes: kern.shared.iter().map(|s| s.bytes()).sum(),
                start,
                ms,
                clock: Clock::Wall,
                registers: None,
                sim: None,
            });
        }
    }
    Ok(outs.iter().map(GlobalBuf::to_tensor).collect())
}

/// Binds the dimension symbols of the inputs' declared shapes and checks
/// every input's shape against its declaration.
fn bind_dims(p: &TileProgram, inputs: &[Tensor]) -> R<Bindings> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| &t.shape[..]).collect();
    p.bind_dims(&shapes).map_err(EvalError::new)
}

/// Evaluates extents, which must be non-negative.
pub(crate) fn eval_dims(dims: &[Size], b: &Bindings) -> R<Vec<usize>> {
    tessera_tile::eval_dims(dims, b).map_err(EvalError::new)
}

/// Zeroed buffers for declarations.
fn alloc_all(decls: &[BufferDecl], b: &Bindings, what: &str) -> R<Vec<GlobalBuf>> {
    decls
        .iter()
        .map(|d| {
            let shape = eval_dims(&d.dims, b)
                .map_err(|e| EvalError::new(format!("{what} `{}`: {}", d.name, e.message)))?;
            GlobalBuf::zeros(d.dtype, &shape)
                .map_err(|e| EvalError::new(format!("{what} `{}`: {}", d.name, e.message)))
        })
        .collect()
}

/// The global buffers of a run.
struct Buffers<'a> {
    inputs: &'a [GlobalBuf],
    temps: &'a [GlobalBuf],
    outputs: &'a [GlobalBuf],
}

impl Buffers<'_> {
    fn get(&self, id: BufferId) -> R<&GlobalBuf> {
        let (list, i, what) = match id {
            BufferId::Input(i) => (self.inputs, i, "input"),
            BufferId::Temp(i) => (self.temps, i, "temporary"),
            BufferId::Output(i) => (self.outputs, i, "output"),
        };
        list.get(i)
            .ok_or_else(|| EvalError::new(format!("there is no {what} {i}")))
    }
}

/// Runs one step.
fn run_step(
    p: &TileProgram,
    bufs: &Buffers<'_>,
    bindings: &Bindings,
    step: &Step,
    threads: usize,
) -> R<()> {
    match step {
        Step::Launch { kernel, args } => {
            let k = p
                .kernels
                .get(*kernel)
                .ok_or_else(|| EvalError::new(format!("there is no kernel {kernel}")))?;
            let params = args.iter().map(|a| bufs.get(*a)).collect::<R<Vec<_>>>()?;
            for (i, value) in k.starts() {
                if let Some(b) = params.get(i) {
                    b.fill(value);
                }
            }
            launch::launch(k, &params, bindings, threads)
                .map_err(|e| e.within(format_args!("kernel `{}`", k.name)))
        }
        Step::Copy { src, dst } => bufs.get(*dst)?.copy_from(bufs.get(*src)?),
        Step::Collective {
            kind,
            devices,
            src,
            dst,
            ..
        } => {
            // One process holds the whole logical tensor: the loopback
            // communicator (shifts rotate the shards of dimension 0).
            let dst = bufs.get(*dst)?;
            dst.copy_from(bufs.get(*src)?)?;
            let mut bytes = dst.cell_bytes();
            let buf = Buffer {
                data: &mut bytes,
                shape: &dst.shape,
                split: Some(0),
            };
            Loopback { devices: *devices }
                .run(*kind, buf)
                .map_err(|e| EvalError::new(e.0))?;
            dst.store_cell_bytes(&bytes);
            Ok(())
        }
    }
}
