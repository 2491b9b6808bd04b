//! Lowering from the Schedule IR to Tile IR: one block program per kernel,
//! and the steps that launch them on the program's buffers.
//!
//! Every kernel is built the same way: a [`Ctx`] maps graph values to tile
//! values of the program being built. Materialised values are loaded
//! (through views: a transpose permutes the index tiles, a slice offsets
//! them, a reshape recomputes them from the flat index), scalars are
//! recomputed, and member nodes are emitted as tile math on the tiles of
//! their operands.

mod attention;
mod conv;
mod matmul;
mod rows;
mod scan;
mod select;
mod sort;

use crate::build::KernelBuilder;
use crate::ir::*;
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic};
use tessera_graph::{BinaryOp, Graph, Op, SliceAxis, Type, ValueId};
use tessera_schedule::config::product;
use tessera_schedule::fuse::{class, Class};
use tessera_schedule::{KernelKind, SKernel, SStep, Schedule, Size, Tile};
use tessera_sema::Dim;
use tessera_syntax::ast::Dtype;

type R<T> = Result<T, Box<Diagnostic>>;

fn unsupported(g: &Graph, v: ValueId, what: &str) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::error(
            codes::E0700,
            g.node(v).span,
            format!("cannot lower to Tile IR: {what}"),
        )
        .with_label("here"),
    )
}

/// Lowers the scheduled graph `g` to Tile IR. `user` lowers user kernels.
pub fn lower(
    g: &Graph,
    s: &Schedule,
    user: &dyn Fn(&Graph, &SKernel) -> R<crate::UserKernel>,
) -> R<TileProgram> {
    let mut p = TileProgram {
        name: g.name.clone(),
        dims: Vec::new(),
        inputs: Vec::new(),
        temps: Vec::new(),
        outputs: Vec::new(),
        kernels: Vec::new(),
        steps: Vec::new(),
    };
    let mut buffers: HashMap<ValueId, BufferId> = HashMap::new();
    // One input per graph parameter, in order, whether or not it is used.
    for (k, param) in g.params.iter().enumerate() {
        let node = g
            .nodes
            .iter()
            .position(|n| n.op == Op::Param(k))
            .map(|i| ValueId(i as u32));
        let (dims, dtype) = match (&param.ty, node) {
            (_, Some(v)) => (decl_dims(g, v)?, dtype_of(g, v)),
            (Type::Tensor(t), None) => (
                t.dims
                    .iter()
                    .map(|d| d.to_size().unwrap_or(Size::Const(0)))
                    .collect(),
                t.dtype,
            ),
            (Type::Scalar(_), None) => (Vec::new(), Dtype::Fp32),
        };
        for d in &dims {
            d.syms(&mut p.dims);
        }
        if let Some(v) = node {
            buffers.insert(v, BufferId::Input(k));
        }
        p.inputs.push(BufferDecl {
            name: param.name.clone(),
            dtype,
            dims,
        });
    }
    // Results first (so each is written where the caller finds it), then
    // temporaries.
    let mut copies = Vec::new();
    for (i, o) in g.outputs.iter().enumerate() {
        let decl = BufferDecl {
            name: format!("result{i}"),
            dtype: dtype_of(g, *o),
            dims: decl_dims(g, *o)?,
        };
        p.outputs.push(decl);
        match buffers.get(o) {
            Some(src) => copies.push((*src, BufferId::Output(i))),
            None => {
                buffers.insert(*o, BufferId::Output(i));
            }
        }
    }
    // User kernels first: an `inout` argument that is an intermediate
    // nothing else reads is updated in place (its output shares its
    // buffer); any other starts as a copy.
    let mut users = HashMap::new();
    for step in &s.steps {
        if let SStep::Kernel(i) = step {
            if let KernelKind::User(_) = &s.kernels[*i].kind {
                users.insert(*i, user(g, &s.kernels[*i])?);
            }
        }
    }
    let donated: HashMap<ValueId, ValueId> = (users.values())
        .flat_map(|u| u.copies.iter())
        .filter(|(src, dst)| donatable(g, *src) && !g.outputs.contains(dst))
        .map(|(src, dst)| (*dst, *src))
        .collect();
    let unshared = s.materialized.iter().filter(|v| !donated.contains_key(v));
    // In graph order, so that a chain of updates shares one buffer.
    let mut sharing: Vec<&ValueId> = donated.keys().collect();
    sharing.sort_unstable();
    for v in unshared.chain(sharing) {
        if let Some(b) = donated.get(v).and_then(|src| buffers.get(src)) {
            buffers.insert(*v, *b);
        }
        if !buffers.contains_key(v) {
            buffers.insert(*v, BufferId::Temp(p.temps.len()));
            p.temps.push(BufferDecl {
                name: format!("t{}", v.0),
                dtype: dtype_of(g, *v),
                dims: decl_dims(g, *v)?,
            });
        }
    }
    for step in &s.steps {
        match step {
            SStep::Kernel(i) => {
                let k = &s.kernels[*i];
                let kernel = match &k.kind {
                    KernelKind::User(_) => {
                        // An `inout` tensor: its output starts as the
                        // argument, copied before the launch unless it is
                        // the argument's own buffer.
                        let u = users.remove(i).expect("user kernels are lowered first");
                        for (src, dst) in u.copies {
                            let (src, dst) = (buffers[&src], buffers[&dst]);
                            if src != dst {
                                p.steps.push(Step::Copy { src, dst });
                            }
                        }
                        u.kernel
                    }
                    _ => lower_kernel(g, k)?,
                };
                let args = k
                    .inputs
                    .iter()
                    .chain(&k.outputs)
                    .map(|v| buffers[v])
                    .collect();
                p.steps.push(Step::Launch {
                    kernel: p.kernels.len(),
                    args,
                });
                p.kernels.push(kernel);
            }
            SStep::Collective(v) => {
                let n = g.node(*v);
                let Op::Collective { kind, axis } = &n.op else {
                    return Err(unsupported(
                        g,
                        *v,
                        "a collective step on a non-collective node",
                    ));
                };
                let src = *buffers
                    .get(&tessera_schedule::fuse::view_base(g, n.args[0]))
                    .ok_or_else(|| unsupported(g, *v, "a collective of a view"))?;
                p.steps.push(Step::Collective {
                    kind: *kind,
                    axis: axis.axis.clone(),
                    devices: axis.size,
                    src,
                    dst: buffers[v],
                });
            }
        }
    }
    for (src, dst) in copies {
        p.steps.push(Step::Copy { src, dst });
    }
    Ok(p)
}

/// Whether the kernel that takes `v` for an `inout` parameter may update
/// its buffer in place: an intermediate (not a parameter or a result) that
/// exactly one operand of one node reads (a [`Op::KernelOut`] names its
/// launch without reading it).
fn donatable(g: &Graph, v: ValueId) -> bool {
    let reads: usize = (g.nodes.iter())
        .filter(|n| !matches!(n.op, Op::KernelOut(_)))
        .map(|n| n.args.iter().filter(|a| **a == v).count())
        .sum();
    reads == 1 && !g.outputs.contains(&v) && !matches!(g.node(v).op, Op::Param(_))
}

fn dtype_of(g: &Graph, v: ValueId) -> Dtype {
    match g.ty(v) {
        Type::Tensor(t) => t.dtype,
        Type::Scalar(tessera_graph::ScalarKind::Int) => Dtype::Int64,
        Type::Scalar(tessera_graph::ScalarKind::Bool) => Dtype::Bool,
        Type::Scalar(tessera_graph::ScalarKind::Float) => Dtype::Fp32,
    }
}

fn decl_dims(g: &Graph, v: ValueId) -> R<Vec<Size>> {
    let dims = tessera_schedule::fuse::dims(g, v);
    dims.iter()
        .map(|d| {
            d.to_size()
                .ok_or_else(|| unsupported(g, v, "a dimension unknown at compile time"))
        })
        .collect()
}

fn lower_kernel(g: &Graph, k: &SKernel) -> R<Kernel> {
    let threads = (k.config.warps * 32) as u32;
    let mut cx = Ctx::new(g, k, KernelBuilder::new(&k.name, k.grid.clone(), threads));
    // Instructions come from the kernel's main op unless a member's own
    // code (`math`) says otherwise.
    cx.b.at(g.node(k.anchor).span);
    match (&k.kind, &k.config.tile) {
        (KernelKind::Elementwise, Tile::Rows(t)) => rows::elementwise(&mut cx, t)?,
        (KernelKind::Row { axis }, Tile::Rows(t))
            if matches!(g.node(k.anchor).op, Op::Scan { .. }) =>
        {
            scan::scan(&mut cx, *axis, t)?
        }
        (KernelKind::Row { axis }, Tile::Rows(t))
            if matches!(g.node(k.anchor).op, Op::Argsort { .. } | Op::Merge { .. }) =>
        {
            sort::argsort(&mut cx, *axis, t)?
        }
        (KernelKind::Row { axis }, Tile::Rows(t)) => rows::row(&mut cx, *axis, t)?,
        (KernelKind::MatMul, Tile::Gemm(t)) => matmul::matmul(&mut cx, t)?,
        (KernelKind::Conv2d, Tile::Gemm(t)) => matmul::conv2d(&mut cx, t)?,
        (KernelKind::Attention, Tile::Attention(t)) => attention::attention(&mut cx, t)?,
        (KernelKind::User(_), _) => return Err(unsupported(g, k.anchor, "a user kernel here")),
        (kind, _) => {
            return Err(unsupported(
                g,
                k.anchor,
                &format!("a {} kernel with another kind's tile", kind.name()),
            ))
        }
    }
    let mut kernel = cx.b.finish();
    kernel.span = g.node(k.anchor).span;
    kernel.vectorize = k.config.vectorize.clamp(1, 16) as u32;
    kernel.blocks_per_sm = blocks_per_sm(&k.config);
    kernel.warp_specialize = k.config.warp_specialize;
    // (Kernels without products keep the default: it changes nothing.)
    let products = matches!(
        k.kind,
        KernelKind::MatMul | KernelKind::Attention | KernelKind::Conv2d
    );
    kernel.tensor_cores = k.config.tensor_cores || !products;
    kernel.fast_exp = matches!(k.kind, KernelKind::Attention);
    Ok(kernel)
}

/// The programs per SM a schedule's `occupancy` (resident warps, at least
/// and at most) asks of programs of its warps: at least the fewest that
/// reach the minimum, at most the most that stay under the maximum (one,
/// when a single program exceeds it).
pub(crate) fn blocks_per_sm(config: &tessera_schedule::TileConfig) -> Option<(u32, u32)> {
    let (lo, hi) = config.occupancy?;
    let warps = config.warps.max(1);
    let at_most = (hi / warps).max(1);
    let at_least = lo.div_ceil(warps).clamp(1, at_most);
    Some((at_least as u32, at_most as u32))
}

/// The state of lowering one kernel.
pub(crate) struct Ctx<'g> {
    pub g: &'g Graph,
    pub k: &'g SKernel,
    pub b: KernelBuilder,
    /// Kernel parameter of each value in memory.
    params: HashMap<ValueId, usize>,
    /// Tiles of member values in the current scope.
    pub vals: HashMap<ValueId, Value>,
    /// Whether reads may index below 0 (a padded convolution's input):
    /// a read through a slice or reshape then checks `index >= 0` too.
    pub negative_reads: bool,
}

impl<'g> Ctx<'g> {
    fn new(g: &'g Graph, k: &'g SKernel, mut b: KernelBuilder) -> Ctx<'g> {
        let mut params = HashMap::new();
        for v in k.inputs.iter().chain(&k.outputs) {
            let name = match (g.node(*v).op.clone(), g.outputs.iter().position(|o| o == v)) {
                (Op::Param(i), _) => g.params[i].name.clone(),
                (_, Some(i)) => format!("result{i}"),
                _ => format!("t{}", v.0),
            };
            let dims = decl_dims(g, *v).unwrap_or_default();
            let i = b.param(&name, dtype_of(g, *v), dims, Access::In);
            params.insert(*v, i);
        }
        Ctx {
            g,
            k,
            b,
            params,
            vals: HashMap::new(),
            negative_reads: false,
        }
    }

    /// The size of dimension `d`.
    pub fn dim(&mut self, d: &Dim) -> Value {
        let s = d.to_size().unwrap_or(Size::Const(0));
        self.b.size(&s)
    }

    /// Index tiles for the dims of `v` from index tiles of an iteration
    /// space `it_dims`, by numpy broadcasting (trailing alignment; a dim of
    /// extent 1 against a larger one reads index 0).
    pub fn align(&mut self, v: ValueId, it_dims: &[Dim], it_idx: &[Value]) -> Vec<Value> {
        let vd = tessera_schedule::fuse::dims(self.g, v);
        let off = it_dims.len().saturating_sub(vd.len());
        vd.iter()
            .enumerate()
            .map(|(j, d)| {
                let it = &it_dims[j + off];
                if d.as_known() == Some(1) && it.as_known() != Some(1) {
                    self.b.int(0)
                } else {
                    it_idx[j + off]
                }
            })
            .collect()
    }

    /// Loads value `v` (in memory, or a view of a value in memory) at
    /// `idx` (one index tile per dim of `v`), as a tile of `v`'s dtype.
    pub fn load(&mut self, v: ValueId, idx: Vec<Value>, mask: Option<Value>) -> R<Value> {
        if let Some(x) = self.scalar(v)? {
            return Ok(x);
        }
        let (base, idx, logical) = self.through_views(v, idx)?;
        // Generated values are computed, not read: out-of-bounds lanes are
        // masked where the value is stored.
        match self.g.node(base).op {
            Op::Arange { start } => {
                let s = self.b.int(start);
                let x = self.b.binary(BinaryOp::Add, idx[0], s);
                return Ok(self.b.cast(x, dtype_of(self.g, base)));
            }
            Op::Rand { seed, offset } => {
                let dims = tessera_schedule::fuse::dims(self.g, base);
                let flat = self.flatten(&idx, &dims);
                let o = self.b.int(offset as i64);
                let counter = self.b.binary(BinaryOp::Add, flat, o);
                let ty = TileTy {
                    shape: self.b.ty(counter).shape.clone(),
                    dtype: Dtype::Fp32,
                };
                return Ok(self.b.op(
                    TOp::Rand {
                        seed: Seed::Const(seed),
                        counter,
                    },
                    ty,
                ));
            }
            _ => {}
        }
        let mask = self.b.and(mask, logical);
        let p = *self
            .params
            .get(&base)
            .ok_or_else(|| unsupported(self.g, v, "a value that is not in memory"))?;
        Ok(self.b.load(p, idx, mask, 0.0))
    }

    /// Follows views from `v` to the value in memory, rewriting the index
    /// tiles; the mask keeps reads inside the view's own bounds where a view
    /// could otherwise reach elements outside it.
    fn through_views(
        &mut self,
        v: ValueId,
        idx: Vec<Value>,
    ) -> R<(ValueId, Vec<Value>, Option<Value>)> {
        let n = self.g.node(v);
        if class(self.g, v) != Class::View || tessera_schedule::fuse::is_generated(self.g, v) {
            return Ok((v, idx, None));
        }
        let src = n.args[0];
        let src_dims = tessera_schedule::fuse::dims(self.g, src);
        let my_dims = tessera_schedule::fuse::dims(self.g, v);
        let mut bounds = None;
        let idx = match &n.op {
            Op::Transpose => {
                let mut idx = idx;
                let r = idx.len();
                idx.swap(r - 2, r - 1);
                idx
            }
            Op::Permute(perm) => {
                // Result axis i is source axis perm[i].
                let mut out = idx.clone();
                for (i, &p) in perm.iter().enumerate() {
                    out[p] = idx[i];
                }
                out
            }
            Op::Slice(axes) => {
                bounds = self.view_bounds(&idx, &my_dims);
                let mut out = Vec::new();
                let mut it = idx.into_iter();
                for (d, ax) in axes.iter().enumerate() {
                    match ax {
                        SliceAxis::Index(i) => out.push(self.b.int(*i as i64)),
                        SliceAxis::Full => out.push(it.next().unwrap_or_else(|| self.b.int(0))),
                        SliceAxis::Range(a, _) => {
                            let j = it.next().unwrap_or_else(|| self.b.int(0));
                            let a = self.b.int(*a as i64);
                            out.push(self.b.binary(BinaryOp::Add, j, a));
                        }
                    }
                    let _ = d;
                }
                out.extend(it);
                out
            }
            Op::Reshape => {
                bounds = self.view_bounds(&idx, &my_dims);
                let flat = self.flatten(&idx, &my_dims);
                self.unflatten(flat, &src_dims)
            }
            _ => return Err(unsupported(self.g, v, "this view")),
        };
        let (base, idx, inner) = self.through_views(src, idx)?;
        let mask = self.b.and(bounds, inner);
        Ok((base, idx, mask))
    }

    /// `idx[d] < dims[d]` for every d (`None` for rank 0), and `0 <=
    /// idx[d]` where reads may index below 0: a read through a slice or a
    /// reshape at a negative index (a convolution's padding) would
    /// otherwise land on an element of the tensor beneath.
    fn view_bounds(&mut self, idx: &[Value], dims: &[Dim]) -> Option<Value> {
        let mut mask = self.in_bounds(idx, dims);
        if !self.negative_reads {
            return mask;
        }
        let zero = self.b.int(0);
        for i in idx {
            let ge = self.b.binary(BinaryOp::Ge, *i, zero);
            mask = self.b.and(mask, Some(ge));
        }
        mask
    }

    /// `idx[d] < dims[d]` for every d, or `None` for rank 0.
    pub fn in_bounds(&mut self, idx: &[Value], dims: &[Dim]) -> Option<Value> {
        let mut mask = None;
        for (i, d) in idx.iter().zip(dims) {
            let n = self.dim(d);
            let lt = self.b.binary(BinaryOp::Lt, *i, n);
            mask = self.b.and(mask, Some(lt));
        }
        mask
    }

    /// The row-major flat index of `idx` in `dims`.
    pub fn flatten(&mut self, idx: &[Value], dims: &[Dim]) -> Value {
        let mut flat = self.b.int(0);
        for (i, d) in idx.iter().zip(dims) {
            let n = self.dim(d);
            let scaled = self.b.binary(BinaryOp::Mul, flat, n);
            flat = self.b.binary(BinaryOp::Add, scaled, *i);
        }
        flat
    }

    /// Index tiles of the flat index `flat` in `dims`.
    pub fn unflatten(&mut self, flat: Value, dims: &[Dim]) -> Vec<Value> {
        let mut out = Vec::new();
        let mut stride = Size::Const(1);
        for (i, d) in dims.iter().enumerate().rev() {
            let q = if stride == Size::Const(1) {
                flat
            } else {
                let s = self.b.size(&stride);
                self.b.binary(BinaryOp::Div, flat, s)
            };
            // The outermost index needs no wrap: past the end it is out of
            // bounds, and loads and stores check bounds.
            out.push(if i == 0 {
                q
            } else {
                let n = self.dim(d);
                self.b.binary(BinaryOp::Rem, q, n)
            });
            stride = stride.mul(d.to_size().unwrap_or(Size::Const(1)));
        }
        out.reverse();
        out
    }

    /// A scalar value recomputed in the kernel, or `None` if `v` is a tensor.
    pub fn scalar(&mut self, v: ValueId) -> R<Option<Value>> {
        if class(self.g, v) != Class::Scalar {
            return Ok(None);
        }
        if let Some(x) = self.vals.get(&v) {
            return Ok(Some(*x));
        }
        let n = self.g.node(v);
        let dtype = dtype_of(self.g, v);
        let ty = TileTy::scalar(dtype);
        let x = match &n.op {
            Op::Const(c) => self.b.constant(*c, ty),
            Op::DimSize(d) => {
                let s = self.dim(d);
                self.b.cast(s, dtype)
            }
            Op::Param(_) => return Ok(None),
            _ => {
                let mut args = Vec::new();
                for a in &n.args {
                    match self.scalar(*a)? {
                        Some(x) => args.push(x),
                        None => {
                            return Err(unsupported(self.g, v, "a scalar computed from a tensor"))
                        }
                    }
                }
                self.math(v, &args, None)?
            }
        };
        self.vals.insert(v, x);
        Ok(Some(x))
    }

    /// Emits elementwise node `v` on operand tiles `args`, in an iteration
    /// space whose elements outside the tensors `mask` clears (their
    /// loads read 0): an integer divisor reads 1 there instead, so that
    /// only a zero divisor in the data traps.
    pub fn math(&mut self, v: ValueId, args: &[Value], mask: Option<Value>) -> R<Value> {
        let outer = self.b.at(self.g.node(v).span);
        let x = self.math_at(v, args, mask);
        self.b.at(outer);
        x
    }

    /// [`math`](Self::math), at the node's source position.
    fn math_at(&mut self, v: ValueId, args: &[Value], mask: Option<Value>) -> R<Value> {
        let n = self.g.node(v);
        let dtype = dtype_of(self.g, v);
        Ok(match &n.op {
            Op::Unary(u) => {
                let a = self.b.cast(args[0], dtype);
                self.b.unary(*u, a)
            }
            Op::Binary(op) => {
                // Operands take the dtype of the first tensor operand (the
                // graph has already inserted promotion casts).
                let operand = n
                    .args
                    .iter()
                    .find(|a| matches!(self.g.ty(**a), Type::Tensor(_)))
                    .map(|a| dtype_of(self.g, *a))
                    .unwrap_or(if op.is_comparison() {
                        dtype_of(self.g, n.args[0])
                    } else {
                        dtype
                    });
                let operand = if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    Dtype::Bool
                } else {
                    operand
                };
                let args = self.fp64_literals(&n.args, args, operand);
                let mut divisor = args[1];
                let int_division = matches!(op, BinaryOp::Div | BinaryOp::Rem)
                    && !operand.is_float()
                    && operand != Dtype::Bool;
                // A constant or scalar divisor is the same on every lane;
                // a tile is masked where the mask covers the result's
                // shape (so that the select widens nothing).
                let shape = |cx: &Self, v: Value| cx.b.ty(v).shape.clone();
                let result =
                    crate::build::broadcast_shapes(&shape(self, args[0]), &shape(self, args[1]));
                let tile = !shape(self, args[1]).is_empty();
                if let (true, true, Some(m)) = (int_division, tile, mask) {
                    if shape(self, m) == result {
                        let one = self.b.constant(1.0, TileTy::scalar(operand));
                        divisor = self.b.select(m, args[1], one, operand);
                    }
                }
                let x = self.b.binary_as(*op, args[0], divisor, operand);
                self.b.cast(x, dtype)
            }
            Op::Select => {
                let c = self.b.cast(args[0], Dtype::Bool);
                let args = self.fp64_literals(&n.args, args, dtype);
                self.b.select(c, args[1], args[2], dtype)
            }
            Op::Cast(d) => self.b.cast(args[0], *d),
            _ => return Err(unsupported(self.g, v, "this op inside a fused kernel")),
        })
    }

    /// `args` (the tiles of graph operands `operands`) with each literal
    /// remade as an fp64 constant when the operation computes in fp64 (it
    /// was made in fp32 and widened: `x + 0.1` added 0.100000001490116).
    fn fp64_literals(&mut self, operands: &[ValueId], args: &[Value], dtype: Dtype) -> Vec<Value> {
        let mut args = args.to_vec();
        if dtype == Dtype::Fp64 {
            for (slot, a) in args.iter_mut().zip(operands) {
                if let Op::Const(c) = self.g.node(*a).op {
                    *slot = self.b.constant(c, TileTy::scalar(Dtype::Fp64));
                }
            }
        }
        args
    }

    /// The tile of member or operand `a` in an iteration space: a member's
    /// tile, a recomputed scalar, or a load.
    pub fn operand(
        &mut self,
        a: ValueId,
        it_dims: &[Dim],
        it_idx: &[Value],
        mask: Option<Value>,
    ) -> R<Value> {
        if let Some(x) = self.vals.get(&a) {
            return Ok(*x);
        }
        if let Some(x) = self.scalar(a)? {
            return Ok(x);
        }
        let idx = self.align(a, it_dims, it_idx);
        self.load(a, idx, mask)
    }

    /// Emits the members of the kernel after the anchor (an epilogue) in an
    /// iteration space, and stores those that are outputs.
    pub fn epilogue(&mut self, it_dims: &[Dim], it_idx: &[Value], mask: Option<Value>) -> R<()> {
        for &v in self.k.nodes.iter().skip(1) {
            let mut args = Vec::new();
            for &a in &self.g.node(v).args {
                args.push(self.operand(a, it_dims, it_idx, mask)?);
            }
            let x = self.math(v, &args, mask)?;
            self.vals.insert(v, x);
        }
        for &o in &self.k.outputs {
            let x = self.vals[&o];
            let idx = self.align(o, it_dims, it_idx);
            self.store(o, idx, x, mask);
        }
        Ok(())
    }

    /// Stores tile `x` as value `v` at `idx`.
    pub fn store(&mut self, v: ValueId, idx: Vec<Value>, x: Value, mask: Option<Value>) {
        let p = self.params[&v];
        let d = self.b.ty(x).dtype;
        let target = dtype_of(self.g, v);
        let x = if d == target {
            x
        } else {
            self.b.cast(x, target)
        };
        self.b.store(p, idx, x, mask, None);
    }

    /// Index scalars of the batch position `pid` in `dims`.
    pub fn batch_indices(&mut self, pid: Value, dims: &[Dim]) -> Vec<Value> {
        self.unflatten(pid, dims)
    }

    /// Records the anchor's result: `acc` rounded to the anchor's dtype.
    pub fn anchor_result(&mut self, acc: Value) {
        let anchor = self.k.anchor;
        let x = self.b.cast(acc, dtype_of(self.g, anchor));
        self.vals.insert(anchor, x);
    }

    /// Stages `value` through a new shared buffer `name` of `shape`.
    pub fn stage(&mut self, name: &str, shape: Vec<i64>, stages: u32, value: Value) -> Value {
        let dtype = self.b.ty(value).dtype;
        let shared = self.shared_of(name, shape, stages, dtype);
        self.stage_in(shared, value)
    }

    /// A new shared buffer `name` of `shape` for tiles of graph value `of`
    /// (its dtype), to stage into with [`Ctx::stage_in`], once or in
    /// several loops one after another.
    pub fn shared_buffer(
        &mut self,
        name: &str,
        shape: Vec<i64>,
        stages: u32,
        of: ValueId,
    ) -> usize {
        self.shared_of(name, shape, stages, dtype_of(self.g, of))
    }

    fn shared_of(&mut self, name: &str, shape: Vec<i64>, stages: u32, dtype: Dtype) -> usize {
        let padding = self.k.config.padding as u32;
        self.b.shared(Shared {
            name: name.to_owned(),
            shape,
            dtype,
            stages,
            padding,
        })
    }

    /// Stages `value` through shared buffer `shared`.
    pub fn stage_in(&mut self, shared: usize, value: Value) -> Value {
        let ty = self.b.ty(value).clone();
        self.b.op(TOp::Stage { shared, value }, ty)
    }

    /// Batch index scalars of an operand with `dims` (its last two are the
    /// matrix), from the output's batch indices; broadcast dims read 0.
    pub fn batch_for(&mut self, dims: &[Dim], out_batch: &[Dim], batch: &[Value]) -> Vec<Value> {
        let nb = dims.len() - 2;
        let off = out_batch.len() - nb;
        (0..nb)
            .map(|j| {
                if dims[j].as_known() == Some(1) && out_batch[j + off].as_known() != Some(1) {
                    self.b.int(0)
                } else {
                    batch[j + off]
                }
            })
            .collect()
    }

    /// What the tile rows `rows` (an `[R, 1]` index tile) of a row program
    /// walk: the lines along `axis` of a value of dims `full`, or with a
    /// `segment`, their segments of that many elements. Whether each row
    /// exists, the index tiles of its line's other dimensions, and its
    /// segment's first element along the axis (`None` for whole lines).
    pub fn line_rows(
        &mut self,
        rows: Value,
        (full, axis): (&[Dim], usize),
        segment: u64,
    ) -> (Value, Vec<Value>, Option<Value>) {
        let mut outer = full.to_vec();
        outer.remove(axis);
        let lines = count(self, &outer);
        if segment == 0 {
            let rmask = self.b.binary(BinaryOp::Lt, rows, lines);
            return (rmask, self.unflatten(rows, &outer), None);
        }
        let per = full[axis]
            .to_size()
            .unwrap_or(Size::Const(1))
            .cdiv(Size::Const(segment as i64));
        let per = self.b.size(&per);
        let total = self.b.binary(BinaryOp::Mul, lines, per);
        let rmask = self.b.binary(BinaryOp::Lt, rows, total);
        let line = self.b.binary(BinaryOp::Div, rows, per);
        let seg = self.b.binary(BinaryOp::Rem, rows, per);
        let width = self.b.int(segment as i64);
        let first = self.b.binary(BinaryOp::Mul, seg, width);
        (rmask, self.unflatten(line, &outer), Some(first))
    }

    /// `pid * block + [0..block)`, shaped `shape`.
    pub fn block_range(&mut self, pid: Value, block: &Size, shape: Vec<Size>) -> Value {
        let blk = self.b.size(block);
        let start = self.b.binary(BinaryOp::Mul, pid, blk);
        let r = self.b.arange(block);
        let r = self.b.binary(BinaryOp::Add, r, start);
        self.b.reshape(r, shape)
    }
}

/// The product of `dims` as an index scalar.
pub(crate) fn count(cx: &mut Ctx<'_>, dims: &[Dim]) -> Value {
    let s = product(dims);
    cx.b.size(&s)
}
