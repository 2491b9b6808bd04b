//! Graph rewrites: constant folding, common-subexpression elimination,
//! dead-code elimination, the attention rewrite and the copies of views
//! passed to kernels.
//!
//! Every pass rebuilds the graph front to back through a [`Rebuild`], so
//! the nodes stay in topological order by construction: a rewrite of node
//! `i` may emit new nodes, and they land before every later user. Passes
//! report what they did as [`Trace`] entries (`tsrc build --trace-fusion`).

mod attention;
mod cse;
mod fold;
mod kernel_args;

pub use attention::fuse_attention;
pub use cse::cse;
pub use fold::fold_constants;
pub use kernel_args::copy_kernel_args;

use crate::ir::{Graph, Node, ValueId};
use tessera_diagnostics::Span;

/// One line of the rewrite trace: a rule that fired, or did not and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The rule's name (`attention`, `cse`, `fold`, `dce`, ...).
    pub rule: &'static str,
    /// Whether it fired.
    pub fired: bool,
    /// The source it concerns.
    pub span: Span,
    /// What happened, or why not.
    pub message: String,
}

/// A graph being rebuilt from an old one: old values map to new ones.
pub(crate) struct Rebuild<'g> {
    pub old: &'g Graph,
    pub new: Graph,
    map: Vec<Option<ValueId>>,
}

impl<'g> Rebuild<'g> {
    pub fn new(old: &'g Graph) -> Rebuild<'g> {
        Rebuild {
            old,
            new: Graph {
                name: old.name.clone(),
                params: old.params.clone(),
                nodes: Vec::with_capacity(old.nodes.len()),
                outputs: Vec::new(),
                numerics: old.numerics,
            },
            map: vec![None; old.nodes.len()],
        }
    }

    /// The new value of old value `v`.
    pub fn get(&self, v: ValueId) -> ValueId {
        self.map[v.index()].expect("operands are rebuilt before their users")
    }

    /// Says that old value `old` is now `new`.
    pub fn set(&mut self, old: ValueId, new: ValueId) {
        self.map[old.index()] = Some(new);
    }

    /// Copies old node `i` with its operands mapped.
    pub fn copy(&mut self, i: usize) -> ValueId {
        let n = &self.old.nodes[i];
        let node = Node {
            op: n.op.clone(),
            args: n.args.iter().map(|a| self.get(*a)).collect(),
            ty: n.ty.clone(),
            span: n.span,
        };
        self.new.push(node)
    }

    /// Finishes: maps the outputs.
    pub fn finish(mut self) -> Graph {
        self.new.outputs = self.old.outputs.iter().map(|o| self.get(*o)).collect();
        self.new
    }
}

/// Removes nodes that no output depends on (parameters, and the further
/// outputs of a kernel launch that stays, stay).
pub fn dce(g: &Graph) -> (Graph, Vec<Trace>) {
    let mut live = vec![false; g.nodes.len()];
    for o in &g.outputs {
        live[o.index()] = true;
    }
    for i in (0..g.nodes.len()).rev() {
        if live[i] || matches!(g.nodes[i].op, crate::ir::Op::Param(_)) {
            live[i] = true;
            for a in &g.nodes[i].args {
                live[a.index()] = true;
            }
        }
    }
    // A launch writes all its outputs: those no one reads stay, as the
    // buffers it needs.
    for (i, n) in g.nodes.iter().enumerate() {
        if matches!(n.op, crate::ir::Op::KernelOut(_)) && n.args.iter().all(|a| live[a.index()]) {
            live[i] = true;
        }
    }
    let mut r = Rebuild::new(g);
    let mut removed = 0;
    for (i, alive) in live.iter().enumerate() {
        if *alive {
            let v = r.copy(i);
            r.set(ValueId(i as u32), v);
        } else {
            removed += 1;
        }
    }
    let trace = if removed > 0 {
        vec![Trace {
            rule: "dce",
            fired: true,
            span: Span::default(),
            message: format!("removed {removed} dead node(s)"),
        }]
    } else {
        Vec::new()
    };
    (r.finish(), trace)
}

/// A graph rewrite: the new graph and what the rewrite did.
pub type Pass = fn(&Graph) -> (Graph, Vec<Trace>);

/// The standard rewrites, by name, in the order they run: fold, CSE,
/// attention, DCE, then the copies of views passed to kernels. The
/// driver's pipeline runs them one by one to verify the graph after each.
pub const STANDARD: &[(&str, Pass)] = &[
    ("fold", fold_constants),
    ("cse", cse),
    ("attention", fuse_attention),
    ("dce", dce),
    ("kernel-args", copy_kernel_args),
];

/// The standard pipeline on a graph ([`STANDARD`]). Returns the graph and
/// the trace of every pass.
pub fn optimize(g: &Graph) -> (Graph, Vec<Trace>) {
    let mut trace = Vec::new();
    let mut g = g.clone();
    for (_, pass) in STANDARD {
        let (next, t) = pass(&g);
        g = next;
        trace.extend(t);
    }
    (g, trace)
}
