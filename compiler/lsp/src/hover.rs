//! `textDocument/hover`: the checked type of the expression under the
//! cursor (dtype, shape, shard spec), the signature and docs of ops, kernels
//! and fns (stdlib ones included), and on a schedule the resolved tile
//! configuration.

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind};
use tessera_driver::diagnostics::Span;
use tessera_driver::sema::{Arch, ScheduleInfo, Ty};
use tessera_driver::syntax::ast::{self, Item};

use crate::analysis::{Analysis, SymKind, USER_FILE};

/// What each schedule knob does (from the language reference, section 8).
pub const KNOBS: &[(&str, &str, &str)] = &[
    ("tile", "tile(bm = 128, bn = 128, bk = 64)", "Output block `bm x bn`, reduction step `bk`; each 1..512. Default 128, 128, 64."),
    ("warps", "warps(n)", "Warps per thread block: 1, 2, 4, 8, 16 or 32. Default 4."),
    ("pipeline_stages", "pipeline_stages(n)", "Depth of the global-to-shared copy pipeline, 1..8. Default 2."),
    ("async_copy", "async_copy", "Asynchronous copies (cp.async, TMA). Default off; `async_copy(false)` turns it off."),
    ("use_shared_memory", "use_shared_memory(true, padding = 8)", "Stage tiles in shared memory; pad each row (0..64 elements) against bank conflicts."),
    ("vectorize", "vectorize(n)", "Elements per vector load/store: 1, 2, 4, 8 or 16. Default 1."),
    ("warp_specialize", "warp_specialize(false)", "Whether sm_90a kernels whose pipelined tiles all come by TMA get a producer warpgroup issuing the copies. Default on; `warp_specialize(false)` keeps one role."),
    ("tensor_cores", "tensor_cores", "MMA instructions. On by default for matmul-like bodies with 1- or 2-byte elements."),
    ("use_tensor_cores", "use_tensor_cores", "The seed spelling of `tensor_cores`."),
    ("occupancy", "occupancy(min_warps = a, max_warps = b)", "Target resident warps per SM."),
    ("occupancy_target", "occupancy_target(min_warps = a, max_warps = b)", "The seed spelling of `occupancy`."),
    ("autotune", "autotune(bm in [..], bn in [..], bk in [..], warps in [..], stages in [..], vectorize in [..], warp_specialize in [1, 0])", "Candidate values to search."),
];

fn markdown(value: String, range: Option<lsp_types::Range>) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range,
    }
}

fn code(text: &str) -> String {
    format!("```tessera\n{text}\n```")
}

/// The checked type of expression `id` of the user file, if known and not
/// erroneous.
pub fn expr_type(a: &Analysis, id: ast::ExprId) -> Option<&Ty> {
    let ty = a.comp.checked.as_ref()?.expr_types.get(&(USER_FILE, id))?;
    (!matches!(ty, Ty::Error)).then_some(ty)
}

/// The hover at byte `offset`.
pub fn hover(a: &Analysis, offset: u32) -> Option<Hover> {
    let range = |s: Span| Some(a.lines.range(a.text(), s.lo, s.hi));
    if let Some(occ) = a.index.occurrence_at(offset) {
        if occ.kind == SymKind::Knob {
            return knob_hover(a, offset, occ.span).map(|v| markdown(v, range(occ.span)));
        }
        if let Some(def) = occ.def.and_then(|d| a.index.defs.get(&d)) {
            let mut parts = vec![code(&def.detail)];
            // The type of this use, or of the bound value at a `let`.
            let ty = a
                .index
                .expr_at(offset)
                .filter(|(s, _)| *s == occ.span)
                .and_then(|(_, id)| expr_type(a, id))
                .or_else(|| {
                    def.value
                        .filter(|_| occ.is_def)
                        .and_then(|id| expr_type(a, id))
                });
            if let Some(ty) = ty {
                parts.push(format!("type: `{ty}`"));
            }
            let where_ = match (def.kind, def.span.file == USER_FILE) {
                (SymKind::Op | SymKind::Kernel | SymKind::Fn, false) => {
                    Some(std_module(a, def.span))
                }
                _ => None,
            };
            if let Some(module) = where_.flatten() {
                parts.push(format!("*from `std.{module}`*"));
            }
            if !def.docs.is_empty() {
                parts.push(def.docs.join("\n"));
            }
            return Some(markdown(parts.join("\n\n"), range(occ.span)));
        }
    }
    if let Some((span, id)) = a.index.expr_at(offset) {
        if let Some(ty) = expr_type(a, id) {
            return Some(markdown(format!("type: `{ty}`"), range(span)));
        }
    }
    if let Some(Item::Schedule(s)) = a.item_at(offset) {
        return Some(markdown(schedule_text(a, s), range(s.span)));
    }
    None
}

fn std_module(a: &Analysis, span: Span) -> Option<&'static str> {
    a.comp
        .stdlib
        .iter()
        .find(|(id, _, _)| *id == span.file)
        .map(|(_, m, _)| m.name())
}

/// The resolved configuration of schedule `s`, if the checker accepted it.
pub fn resolved<'a>(a: &'a Analysis, s: &ast::ScheduleDef) -> Option<&'a ScheduleInfo> {
    let arch = s.arch.as_ref().map(|n| n.text.as_str());
    a.comp
        .checked
        .as_ref()?
        .schedules
        .iter()
        .find(|i| i.target == s.target.text && i.arch.as_deref() == arch)
}

fn schedule_text(a: &Analysis, s: &ast::ScheduleDef) -> String {
    let head = format!(
        "schedule `{}`{}",
        s.target.text,
        s.arch
            .as_ref()
            .map_or(" (every architecture)".to_owned(), |n| format!(
                " on `{}`",
                n.text
            ))
    );
    match resolved(a, s) {
        Some(info) => {
            let mut out = format!("{head}, resolved:\n\n{}", config_text(info));
            if let Some(estimates) = estimates_text(a, s) {
                out.push_str("\n\n");
                out.push_str(&estimates);
            }
            out
        }
        None => {
            let text = a
                .text()
                .get(s.span.lo as usize..s.span.hi as usize)
                .unwrap_or("");
            format!("{head}\n\n{}", code(text))
        }
    }
}

/// The Schedule IR's estimates for the kernels of the schedule's target on
/// its architecture (sm_90 for a schedule that names none): registers,
/// shared memory, resident programs per SM and the occupancy they allow.
fn estimates_text(a: &Analysis, s: &ast::ScheduleDef) -> Option<String> {
    let arch_name = s.arch.as_ref().map_or("sm_90", |n| n.text.as_str());
    let arch = Arch::from_name(arch_name)?;
    let scheduled = a.comp.schedule_of(&s.target.text, arch)?;
    let kernels = &scheduled.schedule.kernels;
    if kernels.is_empty() {
        return None;
    }
    let mut lines = vec![format!("occupancy estimate on `{}`:", arch.name)];
    for k in kernels {
        let e = &k.estimates;
        lines.push(format!(
            "- `{}`: {} warps, ~{} registers/thread, {:.1} KiB shared; \
             {} blocks/SM ({}-limited), {}% of {} warps",
            k.name,
            k.config.warps,
            e.regs_per_thread,
            e.smem_bytes as f64 / 1024.0,
            e.blocks_per_sm,
            e.limited_by.name(),
            e.occupancy_pct,
            arch.max_warps
        ));
    }
    Some(lines.join("\n"))
}

/// A resolved schedule as a markdown list.
pub fn config_text(info: &ScheduleInfo) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    let tessera_driver::core::GemmTile { bm, bn, bk } = info.knobs.tile;
    let mut lines = vec![
        format!("- tile: bm = {bm}, bn = {bn}, bk = {bk}"),
        format!("- warps: {}", info.knobs.warps),
        format!("- pipeline stages: {}", info.knobs.stages),
        format!("- async copy: {}", on(info.knobs.async_copy)),
        format!("- shared-memory padding: {}", info.knobs.padding),
        format!("- vectorize: {}", info.knobs.vectorize),
        format!("- tensor cores: {}", on(info.knobs.tensor_cores)),
    ];
    if let Some((lo, hi)) = info.knobs.occupancy {
        lines.push(format!("- occupancy: {lo}..{hi} warps per SM"));
    }
    if !info.knobs.warp_specialize {
        lines.push("- warp specialisation: off".into());
    }
    for (knob, values) in &info.autotune {
        let values: Vec<String> = values.iter().map(u64::to_string).collect();
        lines.push(format!("- autotune {knob} in [{}]", values.join(", ")));
    }
    lines.push(format!(
        "- estimated shared memory: {} bytes ({:.1} KiB) per block",
        info.smem_bytes,
        info.smem_bytes as f64 / 1024.0
    ));
    lines.join("\n")
}

fn knob_hover(a: &Analysis, offset: u32, span: Span) -> Option<String> {
    let name = a.text().get(span.lo as usize..span.hi as usize)?;
    let mut out = match KNOBS.iter().find(|(k, _, _)| *k == name) {
        Some((_, usage, doc)) => format!("{}\n\n{doc}", code(usage)),
        None => format!("unknown schedule knob `{name}`"),
    };
    if let Some(Item::Schedule(s)) = a.item_at(offset) {
        if let Some(info) = resolved(a, s) {
            out.push_str(&format!("\n\nresolved schedule:\n\n{}", config_text(info)));
            if let Some(estimates) = estimates_text(a, s) {
                out.push_str("\n\n");
                out.push_str(&estimates);
            }
        }
    }
    Some(out)
}
