//! Fusion: partitions a graph's nodes into kernels.
//!
//! Nodes are visited in graph order. Matmuls, attention, convolutions and
//! user kernels start a kernel of their own; a reduction joins the row kernel
//! its operand was computed in when the axis and shape agree, else starts
//! one; an elementwise node joins the kernel of one of its operands when the
//! shapes allow it (the epilogue of a matmul, the row math of a softmax),
//! else starts an elementwise kernel. Views (transpose, reshape, slice) and
//! scalars are never stored: kernels read through views and recompute
//! scalars. A value is *materialised* (written to global memory) when a node
//! outside its kernel or the graph's result needs it.
//!
//! The further outputs of a user kernel (`kernel_out` nodes) are computed
//! by the kernel of their launch.
//!
//! A node may join kernel `g` only if every other kernel it reads from was
//! formed before `g`, so launching kernels in formation order is always a
//! valid order.

use tessera_graph::{Graph, Op, Type, ValueId};
use tessera_sema::Dim;

/// How the partitioner treats a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A parameter: in global memory already.
    Param,
    /// A scalar (or constant): recomputed wherever it is used.
    Scalar,
    /// A view: read through, never stored on its own.
    View,
    /// Elementwise math.
    Elementwise,
    /// A reduction along one axis.
    Reduce,
    /// A node that anchors a kernel of its own.
    Anchor,
    /// A collective: run by the runtime between kernels.
    Collective,
    /// A further output of the kernel launch it reads (`kernel_out`):
    /// computed by that launch's kernel.
    Output,
}

/// The class of node `v`.
pub fn class(g: &Graph, v: ValueId) -> Class {
    let n = g.node(v);
    if matches!(n.op, Op::Param(_)) {
        return Class::Param;
    }
    if matches!(n.ty, Type::Scalar(_)) || matches!(n.op, Op::Const(_) | Op::DimSize(_)) {
        return Class::Scalar;
    }
    if n.op.is_read_through() {
        return Class::View;
    }
    match n.op {
        Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast(_) => Class::Elementwise,
        Op::Reduce { .. } => Class::Reduce,
        Op::Collective { .. } => Class::Collective,
        Op::KernelOut(_) => Class::Output,
        _ => Class::Anchor,
    }
}

/// Whether `v` is computed from its index alone (`arange`): a view of
/// nothing, recomputed by every kernel that reads it, never stored.
pub fn is_generated(g: &Graph, v: ValueId) -> bool {
    matches!(g.node(v).op, Op::Arange { .. } | Op::Rand { .. })
}

/// The value a chain of views reads from (a generated value is its own).
pub fn view_base(g: &Graph, mut v: ValueId) -> ValueId {
    while class(g, v) == Class::View && !is_generated(g, v) {
        v = g.node(v).args[0];
    }
    v
}

/// The shape a kernel computing `v` iterates over: a scatter's source
/// elements (its index's shape, or src's with one index per slice), else
/// v's own.
pub fn iteration_shape(g: &Graph, v: ValueId) -> Vec<Dim> {
    let n = g.node(v);
    match n.op {
        Op::Scatter { vector: true, .. } => dims(g, n.args[1]),
        Op::Scatter { vector: false, .. } => dims(g, n.args[0]),
        _ => dims(g, v),
    }
}

/// The shape of a value (empty for scalars).
pub fn dims(g: &Graph, v: ValueId) -> Vec<Dim> {
    g.tensor_ty(v).map(|t| t.dims.clone()).unwrap_or_default()
}

/// What kind of group a partition holds, before configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupKind {
    /// Elementwise math over `shape`.
    Elementwise,
    /// Reductions along `axis` of `shape` with their elementwise neighbours.
    Row {
        /// The reduced axis.
        axis: usize,
    },
    /// A matmul, attention, convolution or user kernel (the anchor's op).
    Anchor,
    /// A collective.
    Collective,
}

/// How a value of a row group relates to the iteration shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowClass {
    /// The full iteration shape.
    Full,
    /// The reduced axis kept with extent 1.
    Kept,
    /// The reduced axis removed.
    Dropped,
}

/// One fused group.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Kind.
    pub kind: GroupKind,
    /// The first node.
    pub anchor: ValueId,
    /// Members in graph order.
    pub nodes: Vec<ValueId>,
    /// Iteration shape.
    pub shape: Vec<Dim>,
}

/// The partition of a graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// Groups in launch order.
    pub groups: Vec<Group>,
    /// The group of each node, if any.
    pub group_of: Vec<Option<usize>>,
    /// Whether each value is written to global memory.
    pub materialized: Vec<bool>,
    /// Explanations of the fusion decisions, for `--trace-fusion`.
    pub trace: Vec<String>,
}

/// The class of `v` in a row group reducing `axis` of `shape`, if any.
pub fn row_class(shape: &[Dim], axis: usize, v: &[Dim]) -> Option<RowClass> {
    if v == shape {
        return Some(RowClass::Full);
    }
    if v.len() == shape.len()
        && v.iter().zip(shape).enumerate().all(|(i, (a, b))| {
            if i == axis {
                a.as_known() == Some(1)
            } else {
                a == b
            }
        })
    {
        return Some(RowClass::Kept);
    }
    let mut dropped = shape.to_vec();
    if axis < dropped.len() {
        dropped.remove(axis);
        if v == dropped.as_slice() {
            return Some(RowClass::Dropped);
        }
    }
    None
}

/// Partitions `g` into groups.
pub fn partition(g: &Graph) -> Partition {
    let mut p = Partition {
        groups: Vec::new(),
        group_of: vec![None; g.nodes.len()],
        materialized: vec![false; g.nodes.len()],
        trace: Vec::new(),
    };
    for i in 0..g.nodes.len() {
        let v = ValueId(i as u32);
        match class(g, v) {
            Class::Param | Class::Scalar | Class::View => {}
            Class::Anchor => p.start(g, v, GroupKind::Anchor),
            Class::Collective => p.start(g, v, GroupKind::Collective),
            Class::Reduce => p.reduce(g, v),
            Class::Elementwise => p.elementwise(g, v),
            Class::Output => match p.group_of[g.node(v).args[0].index()] {
                Some(gi) => p.join(v, gi),
                None => p.start(g, v, GroupKind::Anchor),
            },
        }
    }
    p.outputs(g);
    p.materialize(g);
    p
}

impl Partition {
    fn start(&mut self, g: &Graph, v: ValueId, kind: GroupKind) {
        let shape = match (&kind, &g.node(v).op) {
            (GroupKind::Row { .. }, _) => dims(g, g.node(v).args[0]),
            (_, Op::Scatter { .. }) => iteration_shape(g, v),
            _ => dims(g, v),
        };
        self.group_of[v.index()] = Some(self.groups.len());
        self.groups.push(Group {
            kind,
            anchor: v,
            nodes: vec![v],
            shape,
        });
    }

    fn join(&mut self, v: ValueId, gi: usize) {
        self.group_of[v.index()] = Some(gi);
        self.groups[gi].nodes.push(v);
    }

    /// The groups `v` reads from, through views (scalars and params read
    /// nothing), with whether the read goes through a view.
    fn sources(&self, g: &Graph, v: ValueId) -> Vec<(usize, bool, ValueId)> {
        let mut out = Vec::new();
        for &a in &g.node(v).args {
            let base = view_base(g, a);
            if let Some(gi) = self.group_of[base.index()] {
                out.push((gi, base != a, a));
            }
        }
        out
    }

    /// Whether `v` may join group `gi`: every other group it reads from is
    /// older, and it reads `gi`'s values directly (not through a view).
    fn may_join(&self, g: &Graph, v: ValueId, gi: usize) -> bool {
        self.sources(g, v)
            .iter()
            .all(|&(src, via_view, _)| src < gi || (src == gi && !via_view))
    }

    /// Joins `v` to the newest group that `fits` and that it may join
    /// (every group it reads comes first); whether it found one.
    fn join_newest(&mut self, g: &Graph, v: ValueId, fits: impl Fn(&Self, usize) -> bool) -> bool {
        let found = (0..self.groups.len())
            .rev()
            .find(|&gi| fits(self, gi) && self.may_join(g, v, gi));
        if let Some(gi) = found {
            self.join(v, gi);
        }
        found.is_some()
    }

    fn reduce(&mut self, g: &Graph, v: ValueId) {
        let Op::Reduce { axis, .. } = g.node(v).op else {
            return;
        };
        let operand = g.node(v).args[0];
        let shape = dims(g, operand);
        if let Some(gi) = self.group_of[operand.index()] {
            let group = &self.groups[gi];
            let fits = match group.kind {
                GroupKind::Row { axis: a } => a == axis && group.shape == shape,
                GroupKind::Elementwise => group.shape == shape,
                _ => false,
            };
            if fits && self.may_join(g, v, gi) {
                if self.groups[gi].kind == GroupKind::Elementwise {
                    self.trace.push(format!(
                        "row fusion: the elementwise kernel at {} becomes a row kernel for the reduction at {v}",
                        group.anchor
                    ));
                    self.groups[gi].kind = GroupKind::Row { axis };
                } else {
                    self.trace.push(format!(
                        "row fusion: reduction {v} joins the row kernel at {} (one pass per reduction, no intermediate stored)",
                        group.anchor
                    ));
                }
                self.join(v, gi);
                return;
            }
        }
        // A reduction of a parameter joins the newest row kernel over the
        // same elements and axis (logsumexp's `max(x)` beside `sum(exp(x -
        // m))`) rather than reading the rows again in a kernel of its own.
        if self.group_of[operand.index()].is_none()
            && self.join_newest(g, v, |p, gi| {
                p.groups[gi].kind == GroupKind::Row { axis } && p.groups[gi].shape == shape
            })
        {
            return;
        }
        self.start(g, v, GroupKind::Row { axis });
    }

    fn elementwise(&mut self, g: &Graph, v: ValueId) {
        let shape = dims(g, v);
        let mut candidates: Vec<usize> = self
            .sources(g, v)
            .iter()
            .filter(|s| !s.1)
            .map(|s| s.0)
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        // Prefer the newest group: it is the one most likely to hold the
        // operand in registers.
        for &gi in candidates.iter().rev() {
            if self.fits(g, v, gi, &shape) && self.may_join(g, v, gi) {
                let group = &self.groups[gi];
                if group.kind == GroupKind::Anchor {
                    self.trace.push(format!(
                        "epilogue fusion: {} {v} runs in the epilogue of {} at {}",
                        op_name(&g.node(v).op),
                        op_name(&g.node(group.anchor).op),
                        group.anchor
                    ));
                }
                self.join(v, gi);
                return;
            }
        }
        if candidates.is_empty() {
            // Reads only parameters and scalars (or another group's values
            // through a view, which must come first): run it beside the
            // newest elementwise or row kernel over the same elements (its
            // consumers are likely there, as `x != x` beside a reduction of
            // x) rather than in a kernel of its own.
            if self.join_newest(g, v, |p, gi| {
                matches!(
                    p.groups[gi].kind,
                    GroupKind::Elementwise | GroupKind::Row { .. }
                ) && p.fits(g, v, gi, &shape)
            }) {
                return;
            }
        }
        self.start(g, v, GroupKind::Elementwise);
    }

    fn fits(&self, g: &Graph, v: ValueId, gi: usize, shape: &[Dim]) -> bool {
        let group = &self.groups[gi];
        match &group.kind {
            GroupKind::Elementwise => group.shape == shape,
            GroupKind::Anchor => {
                matches!(
                    g.node(group.anchor).op,
                    Op::MatMul { .. }
                        | Op::Attention { .. }
                        | Op::Conv2d { .. }
                        | Op::Concat { .. }
                        | Op::Gather { .. }
                        | Op::Take { .. }
                ) && group.shape == shape
            }
            GroupKind::Collective => false,
            GroupKind::Row { axis } => {
                let Some(mine) = row_class(&group.shape, *axis, shape) else {
                    return false;
                };
                // Operands from this group must combine with the result the
                // way the row program holds them.
                g.node(v).args.iter().all(|a| {
                    if self.group_of[a.index()] != Some(gi) {
                        return true;
                    }
                    let theirs = row_class(&group.shape, *axis, &dims(g, *a));
                    matches!(
                        (mine, theirs),
                        (RowClass::Full, Some(RowClass::Full | RowClass::Kept))
                            | (RowClass::Kept, Some(RowClass::Kept))
                            | (RowClass::Dropped, Some(RowClass::Dropped))
                    )
                })
            }
        }
    }

    /// Graph results that no kernel computes (views and scalars) get an
    /// elementwise kernel of their own that reads through them.
    fn outputs(&mut self, g: &Graph) {
        for &o in &g.outputs {
            if self.group_of[o.index()].is_none()
                && matches!(class(g, o), Class::View | Class::Scalar)
            {
                self.start(g, o, GroupKind::Elementwise);
            }
        }
    }

    fn materialize(&mut self, g: &Graph) {
        for &o in &g.outputs {
            self.materialized[o.index()] = true;
        }
        for (i, n) in g.nodes.iter().enumerate() {
            let Some(user) = self.group_of[i] else {
                continue;
            };
            // A launch writes every output of the kernel, read or not.
            if matches!(n.op, Op::Kernel { .. } | Op::KernelOut(_)) {
                self.materialized[i] = true;
            }
            for &a in &n.args {
                let base = view_base(g, a);
                if let Some(src) = self.group_of[base.index()] {
                    if src != user || base != a {
                        self.materialized[base.index()] = true;
                    }
                }
            }
        }
    }
}

/// A short name of an op for the trace.
pub fn op_name(op: &Op) -> String {
    match op {
        Op::Unary(u) => u.name().into(),
        Op::Binary(b) => b.name().into(),
        Op::Select => "select".into(),
        Op::Cast(d) => format!("cast to {d}"),
        Op::MatMul { .. } => "matmul".into(),
        Op::Attention { .. } => "attention".into(),
        Op::Conv2d { .. } => "conv2d".into(),
        Op::Reduce { kind, .. } => kind.name().into(),
        Op::Kernel { name, .. } => format!("kernel {name}"),
        Op::KernelOut(i) => format!("kernel output {i}"),
        other => format!("{other:?}").to_lowercase(),
    }
}
