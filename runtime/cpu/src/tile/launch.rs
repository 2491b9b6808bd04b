//! Kernel launches: the grid and the value types are evaluated once, then
//! worker threads pull program indices from a shared counter and run them.
//!
//! The first failing program (the lowest index that fails) stops the launch:
//! workers stop pulling new programs, and its error is returned. Since
//! programs are handed out in increasing order, every program below a
//! failing one has run, so the error reported does not depend on the
//! number of threads.

use super::buffer::GlobalBuf;
use super::interp::{Ctx, Program};
use super::value::{Num, ValInfo};
use super::{eval_dims, fail, R};
use crate::EvalError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};
use tessera_schedule::Bindings;
use tessera_tile::{Access, Block, Kernel, TOp, TileTy};

/// The most programs a launch may have.
const MAX_PROGRAMS: u64 = 1 << 31;

/// The most elements a tile may have.
const MAX_TILE: usize = 1 << 28;

/// The type of a value at this launch.
fn value_info(ty: &TileTy, b: &Bindings) -> R<ValInfo> {
    let shape = eval_dims(&ty.shape, b)?;
    let len = shape
        .iter()
        .try_fold(1usize, |n, d| n.checked_mul(*d))
        .filter(|n| *n <= MAX_TILE)
        .ok_or_else(|| {
            EvalError::new(format!(
                "a tile of shape {shape:?} has more than {MAX_TILE} elements"
            ))
        })?;
    Ok(ValInfo {
        shape,
        len,
        num: Num::new(ty.dtype),
    })
}

/// Evaluates the `size` operations of a block (and of the blocks nested in
/// it) and checks its parameter accesses.
fn scan(k: &Kernel, block: &Block, b: &Bindings, sizes: &mut [Option<i64>]) -> R<()> {
    for inst in &block.insts {
        match &inst.op {
            TOp::Size(s) => {
                let x = s.eval(b).map_err(EvalError::new)?;
                for r in &inst.results {
                    let slot = sizes
                        .get_mut(r.index())
                        .ok_or_else(|| EvalError::new(format!("value {r} is not declared")))?;
                    *slot = Some(x);
                }
            }
            TOp::Load { param, .. } | TOp::Store { param, .. } => {
                let p = k
                    .params
                    .get(*param)
                    .ok_or_else(|| EvalError::new(format!("there is no parameter {param}")))?;
                if matches!(inst.op, TOp::Store { .. }) && p.access == Access::In {
                    return fail(format!("store to the input parameter `{}`", p.name));
                }
            }
            TOp::For { body, .. } => scan(k, body, b, sizes)?,
            TOp::If { then, els, .. } => {
                scan(k, then, b, sizes)?;
                scan(k, els, b, sizes)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs `kernel` on its grid with `params` as its parameters, on `threads`
/// worker threads.
pub(crate) fn launch(
    kernel: &Kernel,
    params: &[&GlobalBuf],
    b: &Bindings,
    threads: usize,
) -> R<()> {
    if params.len() != kernel.params.len() {
        return fail(format!(
            "{} buffers for {} parameters",
            params.len(),
            kernel.params.len()
        ));
    }
    for (p, buf) in kernel.params.iter().zip(params) {
        let dims = eval_dims(&p.dims, b)
            .map_err(|e| EvalError::new(format!("parameter `{}`: {}", p.name, e.message)))?;
        if dims != buf.shape {
            return fail(format!(
                "parameter `{}` has shape {dims:?} but its buffer has shape {:?}",
                p.name, buf.shape
            ));
        }
        if p.dtype != buf.dtype {
            return fail(format!(
                "parameter `{}` is {} but its buffer is {}",
                p.name,
                p.dtype.name(),
                buf.dtype
            ));
        }
    }
    let mut grid = [0i64; 3];
    for (g, s) in grid.iter_mut().zip(&kernel.grid) {
        *g = s.eval(b).map_err(EvalError::new)?;
        if *g < 0 {
            return fail(format!("grid extent `{s}` is negative ({g})"));
        }
    }
    let total = grid
        .iter()
        .try_fold(1u64, |n, g| n.checked_mul(*g as u64))
        .filter(|n| *n <= MAX_PROGRAMS)
        .ok_or_else(|| EvalError::new(format!("the grid {grid:?} has more than 2^31 programs")))?;
    let info = kernel
        .values
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            value_info(ty, b).map_err(|e| EvalError::new(format!("value %{i}: {}", e.message)))
        })
        .collect::<R<Vec<_>>>()?;
    let mut sizes = vec![None; info.len()];
    scan(kernel, &kernel.body, b, &mut sizes)?;
    let ctx = Ctx {
        kernel,
        info,
        params,
        sizes,
        grid,
    };
    run_grid(&ctx, total as usize, threads)
}

/// The grid index of program `i` (axis 0 fastest).
fn pid_of(i: usize, grid: [i64; 3]) -> [i64; 3] {
    let i = i as i64;
    let (x, y) = (grid[0].max(1), grid[1].max(1));
    [i % x, (i / x) % y, i / (x * y)]
}

/// The error of program `i`, with its grid index.
fn in_program(i: usize, grid: [i64; 3], e: EvalError) -> EvalError {
    let [x, y, z] = pid_of(i, grid);
    e.within(format_args!("program ({x}, {y}, {z})"))
}

/// Runs the `total` programs of a launch.
fn run_grid(ctx: &Ctx<'_>, total: usize, threads: usize) -> R<()> {
    let workers = threads.clamp(1, total.max(1));
    if workers == 1 {
        let mut prog = Program::new(ctx);
        for i in 0..total {
            prog.run(pid_of(i, ctx.grid))
                .map_err(|e| in_program(i, ctx.grid, e))?;
        }
        return Ok(());
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failed: Mutex<Option<(usize, EvalError)>> = Mutex::new(None);
    let work = || {
        let mut prog = Program::new(ctx);
        while !stop.load(Relaxed) {
            let i = next.fetch_add(1, Relaxed);
            if i >= total {
                break;
            }
            if let Err(e) = prog.run(pid_of(i, ctx.grid)) {
                stop.store(true, Relaxed);
                let mut f = failed.lock().unwrap_or_else(PoisonError::into_inner);
                if f.as_ref().is_none_or(|(j, _)| i < *j) {
                    *f = Some((i, e));
                }
                break;
            }
        }
    };
    std::thread::scope(|s| {
        // The calling thread works too, so the launch completes even if no
        // thread can be started.
        for _ in 1..workers {
            if std::thread::Builder::new().spawn_scoped(s, work).is_err() {
                break;
            }
        }
        work();
    });
    match failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some((i, e)) => Err(in_program(i, ctx.grid, e)),
        None => Ok(()),
    }
}
