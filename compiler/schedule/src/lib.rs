//! Schedule IR: an op's graph partitioned into kernels (fused groups), each
//! with a tile configuration, pipeline, shared-memory staging and launch
//! grid, checked for feasibility before any code is generated.
//!
//! [`schedule`] runs fusion ([`fuse`]), configures every kernel
//! ([`config`]) from the user's schedule for the target architecture or the
//! defaults of seed table A.1, and reports what cannot run as diagnostics
//! with a fix. [`schedule_with`] takes an explicitly chosen configuration
//! instead (the autotuner's seam), and [`space`] enumerates the candidates
//! of a schedule's autotune space. [`verify()`](verify::verify) checks the
//! invariants and [`print`] writes the text form (`tsrc build --emit
//! schedule`).

pub mod config;
pub mod fuse;
pub mod ir;
pub mod print;
pub mod space;
pub mod verify;

pub use config::Choice;
pub use ir::*;
pub use tessera_core::{next_pow2, Bindings, Size};

use fuse::{class, view_base, Class, GroupKind};
use tessera_core::Arch;
use tessera_diagnostics::Diagnostic;
use tessera_graph::{Graph, ValueId};
use tessera_sema::ScheduleInfo;

/// The result of scheduling a graph.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The Schedule IR.
    pub schedule: Schedule,
    /// Fusion decisions, for `--trace-fusion`.
    pub trace: Vec<String>,
    /// Feasibility errors and warnings.
    pub diagnostics: Vec<Diagnostic>,
}

/// The schedule that applies to `op` on `arch`: one for that architecture,
/// else one for the portable target it extends (`on sm_90` applies to
/// `sm_90a`), else one for all.
pub fn schedule_for<'s>(
    schedules: &'s [ScheduleInfo],
    op: &str,
    arch: &Arch,
) -> Option<&'s ScheduleInfo> {
    let of_op = || schedules.iter().filter(move |s| s.target == op);
    let on = |name: &str| of_op().find(|s| s.arch.as_deref() == Some(name));
    on(arch.name)
        .or_else(|| on(arch.portable().name))
        .or_else(|| of_op().find(|s| s.arch.is_none()))
}

/// Schedules graph `g` for `arch` with the program's schedule blocks (the
/// one for `arch`, else the one for all architectures, else the defaults).
/// `user_grid` gives the launch grid of a user kernel node (from its
/// `grid(...)` clause).
pub fn schedule(
    g: &Graph,
    arch: &'static Arch,
    schedules: &[ScheduleInfo],
    user_grid: &dyn Fn(ValueId) -> Option<[Size; 3]>,
) -> Scheduled {
    let choose = |op: &str| schedule_for(schedules, op, arch).map(Choice::of_schedule);
    schedule_with(g, arch, &choose, user_grid, &Bindings::new())
}

/// Schedules graph `g` for `arch`, configuring the kernels of each op or
/// user kernel with what `choose` returns for its name (`None`: the
/// defaults). The autotuner passes one candidate of [`space::candidates`].
pub fn schedule_with(
    g: &Graph,
    arch: &'static Arch,
    choose: &dyn Fn(&str) -> Option<Choice>,
    user_grid: &dyn Fn(ValueId) -> Option<[Size; 3]>,
    hints: &Bindings,
) -> Scheduled {
    let p = fuse::partition(g);
    let mut kernels = Vec::new();
    let mut steps = Vec::new();
    let mut diagnostics = Vec::new();
    let mut trace = p.trace.clone();
    // Per schedule that sets `tensor_cores`: its op, where, its product
    // kernels, and whether one of them takes tensor cores.
    let mut asked: Vec<(String, tessera_diagnostics::Span, usize, bool)> = Vec::new();
    for group in &p.groups {
        if group.kind == GroupKind::Collective {
            steps.push(SStep::Collective(group.anchor));
            continue;
        }
        // A user kernel takes its own schedule; every other kernel the op's.
        let name = match &g.node(group.anchor).op {
            tessera_graph::Op::Kernel { name, .. } => name,
            _ => &g.name,
        };
        let chosen = choose(name);
        let mut k = config::configure(
            g,
            group,
            kernels.len(),
            arch,
            chosen.as_ref(),
            user_grid(group.anchor),
            hints,
        );
        let home = p.group_of[group.anchor.index()];
        for &v in &group.nodes {
            for &a in &g.node(v).args {
                // Read from memory: a parameter or a stored value, unless it
                // is this kernel's own register value.
                let base = view_base(g, a);
                let own = p.group_of[base.index()] == home && base == a;
                let in_memory = class(g, base) == Class::Param || p.materialized[base.index()];
                if !own && in_memory && !k.inputs.contains(&base) {
                    k.inputs.push(base);
                }
            }
            if p.materialized[v.index()] {
                k.outputs.push(v);
            }
        }
        k.inputs.sort();
        if group.nodes.len() > 1 && group.kind == GroupKind::Elementwise {
            trace.push(format!(
                "elementwise fusion: {} nodes run as kernel {} ({} stored)",
                group.nodes.len(),
                k.name,
                k.outputs.len()
            ));
        }
        config::feasibility(&k, arch, &mut diagnostics);
        if let Some(at) = chosen.as_ref().and_then(|c| c.tensor_cores_at) {
            let i = match asked.iter().position(|a| a.1 == at) {
                Some(i) => i,
                None => {
                    asked.push((name.clone(), at, 0, false));
                    asked.len() - 1
                }
            };
            if matches!(
                k.kind,
                KernelKind::MatMul | KernelKind::Attention | KernelKind::Conv2d
            ) {
                asked[i].2 += 1;
                asked[i].3 |= k.config.tensor_cores;
            }
        }
        steps.push(SStep::Kernel(kernels.len()));
        kernels.push(k);
    }
    for (op, at, products, taken) in asked {
        if !taken {
            config::tensor_cores_unused(&op, at, products, &mut diagnostics);
        }
    }
    let materialized = (0..g.nodes.len())
        .filter(|i| p.materialized[*i])
        .map(|i| ValueId(i as u32))
        .collect();
    Scheduled {
        schedule: Schedule {
            name: g.name.clone(),
            arch: arch.name,
            kernels,
            steps,
            materialized,
        },
        trace,
        diagnostics,
    }
}
