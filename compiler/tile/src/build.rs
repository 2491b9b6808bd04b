//! A builder for kernels: allocates values, appends instructions to the
//! innermost open block, infers result types of the common operations, and
//! opens structured loops.

use crate::ir::*;
use tessera_graph::{BinaryOp, UnaryOp};
use tessera_schedule::Size;
use tessera_sema::Policy;
use tessera_syntax::ast::Dtype;

/// The integer type of index math.
pub const INDEX: Dtype = Dtype::Int64;

/// Builds one kernel.
pub struct KernelBuilder {
    kernel: Kernel,
    blocks: Vec<Block>,
    loops: Vec<(Value, Value, Value, Vec<Value>)>,
    /// Open conditionals: the condition, the values before it (whose types
    /// the results take) and, once closed, the then arm.
    ifs: Vec<(Value, Vec<Value>, Option<Block>)>,
    touched: Vec<bool>,
    /// The source position new instructions take (see [`Inst::span`]).
    span: tessera_diagnostics::Span,
}

/// Numpy broadcasting of two tile shapes. Symbolic extents that differ are
/// assumed equal (the graph's types guarantee it); a constant 1 gives way.
pub fn broadcast_shapes(a: &[Size], b: &[Size]) -> Vec<Size> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = (i + a.len()).checked_sub(n).map(|j| &a[j]);
            let y = (i + b.len()).checked_sub(n).map(|j| &b[j]);
            match (x, y) {
                (Some(x), Some(y)) => {
                    if *x == Size::Const(1) {
                        y.clone()
                    } else {
                        x.clone()
                    }
                }
                (Some(x), None) => x.clone(),
                (None, Some(y)) => y.clone(),
                (None, None) => Size::Const(1),
            }
        })
        .collect()
}

/// The wider of two dtypes for mixed arithmetic (floats over ints).
fn join_dtype(a: Dtype, b: Dtype) -> Dtype {
    if a == b {
        a
    } else if a.is_float() && !b.is_float() {
        a
    } else if b.is_float() && !a.is_float() {
        b
    } else if a.size_bytes() >= b.size_bytes() {
        a
    } else {
        b
    }
}

impl KernelBuilder {
    /// A kernel named `name` on `grid` with `threads` threads per program.
    pub fn new(name: &str, grid: [Size; 3], threads: u32) -> KernelBuilder {
        KernelBuilder {
            kernel: Kernel {
                name: name.to_owned(),
                params: Vec::new(),
                grid,
                threads,
                vectorize: 1,
                blocks_per_sm: None,
                warp_specialize: true,
                tensor_cores: true,
                fast_exp: false,
                shared: Vec::new(),
                values: Vec::new(),
                body: Block::default(),
                span: Default::default(),
            },
            blocks: vec![Block::default()],
            loops: Vec::new(),
            ifs: Vec::new(),
            touched: Vec::new(),
            span: Default::default(),
        }
    }

    /// Makes `span` the source position of the instructions appended from
    /// now on; returns the previous one (to restore it).
    pub fn at(&mut self, span: tessera_diagnostics::Span) -> tessera_diagnostics::Span {
        std::mem::replace(&mut self.span, span)
    }

    /// Adds a parameter; returns its index.
    pub fn param(&mut self, name: &str, dtype: Dtype, dims: Vec<Size>, access: Access) -> usize {
        self.kernel.params.push(KParam {
            name: name.to_owned(),
            dtype,
            dims,
            access,
            init: Start::Held,
        });
        self.touched.push(false);
        self.kernel.params.len() - 1
    }

    /// Makes parameter `i` keep the contents the caller passes
    /// ([`Start::Kept`]: an `inout` tensor).
    pub fn kept(&mut self, i: usize) {
        self.kernel.params[i].init = Start::Kept;
    }

    /// Makes `value` the start value of parameter `i` ([`KParam::init`]).
    pub fn start_value(&mut self, i: usize, value: f64) {
        self.kernel.params[i].init = Start::Value(value);
    }

    /// The dtype of parameter `i`.
    pub fn param_dtype(&self, i: usize) -> Dtype {
        self.kernel.params[i].dtype
    }

    /// The rank of parameter `i` (0 for a scalar).
    pub fn param_rank(&self, i: usize) -> usize {
        self.kernel.params[i].dims.len()
    }

    /// Marks parameter `i` as also written (or read).
    pub fn access(&mut self, i: usize, access: Access) {
        let p = &mut self.kernel.params[i];
        if !std::mem::replace(&mut self.touched[i], true) {
            p.access = access;
        } else if p.access != access {
            p.access = Access::InOut;
        }
    }

    /// Declares a shared buffer; returns its index.
    pub fn shared(&mut self, s: Shared) -> usize {
        self.kernel.shared.push(s);
        self.kernel.shared.len() - 1
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> &TileTy {
        self.kernel.ty(v)
    }

    /// A fresh value of type `ty`.
    pub fn fresh(&mut self, ty: TileTy) -> Value {
        self.kernel.values.push(ty);
        Value(self.kernel.values.len() as u32 - 1)
    }

    fn push(&mut self, results: Vec<Value>, op: TOp) {
        let block = self.blocks.last_mut().expect("a block is always open");
        block.insts.push(Inst {
            results,
            op,
            span: self.span,
        });
    }

    /// Appends `op` with one result of type `ty`.
    pub fn op(&mut self, op: TOp, ty: TileTy) -> Value {
        let v = self.fresh(ty);
        self.push(vec![v], op);
        v
    }

    /// Appends `op` with no result.
    pub fn effect(&mut self, op: TOp) {
        self.push(Vec::new(), op);
    }

    /// An index constant.
    pub fn int(&mut self, c: i64) -> Value {
        self.op(TOp::Const(c as f64), TileTy::scalar(INDEX))
    }

    /// A constant of `ty`.
    pub fn constant(&mut self, c: f64, ty: TileTy) -> Value {
        self.op(TOp::Const(c), ty)
    }

    /// A size, as an index scalar.
    pub fn size(&mut self, s: &Size) -> Value {
        match s.as_const() {
            Some(c) => self.int(c),
            None => self.op(TOp::Size(s.clone()), TileTy::scalar(INDEX)),
        }
    }

    /// This program's index along `axis`.
    pub fn program_id(&mut self, axis: u8) -> Value {
        let v = self.op(TOp::ProgramId(axis), TileTy::scalar(Dtype::Int32));
        self.cast(v, INDEX)
    }

    /// `[0, 1, ..., len - 1]` as an index tile.
    pub fn arange(&mut self, len: &Size) -> Value {
        self.op(
            TOp::Arange(0),
            TileTy {
                shape: vec![len.clone()],
                dtype: INDEX,
            },
        )
    }

    /// `v` converted to `dtype` (no instruction if it already is).
    pub fn cast(&mut self, v: Value, dtype: Dtype) -> Value {
        let ty = self.ty(v);
        if ty.dtype == dtype {
            return v;
        }
        let shape = ty.shape.clone();
        self.op(TOp::Cast(v), TileTy { shape, dtype })
    }

    /// `v` with shape `shape` (same elements).
    pub fn reshape(&mut self, v: Value, shape: Vec<Size>) -> Value {
        if self.ty(v).shape == shape {
            return v;
        }
        let dtype = self.ty(v).dtype;
        self.op(TOp::Reshape(v), TileTy { shape, dtype })
    }

    /// `v` broadcast to `shape`.
    pub fn broadcast(&mut self, v: Value, shape: Vec<Size>) -> Value {
        if self.ty(v).shape == shape {
            return v;
        }
        let dtype = self.ty(v).dtype;
        self.op(TOp::Broadcast(v), TileTy { shape, dtype })
    }

    /// Elementwise `op(a, b)`, operands converted to a common dtype; the
    /// result of a comparison is `bool`.
    pub fn binary(&mut self, op: BinaryOp, a: Value, b: Value) -> Value {
        let (ta, tb) = (self.ty(a).clone(), self.ty(b).clone());
        let dtype = join_dtype(ta.dtype, tb.dtype);
        self.binary_as(op, a, b, dtype)
    }

    /// Elementwise `op(a, b)` with operands converted to `dtype`. The
    /// maximum (minimum) of booleans is their or (and).
    pub fn binary_as(&mut self, op: BinaryOp, a: Value, b: Value, dtype: Dtype) -> Value {
        let op = match (op, dtype) {
            (BinaryOp::Max, Dtype::Bool) => BinaryOp::Or,
            (BinaryOp::Min, Dtype::Bool) => BinaryOp::And,
            (op, _) => op,
        };
        let (a, b) = (self.cast(a, dtype), self.cast(b, dtype));
        let shape = broadcast_shapes(&self.ty(a).shape, &self.ty(b).shape);
        let out = if op.is_comparison() {
            Dtype::Bool
        } else {
            dtype
        };
        self.op(TOp::Binary(op, a, b), TileTy { shape, dtype: out })
    }

    /// Elementwise `op(a)`.
    pub fn unary(&mut self, op: UnaryOp, a: Value) -> Value {
        let ty = self.ty(a).clone();
        self.op(TOp::Unary(op, a), ty)
    }

    /// `cond ? a : b` of dtype `dtype`.
    pub fn select(&mut self, cond: Value, a: Value, b: Value, dtype: Dtype) -> Value {
        let (a, b) = (self.cast(a, dtype), self.cast(b, dtype));
        let s = broadcast_shapes(&self.ty(a).shape, &self.ty(b).shape);
        let shape = broadcast_shapes(&self.ty(cond).shape, &s);
        self.op(TOp::Select(cond, a, b), TileTy { shape, dtype })
    }

    /// `a && b` of two optional masks.
    pub fn and(&mut self, a: Option<Value>, b: Option<Value>) -> Option<Value> {
        match (a, b) {
            (Some(a), Some(b)) => Some(self.binary(BinaryOp::And, a, b)),
            (a, None) => a,
            (None, b) => b,
        }
    }

    /// Reduces `axis` of `v` away.
    /// The maximum (minimum) of booleans is taken over their int32 values
    /// (any, all), as the GPU has no maximum of predicates.
    pub fn reduce(&mut self, combine: Combine, v: Value, axis: usize, policy: Policy) -> Value {
        if self.ty(v).dtype == Dtype::Bool && matches!(combine, Combine::Max | Combine::Min) {
            let ints = self.cast(v, Dtype::Int32);
            let r = self.reduce(combine, ints, axis, policy);
            return self.cast(r, Dtype::Bool);
        }
        let mut ty = self.ty(v).clone();
        ty.shape.remove(axis);
        self.op(
            TOp::Reduce {
                combine,
                value: v,
                axis,
                policy,
            },
            ty,
        )
    }

    /// One compensated-summation step: `(sum', comp')`.
    pub fn kahan_add(&mut self, sum: Value, comp: Value, x: Value) -> (Value, Value) {
        let ty = self.ty(sum).clone();
        let (s, c) = (self.fresh(ty.clone()), self.fresh(ty));
        self.push(vec![s, c], TOp::KahanAdd { sum, comp, x });
        (s, c)
    }

    /// Every line of `v` sorted along its last axis (see [`TOp::Sort`]):
    /// the values and their int32 positions.
    pub fn sort(&mut self, v: Value, descending: bool) -> (Value, Value) {
        let ty = self.ty(v).clone();
        let idx = TileTy {
            shape: ty.shape.clone(),
            dtype: Dtype::Int32,
        };
        let (s, i) = (self.fresh(ty), self.fresh(idx));
        self.push(
            vec![s, i],
            TOp::Sort {
                value: v,
                descending,
            },
        );
        (s, i)
    }

    /// `acc + a @ b`.
    pub fn dot(&mut self, a: Value, b: Value, acc: Value, tf32: bool) -> Value {
        let ty = self.ty(acc).clone();
        let bf16_acc = false;
        self.op(
            TOp::Dot {
                a,
                b,
                acc,
                tf32,
                bf16_acc,
            },
            ty,
        )
    }

    /// The sums of the elements of `m` that the 0/1 matrix `tri` selects:
    /// `m @ tri`, or `tri @ m` with `tri_left`, in m's dtype (a prefix sum
    /// when `tri` is triangular). For floats, with IEEE sums of
    /// non-finite elements: a plain product multiplies every unselected inf
    /// or NaN by 0, giving NaN everywhere. So the finite values are summed
    /// by one product and the selected NaN and infinities counted by two
    /// more (exact: small integers), which then decide NaN, +inf or -inf.
    pub fn selected_sums(&mut self, m: Value, tri: Value, tri_left: bool) -> Value {
        let dtype = self.ty(m).dtype;
        let (ms, ts) = (self.ty(m).shape.clone(), self.ty(tri).shape.clone());
        let shape = if tri_left {
            vec![ts[0].clone(), ms[1].clone()]
        } else {
            vec![ms[0].clone(), ts[1].clone()]
        };
        let product = |b: &mut Self, x: Value| {
            let zero = b.constant(
                0.0,
                TileTy {
                    shape: shape.clone(),
                    dtype,
                },
            );
            if tri_left {
                b.dot(tri, x, zero, false)
            } else {
                b.dot(x, tri, zero, false)
            }
        };
        if !dtype.is_float() {
            return product(self, m);
        }
        let scalar = |b: &mut Self, x: f64| b.constant(x, TileTy::scalar(dtype));
        let inf = scalar(self, f64::INFINITY);
        let zero = scalar(self, 0.0);
        let magnitude = self.unary(UnaryOp::Abs, m);
        let finite = self.binary(BinaryOp::Lt, magnitude, inf);
        let kept = self.select(finite, m, zero, dtype);
        let sums = product(self, kept);
        let special = self.unary(UnaryOp::Not, finite);
        let positive = self.binary(BinaryOp::Gt, m, zero);
        let negative = self.binary(BinaryOp::Lt, m, zero);
        let nan = self.binary(BinaryOp::Ne, m, m);
        let plus = self.binary(BinaryOp::And, special, positive);
        let minus = self.binary(BinaryOp::And, special, negative);
        let up = self.binary(BinaryOp::Or, plus, nan);
        let down = self.binary(BinaryOp::Or, minus, nan);
        let up = self.cast(up, dtype);
        let down = self.cast(down, dtype);
        let ups = product(self, up);
        let downs = product(self, down);
        let any_up = self.binary(BinaryOp::Gt, ups, zero);
        let any_down = self.binary(BinaryOp::Gt, downs, zero);
        let both = self.binary(BinaryOp::And, any_up, any_down);
        let minus_inf = scalar(self, f64::NEG_INFINITY);
        let not_a_number = scalar(self, f64::NAN);
        let out = self.select(any_down, minus_inf, sums, dtype);
        let out = self.select(any_up, inf, out, dtype);
        self.select(both, not_a_number, out, dtype)
    }

    /// One k-tile of a bf16 accumulator `acc`: widened to fp32, `a @ b`
    /// added in fp32 (on tensor cores on a GPU), rounded back to bf16.
    pub fn dot_bf16_acc(&mut self, a: Value, b: Value, acc: Value, tf32: bool) -> Value {
        let wide = self.cast(acc, Dtype::Fp32);
        let ty = self.ty(wide).clone();
        let bf16_acc = true;
        let sum = self.op(
            TOp::Dot {
                a,
                b,
                acc: wide,
                tf32,
                bf16_acc,
            },
            ty,
        );
        self.cast(sum, Dtype::Bf16)
    }

    /// Loads parameter `param` at `index`.
    pub fn load(
        &mut self,
        param: usize,
        index: Vec<Value>,
        mask: Option<Value>,
        other: f64,
    ) -> Value {
        let mut shape = Vec::new();
        for v in index.iter().chain(mask.iter()) {
            shape = broadcast_shapes(&shape, &self.ty(*v).shape);
        }
        let dtype = self.kernel.params[param].dtype;
        self.access(param, Access::In);
        self.op(
            TOp::Load {
                param,
                index,
                mask,
                other,
            },
            TileTy { shape, dtype },
        )
    }

    /// Stores `value` into parameter `param` at `index`, or combines it
    /// with what is there atomically (`atomic`).
    pub fn store(
        &mut self,
        param: usize,
        index: Vec<Value>,
        value: Value,
        mask: Option<Value>,
        atomic: Option<Combine>,
    ) {
        self.access(param, Access::Out);
        self.effect(TOp::Store {
            param,
            index,
            value,
            mask,
            atomic,
        });
    }

    /// Opens a loop `for iv in lo..hi step step` carrying `init`; returns the
    /// induction variable and the carried values inside the body. Close it
    /// with [`end_loop`](Self::end_loop).
    pub fn begin_loop(
        &mut self,
        lo: Value,
        hi: Value,
        step: Value,
        init: Vec<Value>,
    ) -> (Value, Vec<Value>) {
        let iv = self.fresh(TileTy::scalar(INDEX));
        let carried = self.fresh_like(&init);
        let mut args = vec![iv];
        args.extend(&carried);
        self.blocks.push(Block {
            args,
            insts: Vec::new(),
        });
        self.loops.push((lo, hi, step, init));
        (iv, carried)
    }

    /// Closes the innermost loop with the next carried values; returns the
    /// values after the loop.
    pub fn end_loop(&mut self, next: Vec<Value>) -> Vec<Value> {
        let (lo, hi, step, init) = self.loops.pop().expect("a loop is open");
        let carried: Vec<Value> = self
            .blocks
            .last()
            .map(|b| b.args[1..].to_vec())
            .unwrap_or_default();
        // Keep the carried types: the body may produce another dtype.
        let next = self.conform(&next, &carried);
        self.effect(TOp::Yield(next));
        let block = self.blocks.pop().expect("the loop body is open");
        let results = self.fresh_like(&carried);
        self.push(
            results.clone(),
            TOp::For {
                lo,
                hi,
                step,
                init,
                body: block,
            },
        );
        results
    }

    /// A fresh value of each of the types of `like`.
    fn fresh_like(&mut self, like: &[Value]) -> Vec<Value> {
        like.iter()
            .map(|c| {
                let ty = self.ty(*c).clone();
                self.fresh(ty)
            })
            .collect()
    }

    /// `values` cast and broadcast to the types of `like`, one for one.
    fn conform(&mut self, values: &[Value], like: &[Value]) -> Vec<Value> {
        values
            .iter()
            .zip(like)
            .map(|(n, c)| {
                let d = self.ty(*c).dtype;
                let shape = self.ty(*c).shape.clone();
                let n = self.cast(*n, d);
                self.broadcast(n, shape)
            })
            .collect()
    }

    /// Opens `if cond` (a boolean scalar) whose arms yield new values of
    /// `before` (the results take their types): the then arm comes first,
    /// closed by [`begin_else`](Self::begin_else), then the else arm,
    /// closed by [`end_if`](Self::end_if).
    pub fn begin_if(&mut self, cond: Value, before: Vec<Value>) {
        self.ifs.push((cond, before, None));
        self.blocks.push(Block::default());
    }

    /// Closes the then arm with its values of the `before` of
    /// [`begin_if`](Self::begin_if); opens the else arm.
    pub fn begin_else(&mut self, yields: Vec<Value>) {
        let before = self.ifs.last().map(|f| f.1.clone()).unwrap_or_default();
        let yields = self.conform(&yields, &before);
        self.effect(TOp::Yield(yields));
        let then = self.blocks.pop().expect("the then arm is open");
        if let Some(f) = self.ifs.last_mut() {
            f.2 = Some(then);
        }
        self.blocks.push(Block::default());
    }

    /// Closes the else arm with its values; returns the values after the
    /// conditional.
    pub fn end_if(&mut self, yields: Vec<Value>) -> Vec<Value> {
        let (cond, before, then) = self.ifs.pop().expect("an `if` is open");
        let yields = self.conform(&yields, &before);
        self.effect(TOp::Yield(yields));
        let els = self.blocks.pop().expect("the else arm is open");
        let results = self.fresh_like(&before);
        self.push(
            results.clone(),
            TOp::If {
                cond,
                then: then.expect("the then arm is closed"),
                els,
            },
        );
        results
    }

    /// Finishes the kernel.
    pub fn finish(mut self) -> Kernel {
        self.kernel.body = self.blocks.pop().unwrap_or_default();
        self.kernel
    }
}
