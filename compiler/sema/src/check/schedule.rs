//! Schedules: knob names and arguments, value ranges, tensor-core alignment,
//! and the shared-memory and occupancy estimates against each architecture
//! (seed tables A.1 and A.2, and the hardware's real limits).

use crate::check::Cx;
use crate::suggest;
use crate::table::Callee;
use crate::Unit;
use std::collections::HashMap;
use tessera_core::{Arch, GemmTile, Knobs};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, ArgKind, ExprKind, Item};

/// A checked schedule with every knob resolved (defaults filled in).
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleInfo {
    /// The op or kernel it applies to.
    pub target: String,
    /// The architecture, or `None` for all.
    pub arch: Option<String>,
    /// Tile, warps, stages, copies, padding, vector width, tensor cores,
    /// occupancy bounds in warps per SM.
    pub knobs: Knobs,
    /// Autotune spaces: knob name to candidates.
    pub autotune: Vec<(String, Vec<u64>)>,
    /// Estimated shared memory per block, in bytes.
    pub smem_bytes: u64,
    /// Where `tensor_cores` (or `use_tensor_cores`) is set to true, if it
    /// is: the scheduler warns (W0305) when no product of the op can take
    /// them.
    pub tensor_cores_at: Option<Span>,
}

const KNOBS: &[&str] = &[
    "tile",
    "warps",
    "pipeline_stages",
    "async_copy",
    "use_shared_memory",
    "vectorize",
    "tensor_cores",
    "use_tensor_cores",
    "occupancy",
    "occupancy_target",
    "warp_specialize",
    "autotune",
];
/// The knobs an `autotune(...)` clause may vary.
pub const TUNABLE: &[&str] = Knobs::TUNABLE;

/// Facts about the scheduled op that the checks need.
struct Target {
    elem_bytes: u64,
    uses_mma: bool,
    /// Whether the tile's operands may be staged in shared memory: a
    /// kernel without `dot` stages none; an op may, through the ops it
    /// calls.
    stages: bool,
}

fn target_facts(callee: Callee<'_>) -> Target {
    let (params, uses_mma, stages) = match callee {
        Callee::Op(op) => (
            &op.params,
            op.body.as_ref().is_some_and(block_uses_mma),
            true,
        ),
        Callee::Kernel(k) => {
            let mma = block_uses_mma(&k.body);
            (&k.params, mma, mma)
        }
        Callee::Fn(f) => (&f.params, false, true),
    };
    let elem_bytes = params
        .iter()
        .find_map(|p| match &p.ty.kind {
            ast::TypeKind::Tensor {
                elem: ast::ElemType::Dtype(d, _),
                dims,
                ..
            } if !dims.is_empty() => Some(d.size_bytes()),
            _ => None,
        })
        .unwrap_or(4);
    Target {
        elem_bytes,
        uses_mma,
        stages,
    }
}

fn block_uses_mma(block: &ast::Block) -> bool {
    fn expr(e: &ast::Expr) -> bool {
        match &e.kind {
            ExprKind::Binary {
                op: ast::BinOp::MatMul,
                ..
            } => true,
            ExprKind::Call { callee, .. }
                if matches!(
                    callee.text.as_str(),
                    "matmul" | "dot" | "attention" | "conv2d" | "conv1d"
                ) =>
            {
                true
            }
            kind => kind.children().into_iter().any(expr),
        }
    }
    fn stmts(b: &ast::Block) -> bool {
        b.stmts.iter().any(|s| match &s.kind {
            ast::StmtKind::Let { value, .. }
            | ast::StmtKind::LetTuple { value, .. }
            | ast::StmtKind::Assign { value, .. } => expr(value),
            ast::StmtKind::Return(Some(e)) | ast::StmtKind::Expr(e) => expr(e),
            ast::StmtKind::For { body, .. } => stmts(body),
            ast::StmtKind::If {
                branches,
                otherwise,
            } => {
                branches.iter().any(|(c, b)| expr(c) || stmts(b))
                    || otherwise.as_ref().is_some_and(stmts)
            }
            _ => false,
        })
    }
    stmts(block)
}

/// Checks every schedule of one user file.
pub(crate) fn check_schedules(cx: &mut Cx<'_, '_>, unit: &Unit<'_>) {
    let mut seen: HashMap<(String, Option<String>), Span> = HashMap::new();
    for item in &unit.ast.items {
        let Item::Schedule(s) = item else { continue };
        let Some(entry) = cx.table.user_item(&s.target.text) else {
            let mut d = Diagnostic::error(
                codes::E0300,
                s.target.span,
                format!("no op or kernel named `{}` to schedule", s.target.text),
            )
            .with_label("not defined in this program");
            let names: Vec<String> = unit
                .ast
                .items
                .iter()
                .filter_map(|i| match i {
                    Item::Op(o) => Some(o.name.text.clone()),
                    Item::Kernel(k) => Some(k.name.text.clone()),
                    _ => None,
                })
                .collect();
            if let Some(n) = suggest::closest(&s.target.text, names.iter().map(String::as_str)) {
                d = d.with_help(format!("did you mean `{n}`?"));
            }
            cx.error(d);
            continue;
        };
        if matches!(entry.callee, Callee::Fn(_)) {
            cx.error(
                Diagnostic::error(
                    codes::E0300,
                    s.target.span,
                    format!("`{}` is a host function", s.target.text),
                )
                .with_label("only ops and kernels have schedules"),
            );
            continue;
        }
        let arch = match &s.arch {
            None => None,
            Some(a) => match Arch::from_name(&a.text) {
                Some(info) => Some(*info),
                None => {
                    let mut d = Diagnostic::error(
                        codes::E0305,
                        a.span,
                        format!("unknown architecture `{}`", a.text),
                    )
                    .with_label("not a supported architecture")
                    .with_note(format!(
                        "the architectures are {}",
                        Arch::ALL
                            .iter()
                            .map(|x| x.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    if let Some(n) = suggest::closest(&a.text, Arch::ALL.iter().map(|x| x.name)) {
                        d = d.with_help(format!("did you mean `{n}`?"));
                    }
                    cx.error(d);
                    continue;
                }
            },
        };
        let key = (s.target.text.clone(), arch.map(|a| a.name.to_owned()));
        let here = s
            .arch
            .as_ref()
            .map_or(s.target.span, |a| s.target.span.to(a.span));
        if let Some(prev) = seen.insert(key, here) {
            cx.error(
                Diagnostic::error(
                    codes::E0306,
                    here,
                    format!(
                        "second schedule for `{}`{}",
                        s.target.text,
                        arch.map(|a| format!(" on {}", a.name)).unwrap_or_default()
                    ),
                )
                .with_label("duplicate")
                .with_secondary(prev, "first schedule here")
                .with_help("merge the knobs into one schedule"),
            );
            continue;
        }
        let facts = target_facts(entry.callee);
        if let Some(info) = resolve(cx, s, arch, &facts) {
            cx.checked.schedules.push(info);
        }
    }
}

/// A knob argument's integer value.
fn int_arg(cx: &mut Cx<'_, '_>, e: &ast::Expr) -> Option<u64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        _ => {
            cx.error(
                Diagnostic::error(codes::E0307, e.span, "expected an integer literal")
                    .with_label("not an integer"),
            );
            None
        }
    }
}

fn bool_arg(cx: &mut Cx<'_, '_>, e: &ast::Expr) -> Option<bool> {
    match &e.kind {
        ExprKind::Bool(b) => Some(*b),
        _ => {
            cx.error(
                Diagnostic::error(codes::E0307, e.span, "expected `true` or `false`")
                    .with_label("not a boolean"),
            );
            None
        }
    }
}

fn out_of_range(cx: &mut Cx<'_, '_>, span: Span, what: &str, value: u64, allowed: &str) {
    cx.error(
        Diagnostic::error(
            codes::E0302,
            span,
            format!("{what} = {value} is out of range"),
        )
        .with_label(format!("allowed: {allowed}")),
    );
}

fn resolve(
    cx: &mut Cx<'_, '_>,
    s: &ast::ScheduleDef,
    arch: Option<Arch>,
    facts: &Target,
) -> Option<ScheduleInfo> {
    let mut info = ScheduleInfo {
        target: s.target.text.clone(),
        arch: arch.map(|a| a.name.to_owned()),
        knobs: Knobs::unset(facts.uses_mma && facts.elem_bytes <= 2),
        autotune: Vec::new(),
        smem_bytes: 0,
        tensor_cores_at: None,
    };
    let mut tile_span = s.target.span;
    let mut ok = true;
    for knob in &s.knobs {
        ok &= match knob.name.text.as_str() {
            "tile" => {
                tile_span = knob.span;
                knob_tile(cx, knob, &mut info)
            }
            "warps" | "pipeline_stages" | "vectorize" => knob_count(cx, knob, &mut info),
            "async_copy" | "tensor_cores" | "use_tensor_cores" => knob_flag(cx, knob, &mut info),
            "warp_specialize" => {
                let ok = knob_flag(cx, knob, &mut info);
                specialisable_on(cx, knob, arch);
                ok
            }
            "use_shared_memory" => knob_shared_memory(cx, knob, &mut info),
            "occupancy" | "occupancy_target" => knob_occupancy(cx, knob, arch, &mut info),
            "autotune" => knob_autotune(cx, knob, &mut info),
            _ => {
                unknown_knob(cx, knob);
                false
            }
        };
    }
    if !ok || !tensor_core_tile(cx, &info, tile_span) {
        return None;
    }
    info.smem_bytes = if facts.stages {
        info.knobs.smem_bytes(facts.elem_bytes)
    } else {
        0
    };
    let archs: Vec<Arch> = match arch {
        Some(a) => vec![a],
        // A schedule for every architecture is checked against the ones
        // executables are built for.
        None => vec![Arch::SM_80, Arch::SM_90],
    };
    for a in &archs {
        if !fits(cx, s, &info, a, facts, tile_span) {
            return None;
        }
    }
    // Unless the block says otherwise, products take tensor cores wherever
    // their operands do (bf16 casts of fp32 parameters, `matmul = tf32`)
    // and the tile is a multiple of the fragments: the scheduler decides
    // per product. The checks above held only 16-bit parameters to it.
    let written = s
        .knobs
        .iter()
        .any(|k| matches!(k.name.text.as_str(), "tensor_cores" | "use_tensor_cores"));
    if !written {
        info.knobs.tensor_cores = true;
    }
    Some(info)
}

/// The knob's name and arguments.
fn knob_args(knob: &ast::Knob) -> (&str, &[ast::Arg]) {
    (knob.name.text.as_str(), knob.args.as_deref().unwrap_or(&[]))
}

/// Reports malformed arguments to `knob`, with its `usage`.
fn bad_args(cx: &mut Cx<'_, '_>, knob: &ast::Knob, usage: &str) {
    cx.error(
        Diagnostic::error(
            codes::E0307,
            knob.span,
            format!("malformed arguments to `{}`", knob.name.text),
        )
        .with_label("unexpected arguments")
        .with_help(format!("write `{usage};`")),
    );
}

/// `tile(bm, bn, bk)`, positional or named; whether it is well formed.
fn knob_tile(cx: &mut Cx<'_, '_>, knob: &ast::Knob, info: &mut ScheduleInfo) -> bool {
    let (_, args) = knob_args(knob);
    let mut ok = true;
    let mut dims = [info.knobs.tile.bm, info.knobs.tile.bn, info.knobs.tile.bk];
    let positional = args.iter().all(|a| a.kind == ArgKind::Positional);
    if args.is_empty() || args.len() > 3 || (positional && args.len() != 3) {
        bad_args(cx, knob, "tile(bm = 128, bn = 128, bk = 64)");
        return false;
    }
    for (i, a) in args.iter().enumerate() {
        let slot = match &a.kind {
            ArgKind::Positional => Some(i),
            ArgKind::Named(n) => ["bm", "bn", "bk"].iter().position(|k| *k == n.text),
            ArgKind::In(_) => None,
        };
        let Some(slot) = slot else {
            bad_args(cx, knob, "tile(bm = 128, bn = 128, bk = 64)");
            ok = false;
            continue;
        };
        if let Some(v) = int_arg(cx, &a.value) {
            if !(1..=512).contains(&v) {
                out_of_range(cx, a.span, ["bm", "bn", "bk"][slot], v, "1 to 512");
                ok = false;
            }
            dims[slot] = v;
        }
    }
    info.knobs.tile = GemmTile {
        bm: dims[0],
        bn: dims[1],
        bk: dims[2],
    };
    ok
}

/// `warps(n)`, `pipeline_stages(n)` and `vectorize(n)`.
fn knob_count(cx: &mut Cx<'_, '_>, knob: &ast::Knob, info: &mut ScheduleInfo) -> bool {
    let (name, args) = knob_args(knob);
    let [a] = args else {
        bad_args(cx, knob, &format!("{name}(4)"));
        return false;
    };
    let Some(v) = int_arg(cx, &a.value) else {
        return true;
    };
    let (legal, allowed): (bool, &str) = match name {
        "warps" => (matches!(v, 1 | 2 | 4 | 8 | 16 | 32), "1, 2, 4, 8, 16 or 32"),
        "pipeline_stages" => ((1..=8).contains(&v), "1 to 8"),
        _ => (matches!(v, 1 | 2 | 4 | 8 | 16), "1, 2, 4, 8 or 16"),
    };
    if !legal {
        out_of_range(cx, a.span, name, v, allowed);
        return false;
    }
    match name {
        "warps" => info.knobs.warps = v,
        "pipeline_stages" => info.knobs.stages = v,
        _ => info.knobs.vectorize = v,
    }
    true
}

/// `async_copy`, `tensor_cores`, `use_tensor_cores` and `warp_specialize`,
/// with an optional boolean.
fn knob_flag(cx: &mut Cx<'_, '_>, knob: &ast::Knob, info: &mut ScheduleInfo) -> bool {
    let (name, args) = knob_args(knob);
    let value = match args {
        [] => true,
        [a] if a.kind == ArgKind::Positional => bool_arg(cx, &a.value).unwrap_or(true),
        _ => {
            bad_args(cx, knob, &format!("{name}(true)"));
            return false;
        }
    };
    match name {
        "async_copy" => info.knobs.async_copy = value,
        "warp_specialize" => info.knobs.warp_specialize = value,
        _ => {
            info.knobs.tensor_cores = value;
            info.tensor_cores_at = value.then_some(knob.span);
        }
    }
    true
}

/// Warns (W0304) when a schedule for `arch` sets `warp_specialize`, which
/// only sm_90a kernels take (a schedule for sm_90 applies to sm_90a too).
fn specialisable_on(cx: &mut Cx<'_, '_>, knob: &ast::Knob, arch: Option<Arch>) {
    let Some(a) = arch else {
        return;
    };
    if a.has_wgmma || a.portable().name == "sm_90" {
        return;
    }
    cx.error(
        Diagnostic::warning(
            codes::W0304,
            knob.span,
            format!("`warp_specialize` has no effect on {}", a.name),
        )
        .with_label("no kernel for this target is warp-specialised")
        .with_help(
            "warp specialisation needs sm_90a (setmaxnreg, the TMA and wgmma): \
             set it in a schedule `on sm_90a` or `on sm_90`",
        ),
    );
}

/// `use_shared_memory(flag, padding = p)`.
fn knob_shared_memory(cx: &mut Cx<'_, '_>, knob: &ast::Knob, info: &mut ScheduleInfo) -> bool {
    let (_, args) = knob_args(knob);
    let mut ok = true;
    for a in args {
        match &a.kind {
            ArgKind::Positional => {
                bool_arg(cx, &a.value);
            }
            ArgKind::Named(n) if n.text == "padding" => {
                if let Some(v) = int_arg(cx, &a.value) {
                    if v > 64 {
                        out_of_range(cx, a.span, "padding", v, "0 to 64 elements");
                        ok = false;
                    }
                    info.knobs.padding = v;
                }
            }
            _ => {
                bad_args(cx, knob, "use_shared_memory(true, padding = 8)");
                ok = false;
            }
        }
    }
    ok
}

/// `occupancy(min_warps = a, max_warps = b)` (and the seed's
/// `occupancy_target`), within the architecture's resident warps.
fn knob_occupancy(
    cx: &mut Cx<'_, '_>,
    knob: &ast::Knob,
    arch: Option<Arch>,
    info: &mut ScheduleInfo,
) -> bool {
    let (_, args) = knob_args(knob);
    let mut ok = true;
    let (mut lo, mut hi) = (None, None);
    for a in args {
        match &a.kind {
            ArgKind::Named(n) if n.text == "min_warps" => {
                lo = int_arg(cx, &a.value).map(|v| (v, a.span))
            }
            ArgKind::Named(n) if n.text == "max_warps" => {
                hi = int_arg(cx, &a.value).map(|v| (v, a.span))
            }
            _ => {
                bad_args(cx, knob, "occupancy(min_warps = 8, max_warps = 16)");
                ok = false;
            }
        }
    }
    let max = arch.map_or(64, |a| a.max_warps);
    let lo_v = lo.map_or(1, |(v, _)| v);
    let hi_v = hi.map_or(max, |(v, _)| v);
    for (v, span) in [lo, hi].into_iter().flatten() {
        if !(1..=max).contains(&v) {
            out_of_range(
                cx,
                span,
                "occupancy warps",
                v,
                &format!("1 to {max} warps per SM"),
            );
            ok = false;
        }
    }
    if lo_v > hi_v {
        cx.error(
            Diagnostic::error(
                codes::E0309,
                knob.span,
                format!("min_warps = {lo_v} exceeds max_warps = {hi_v}"),
            )
            .with_label("contradictory bounds")
            .with_help("swap them"),
        );
        ok = false;
    }
    info.knobs.occupancy = Some((lo_v, hi_v));
    ok
}

/// `autotune(knob in [candidates], ...)`: tunable knobs with legal,
/// non-empty candidate lists.
fn knob_autotune(cx: &mut Cx<'_, '_>, knob: &ast::Knob, info: &mut ScheduleInfo) -> bool {
    let (_, args) = knob_args(knob);
    let mut ok = true;
    for a in args {
        let ArgKind::In(n) = &a.kind else {
            bad_args(cx, knob, "autotune(bm in [64, 128], stages in [2, 3])");
            ok = false;
            continue;
        };
        if !TUNABLE.contains(&n.text.as_str()) {
            let mut d = Diagnostic::error(
                codes::E0308,
                n.span,
                format!("`{}` cannot be autotuned", n.text),
            )
            .with_label("not a tunable knob")
            .with_note(format!("tunable: {}", TUNABLE.join(", ")));
            if let Some(t) = suggest::closest(&n.text, TUNABLE.iter().copied()) {
                d = d.with_help(format!("did you mean `{t}`?"));
            }
            cx.error(d);
            ok = false;
            continue;
        }
        let ExprKind::List(items) = &a.value.kind else {
            cx.error(
                Diagnostic::error(codes::E0308, a.value.span, "autotune candidates are a list")
                    .with_label("write `[64, 128]`"),
            );
            ok = false;
            continue;
        };
        let mut values = Vec::new();
        for item in items {
            if let Some(v) = int_arg(cx, item) {
                let legal = match n.text.as_str() {
                    "warps" => matches!(v, 1 | 2 | 4 | 8 | 16 | 32),
                    "stages" => (1..=8).contains(&v),
                    "vectorize" => matches!(v, 1 | 2 | 4 | 8 | 16),
                    "warp_specialize" => v <= 1,
                    _ => (1..=512).contains(&v) && (!info.knobs.tensor_cores || v % 16 == 0),
                };
                if !legal {
                    cx.error(
                        Diagnostic::error(
                            codes::E0308,
                            item.span,
                            format!("{} = {v} is not a legal candidate", n.text),
                        )
                        .with_label("illegal value"),
                    );
                    ok = false;
                }
                values.push(v);
            }
        }
        if values.is_empty() {
            cx.error(
                Diagnostic::error(codes::E0308, a.value.span, "empty autotune space")
                    .with_label("no candidates"),
            );
            ok = false;
        }
        info.autotune.push((n.text.clone(), values));
    }
    ok
}

/// Reports a knob the language does not have.
fn unknown_knob(cx: &mut Cx<'_, '_>, knob: &ast::Knob) {
    let name = knob.name.text.as_str();
    let mut d = Diagnostic::error(
        codes::E0301,
        knob.name.span,
        format!("unknown schedule knob `{name}`"),
    )
    .with_label("not a knob");
    if let Some(k) = suggest::closest(name, KNOBS.iter().copied()) {
        d = d.with_help(format!("did you mean `{k}`?"));
    } else {
        d = d.with_note(format!("the knobs are {}", KNOBS.join(", ")));
    }
    cx.error(d);
}

/// Whether a tensor-core tile is a multiple of the fragments (E0303
/// otherwise).
fn tensor_core_tile(cx: &mut Cx<'_, '_>, info: &ScheduleInfo, tile_span: Span) -> bool {
    let GemmTile { bm, bn, bk } = info.knobs.tile;
    if !info.knobs.tensor_cores || (bm % 16 == 0 && bn % 16 == 0 && bk % 16 == 0) {
        return true;
    }
    let round = |v: u64| v.div_ceil(16) * 16;
    cx.error(
        Diagnostic::error(
            codes::E0303,
            tile_span,
            format!("tile {bm}x{bn}x{bk} is not a multiple of 16 for tensor cores"),
        )
        .with_label("tensor-core fragments are 16 wide")
        .with_help(format!(
            "use `tile(bm = {}, bn = {}, bk = {})`, or `tensor_cores(false)`",
            round(bm),
            round(bn),
            round(bk)
        )),
    );
    false
}

/// Checks the schedule's shared memory and occupancy on architecture `a`:
/// false (after E0304) when it cannot launch; warnings W0301 and W0302
/// when it fits badly.
fn fits(
    cx: &mut Cx<'_, '_>,
    s: &ast::ScheduleDef,
    info: &ScheduleInfo,
    a: &Arch,
    facts: &Target,
    tile_span: Span,
) -> bool {
    let GemmTile { bm, bn, bk } = info.knobs.tile;
    let kib = |b: u64| b.div_ceil(1024);
    if !a.fits_smem(info.smem_bytes) {
        let fix = match a.stages_that_fit(0, info.smem_bytes / info.knobs.stages, info.knobs.stages)
        {
            Some(fewer) => format!("use `pipeline_stages({fewer})`, or a smaller tile"),
            None => "use a smaller tile".to_owned(),
        };
        cx.error(
            Diagnostic::error(
                codes::E0304,
                tile_span,
                format!(
                    "schedule needs {} KiB of shared memory; {} allows {} KiB per block",
                    kib(info.smem_bytes),
                    a.name,
                    kib(a.smem_per_block)
                ),
            )
            .with_label(format!(
                "{} stages x ({bm}x{bk} + {bk}x{bn}) x {} bytes",
                info.knobs.stages, facts.elem_bytes
            ))
            .with_help(if s.arch.is_none() {
                format!("{fix}; or add `on sm_90` to restrict the schedule")
            } else {
                fix
            }),
        );
        return false;
    }
    if let Some(limit) = a
        .smem_guideline
        .filter(|l| info.smem_bytes > *l && s.arch.is_some())
    {
        cx.error(
            Diagnostic::warning(
                codes::W0301,
                tile_span,
                format!(
                    "schedule uses {} KiB of shared memory, above the {} KiB recommended on {}",
                    kib(info.smem_bytes),
                    kib(limit),
                    a.name
                ),
            )
            .with_label("fits, but limits resident blocks")
            .with_help("consider fewer pipeline stages or a smaller bk"),
        );
    }
    if let Some((min_warps, _)) = info.knobs.occupancy {
        // Registers depend on the kernel the op becomes, which is not known
        // here: only shared memory and warps bound the estimate.
        let resident = a.residency(info.knobs.warps, 0, info.smem_bytes).warps;
        if resident < min_warps {
            cx.error(
                Diagnostic::warning(
                    codes::W0302,
                    tile_span,
                    format!(
                        "about {resident} warps fit on an SM of {}, below min_warps = {min_warps}",
                        a.name
                    ),
                )
                .with_label(format!(
                    "{} KiB of shared memory per block",
                    kib(info.smem_bytes)
                ))
                .with_help("shrink the tile or the pipeline to raise occupancy"),
            );
        }
    }
    true
}
