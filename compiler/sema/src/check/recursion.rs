//! Recursion between ops and kernels, found on the call graph before any
//! body is checked: ops are inlined and kernels are launched from their
//! callers, so a cycle of calls (`a` calls `b`, `b` calls `a`) has no
//! meaning. A call is checked against its callee's signature alone when
//! the callee declares its result, so a cycle through such calls is never
//! entered while checking; it is found here, on the names each body calls.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Cx;
use crate::Unit;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::Item;

/// Reports every cycle of two or more user ops and kernels calling one
/// another as E0107, once per cycle, at the call in its first body in
/// source order, with the call chain; and returns the names on cycles,
/// whose calls the checker then leaves untyped (a call of itself is
/// caught where it is checked, with its chain).
pub(crate) fn find_cycles(cx: &mut Cx<'_, '_>, units: &[Unit<'_>]) -> BTreeSet<String> {
    // Each user body's calls of user items, in source order.
    let mut calls: BTreeMap<String, Vec<(String, Span)>> = BTreeMap::new();
    let mut at: HashMap<String, Span> = HashMap::new();
    for unit in units.iter().filter(|u| u.module.is_none()) {
        for item in &unit.ast.items {
            let (name, body) = match item {
                Item::Op(op) => (&op.name, op.body.as_ref()),
                Item::Kernel(k) => (&k.name, Some(&k.body)),
                _ => continue,
            };
            let found = body.into_iter().flat_map(|b| b.calls()).filter_map(|e| {
                let (callee, _, _) = e.kind.as_call()?;
                Some((callee.text.clone(), e.span))
            });
            at.entry(name.text.clone()).or_insert(name.span);
            calls.entry(name.text.clone()).or_default().extend(found);
        }
    }
    for list in calls.values_mut() {
        let known: Vec<(String, Span)> =
            list.drain(..).filter(|(c, _)| at.contains_key(c)).collect();
        *list = known;
    }
    let mut on_cycle = BTreeSet::new();
    let mut names: Vec<&String> = calls.keys().collect();
    names.sort_by_key(|n| (at[*n].file, at[*n].lo));
    for start in names {
        if on_cycle.contains(start) {
            continue;
        }
        // The first call from `start` that leads back to it (not directly).
        for (callee, span) in &calls[start] {
            if callee == start {
                continue;
            }
            let Some(path) = path_to(&calls, callee, start) else {
                continue;
            };
            let mut chain = vec![start.clone()];
            chain.extend(path.iter().cloned());
            on_cycle.extend(chain.iter().cloned());
            cx.error(
                Diagnostic::error(
                    codes::E0107,
                    *span,
                    format!("`{start}` calls itself through `{callee}`"),
                )
                .with_label("recursive call")
                .with_note(format!("the call chain is {}", chain.join(" -> ")))
                .with_help(
                    "ops are inlined and kernels launched by their callers, so they cannot recurse",
                ),
            );
            break;
        }
    }
    on_cycle
}

/// The names from `from` to `to` along calls (`from` first, `to` last),
/// breadth first, if `to` is reachable.
fn path_to(
    calls: &BTreeMap<String, Vec<(String, Span)>>,
    from: &str,
    to: &str,
) -> Option<Vec<String>> {
    let mut prev: HashMap<&str, &str> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    let mut seen: BTreeSet<&str> = BTreeSet::from([from]);
    while let Some(n) = queue.pop_front() {
        if n == to {
            let mut path = vec![to.to_string()];
            let mut cur = to;
            while let Some(p) = prev.get(cur) {
                path.push(p.to_string());
                cur = p;
            }
            path.reverse();
            return Some(path);
        }
        for (c, _) in calls.get(n).into_iter().flatten() {
            if seen.insert(c) {
                prev.insert(c, n);
                queue.push_back(c);
            }
        }
    }
    None
}
