//! Direct execution of an optimised Graph IR, built on concrete shapes, on host
//! tensors, node by node.
//!
//! Two modes: [`Mode::Device`] computes as the hardware does (elementwise
//! math in fp32 for fp32-and-narrower dtypes, every stored value rounded to
//! its dtype, matmuls and reductions accumulated in the accumulation dtype
//! in the order the numerics policy prescribes); [`Mode::Reference`]
//! computes everything in f64 without intermediate rounding, and is the
//! oracle the numerical tests compare against.

use crate::reduce::{sum, Accumulate};
use tessera_comm::{Buffer, Communicator, Loopback};
use tessera_graph::{BinaryOp, ConvGeom, Graph, Node, Op, ReduceKind, ScanKind, SliceAxis, Type};
use tessera_sema::{Dim, Policy};
use tessera_tensor::{Dtype, Tensor};

/// How to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// As the hardware would: rounding and accumulation per the numerics.
    Device,
    /// In f64 throughout (outputs are fp64 tensors).
    Reference,
}

/// A failure to execute a graph: an input of the wrong shape, a construct
/// this backend does not run, a kernel's integer division by zero. The
/// message names what is wrong; the span, where the failing Tile IR
/// instruction has one, is the source expression it computes.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    /// What went wrong, and where in the program's steps.
    pub message: String,
    /// The source expression whose code failed, when known.
    pub span: Option<tessera_diagnostics::Span>,
}

impl EvalError {
    /// An error with no source position.
    pub fn new(message: impl Into<String>) -> EvalError {
        EvalError {
            message: message.into(),
            span: None,
        }
    }

    /// The error with `prefix: ` before its message, at the same place.
    pub fn within(self, prefix: impl std::fmt::Display) -> EvalError {
        EvalError {
            message: format!("{prefix}: {}", self.message),
            span: self.span,
        }
    }

    /// The error pointed at `span` unless it already points somewhere (an
    /// empty span is no position).
    pub fn at(mut self, span: tessera_diagnostics::Span) -> EvalError {
        if self.span.is_none() && span != Default::default() {
            self.span = Some(span);
        }
        self
    }
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalError {}

type R<T> = Result<T, EvalError>;

fn err<T>(msg: impl Into<String>) -> R<T> {
    Err(EvalError::new(msg))
}

/// A computed value: row-major f64 data (already rounded in device mode).
#[derive(Clone, Debug)]
struct Buf {
    shape: Vec<usize>,
    data: Vec<f64>,
}

fn known(dims: &[Dim]) -> R<Vec<usize>> {
    dims.iter()
        .map(|d| match d.as_known() {
            Some(n) => usize::try_from(n).or_else(|_| err(format!("dimension {n} is too large"))),
            None => err(format!("dimension `{d}` is not bound to a size")),
        })
        .collect()
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Strides of `shape` broadcast to `out` (aligned at the right; size-1 and
/// missing dimensions get stride 0).
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = strides(shape);
    let mut s = vec![0; out.len()];
    for (j, &n) in shape.iter().enumerate() {
        let i = out.len() - shape.len() + j;
        s[i] = if n == 1 { 0 } else { own[j] };
    }
    s
}

/// Calls `f(out_index, [operand indices])` for every element of `out`.
fn for_each_broadcast(out: &[usize], operands: &[Vec<usize>], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = out.iter().product();
    let bs: Vec<Vec<usize>> = operands.iter().map(|s| broadcast_strides(s, out)).collect();
    let mut idx = vec![0usize; out.len()];
    let mut offs = vec![0usize; operands.len()];
    for i in 0..n {
        f(i, &offs);
        // Increment the multi-index, updating operand offsets.
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            for (o, s) in offs.iter_mut().zip(&bs) {
                *o += s[d];
            }
            if idx[d] < out[d] {
                break;
            }
            for (o, s) in offs.iter_mut().zip(&bs) {
                *o -= s[d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

struct Eval<'g> {
    g: &'g Graph,
    mode: Mode,
    vals: Vec<Option<Buf>>,
}

/// Runs `g` on `inputs` (one tensor per graph parameter, in order, already
/// in the parameters' dtypes and shapes). Returns one tensor per output.
pub fn eval(g: &Graph, inputs: &[Tensor], mode: Mode) -> R<Vec<Tensor>> {
    if inputs.len() != g.params.len() {
        return err(format!(
            "`{}` takes {} inputs, {} were given",
            g.name,
            g.params.len(),
            inputs.len()
        ));
    }
    let mut e = Eval {
        g,
        mode,
        vals: vec![None; g.nodes.len()],
    };
    let uses = g.use_counts();
    let mut remaining = uses.clone();
    for (i, n) in g.nodes.iter().enumerate() {
        let v = e.node(n, inputs)?;
        e.vals[i] = Some(v);
        // Free operands whose last use this was.
        for a in &n.args {
            remaining[a.index()] -= 1;
            if remaining[a.index()] == 0 {
                e.vals[a.index()] = None;
            }
        }
    }
    g.outputs
        .iter()
        .map(|o| {
            let buf = e.vals[o.index()]
                .clone()
                .ok_or_else(|| EvalError::new("output freed before the end"))?;
            let dtype = match (mode, g.ty(*o)) {
                (Mode::Reference, _) | (_, Type::Scalar(_)) => Dtype::Fp64,
                (Mode::Device, Type::Tensor(t)) => t.dtype,
            };
            Tensor::from_f64(dtype, &buf.shape, &buf.data)
                .map_err(|e| EvalError::new(e.to_string()))
        })
        .collect()
}

impl Eval<'_> {
    fn arg(&self, n: &Node, i: usize) -> &Buf {
        self.vals[n.args[i].index()]
            .as_ref()
            .expect("operands are live until their last use")
    }

    /// The rounding a stored value of this node's type gets.
    fn store(&self, ty: &Type) -> impl Fn(f64) -> f64 {
        let dtype = match (self.mode, ty) {
            (Mode::Device, Type::Tensor(t)) => Some(t.dtype),
            _ => None,
        };
        move |x| dtype.map_or(x, |d| d.round(x))
    }

    /// The rounding of arithmetic: f32 for fp32-and-narrower floats.
    fn compute(&self, ty: &Type) -> impl Fn(f64) -> f64 {
        let narrow = match (self.mode, ty) {
            (Mode::Device, Type::Tensor(t)) => t.dtype.is_float() && t.dtype != Dtype::Fp64,
            _ => false,
        };
        move |x| if narrow { x as f32 as f64 } else { x }
    }

    fn accumulate(&self, acc: Dtype, policy: Policy) -> Accumulate {
        match self.mode {
            Mode::Reference => Accumulate::Reference,
            Mode::Device if acc == Dtype::Fp64 => Accumulate::F64(policy),
            Mode::Device => Accumulate::F32(policy),
        }
    }

    fn node(&self, n: &Node, inputs: &[Tensor]) -> R<Buf> {
        let out_shape = match &n.ty {
            Type::Tensor(t) => known(&t.dims)?,
            Type::Scalar(_) => Vec::new(),
        };
        let store = self.store(&n.ty);
        let compute = self.compute(&n.ty);
        let buf = match &n.op {
            Op::Param(i) => {
                let t = &inputs[*i];
                if t.shape != out_shape {
                    return err(format!(
                        "input `{}` has shape {:?}, expected {:?}",
                        self.g.params[*i].name, t.shape, out_shape
                    ));
                }
                Buf {
                    shape: out_shape,
                    data: t.to_f64_vec(),
                }
            }
            Op::Const(x) => Buf {
                shape: Vec::new(),
                data: vec![*x],
            },
            Op::DimSize(d) => match d.as_known() {
                Some(k) => Buf {
                    shape: Vec::new(),
                    data: vec![k as f64],
                },
                None => return err(format!("dimension `{d}` is not bound to a size")),
            },
            Op::Unary(u) => {
                let a = self.arg(n, 0);
                let f = |x: f64| store(compute(u.eval(x)));
                Buf {
                    shape: out_shape,
                    data: a.data.iter().map(|x| f(*x)).collect(),
                }
            }
            Op::Binary(b) => {
                let (x, y) = (self.arg(n, 0), self.arg(n, 1));
                let int_div = matches!(&n.ty, Type::Scalar(tessera_graph::ScalarKind::Int))
                    && matches!(b, BinaryOp::Div | BinaryOp::Rem);
                let mut data = vec![0.0; out_shape.iter().product()];
                for_each_broadcast(&out_shape, &[x.shape.clone(), y.shape.clone()], |i, o| {
                    let v = b.eval(x.data[o[0]], y.data[o[1]]);
                    data[i] = if int_div {
                        v.trunc()
                    } else {
                        store(compute(v))
                    };
                });
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Select => {
                let (c, x, y) = (self.arg(n, 0), self.arg(n, 1), self.arg(n, 2));
                let mut data = vec![0.0; out_shape.iter().product()];
                let shapes = [c.shape.clone(), x.shape.clone(), y.shape.clone()];
                for_each_broadcast(&out_shape, &shapes, |i, o| {
                    data[i] = store(if c.data[o[0]] != 0.0 {
                        x.data[o[1]]
                    } else {
                        y.data[o[2]]
                    });
                });
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Cast(d) => {
                let a = self.arg(n, 0);
                let rd = *d;
                // The reference keeps float precision; integer and bool casts
                // change values in every mode.
                let keep = self.mode == Mode::Reference && d.is_float();
                Buf {
                    shape: out_shape,
                    data: a
                        .data
                        .iter()
                        .map(|x| if keep { *x } else { rd.round(*x) })
                        .collect(),
                }
            }
            Op::Reduce {
                kind,
                axis,
                policy,
                acc,
                ..
            } => self.reduce(
                self.arg(n, 0),
                *kind,
                *axis,
                self.accumulate(*acc, *policy),
                &store,
                out_shape,
            ),
            Op::MatMul { acc, tf32 } => {
                let (a, b) = (self.arg(n, 0), self.arg(n, 1));
                let acc = self.accumulate(*acc, Policy::Fast);
                if *tf32 && self.mode == Mode::Device {
                    // Tensor cores read fp32 operands as tf32.
                    let tf = |x: &Buf| Buf {
                        shape: x.shape.clone(),
                        data: x.data.iter().map(|v| Dtype::Tf32.round(*v)).collect(),
                    };
                    self.matmul(&tf(a), &tf(b), acc, &store, out_shape)
                } else {
                    self.matmul(a, b, acc, &store, out_shape)
                }
            }
            Op::Scan {
                kind,
                axis,
                segment,
            } => {
                let a = self.arg(n, 0);
                let inner: usize = out_shape[axis + 1..].iter().product();
                let len = out_shape[*axis];
                let seg = match *segment as usize {
                    0 => len.max(1),
                    s => s,
                };
                let mut data = a.data.clone();
                for o in 0..data.len() / (len * inner).max(1) {
                    for i in 0..inner {
                        let mut run = None;
                        for j in 0..len {
                            let at = (o * len + j) * inner + i;
                            // Each segment starts afresh.
                            if j % seg == 0 {
                                run = None;
                            }
                            let next = match run {
                                None => a.data[at],
                                Some(r) => scan_step(*kind, r, a.data[at]),
                            };
                            run = Some(next);
                            data[at] = store(next);
                        }
                    }
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Argsort {
                axis,
                descending,
                segment,
            }
            | Op::Merge {
                axis,
                descending,
                segment,
            } => {
                let a = self.arg(n, 0);
                let inner: usize = out_shape[axis + 1..].iter().product();
                let len = out_shape[*axis];
                // A merge orders whole lines: what its segments' order is.
                let seg = match (&n.op, *segment as usize) {
                    (Op::Argsort { .. }, s) if s > 0 => s,
                    _ => len.max(1),
                };
                let mut data = vec![0.0; a.data.len()];
                let mut line = Vec::with_capacity(len);
                for o in 0..data.len() / (len * inner).max(1) {
                    for i in 0..inner {
                        let at = |j: usize| (o * len + j) * inner + i;
                        for start in (0..len).step_by(seg) {
                            let end = (start + seg).min(len);
                            line.clear();
                            line.extend((start..end).map(|j| a.data[at(j)]));
                            let order = crate::order::permutation(&line, *descending);
                            for (p, from) in order.into_iter().enumerate() {
                                data[at(start + p)] = (start + from) as f64;
                            }
                        }
                    }
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Concat { axis } => {
                let parts: Vec<&Buf> = (0..n.args.len()).map(|i| self.arg(n, i)).collect();
                let outer: usize = out_shape[..*axis].iter().product();
                let mut data = Vec::with_capacity(out_shape.iter().product());
                for o in 0..outer {
                    for p in &parts {
                        let block: usize = p.shape[*axis..].iter().product();
                        data.extend_from_slice(&p.data[o * block..(o + 1) * block]);
                    }
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Scatter { axis, vector, add } => {
                let (ix, src) = (self.arg(n, 0), self.arg(n, 1));
                let extent = out_shape[*axis];
                let (os, ss, is) = (strides(&out_shape), strides(&src.shape), strides(&ix.shape));
                // The iteration space: src's with a vector index, else the
                // index's (no larger than src's).
                let space = if *vector { &src.shape } else { &ix.shape };
                let sp = strides(space);
                let mut data = vec![0.0; out_shape.iter().product()];
                for e in 0..space.iter().product::<usize>() {
                    let coord: Vec<usize> = (0..space.len()).map(|k| e / sp[k] % space[k]).collect();
                    let at = if *vector {
                        coord[*axis]
                    } else {
                        (0..coord.len()).map(|k| coord[k] * is[k]).sum()
                    };
                    let i = ix.data[at];
                    if !(i >= 0.0 && (i as usize) < extent) {
                        return err(format!(
                            "index {i} is out of range for axis {axis} of extent {extent}"
                        ));
                    }
                    let from: usize = (0..coord.len()).map(|k| coord[k] * ss[k]).sum();
                    let to: usize = (0..coord.len())
                        .map(|k| if k == *axis { i as usize } else { coord[k] } * os[k])
                        .sum();
                    if *add {
                        data[to] += src.data[from];
                    } else {
                        data[to] = src.data[from];
                    }
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Gather { axis } | Op::Take { axis } => {
                let (x, ix) = (self.arg(n, 0), self.arg(n, 1));
                let extent = x.shape[*axis];
                let xs = strides(&x.shape);
                let os = strides(&out_shape);
                let is = strides(&ix.shape);
                let take = matches!(n.op, Op::Take { .. });
                let mut data = vec![0.0; out_shape.iter().product()];
                for (e, d) in data.iter_mut().enumerate() {
                    let coord: Vec<usize> = (0..out_shape.len())
                        .map(|k| e / os[k] % out_shape[k])
                        .collect();
                    // The index element this output reads, and x's other coordinates.
                    let (at, rest): (usize, Vec<usize>) = if take {
                        let m = ix.shape.len();
                        let at = (0..m).map(|k| coord[axis + k] * is[k]).sum();
                        let mut rest = coord[..*axis].to_vec();
                        rest.push(0);
                        rest.extend_from_slice(&coord[axis + m..]);
                        (at, rest)
                    } else {
                        (
                            (0..coord.len()).map(|k| coord[k] * is[k]).sum(),
                            coord.clone(),
                        )
                    };
                    let i = ix.data[at];
                    if !(i >= 0.0 && (i as usize) < extent) {
                        return err(format!(
                            "index {i} is out of range for axis {axis} of extent {extent}"
                        ));
                    }
                    let mut src: usize = rest.iter().enumerate().map(|(k, c)| c * xs[k]).sum();
                    src += i as usize * xs[*axis] - rest[*axis] * xs[*axis];
                    *d = x.data[src];
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Permute(perm) => {
                let a = self.arg(n, 0);
                let src = strides(&a.shape);
                let out = strides(&out_shape);
                let mut data = vec![0.0; a.data.len()];
                for (i, d) in data.iter_mut().enumerate() {
                    let at: usize = perm
                        .iter()
                        .enumerate()
                        .map(|(k, &p)| i / out[k] % out_shape[k] * src[p])
                        .sum();
                    *d = a.data[at];
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Transpose => {
                let a = self.arg(n, 0);
                let r = a.shape.len();
                let (rows, cols) = (a.shape[r - 2], a.shape[r - 1]);
                let batch: usize = a.shape[..r - 2].iter().product();
                let mut data = vec![0.0; a.data.len()];
                for bi in 0..batch {
                    let base = bi * rows * cols;
                    for i in 0..rows {
                        for j in 0..cols {
                            data[base + j * rows + i] = a.data[base + i * cols + j];
                        }
                    }
                }
                Buf {
                    shape: out_shape,
                    data,
                }
            }
            Op::Rand { seed, offset } => Buf {
                data: (0..out_shape.iter().product::<usize>())
                    .map(|i| f64::from(tessera_tensor::uniform_f32(*seed, offset.wrapping_add(i as u64))))
                    .collect(),
                shape: out_shape,
            },
            Op::Arange { start } => Buf {
                data: (0..out_shape.iter().product::<usize>())
                    .map(|i| (*start + i as i64) as f64)
                    .collect(),
                shape: out_shape,
            },
            Op::Reshape => Buf {
                shape: out_shape,
                data: self.arg(n, 0).data.clone(),
            },
            Op::Slice(axes) => slice(self.arg(n, 0), axes, out_shape),
            Op::Conv2d { geom, acc } => self.conv2d(
                self.arg(n, 0),
                self.arg(n, 1),
                geom,
                self.accumulate(*acc, Policy::Fast),
                &store,
                out_shape,
            ),
            Op::Collective { kind, axis } => {
                // The same single-process emulation the Tile IR executors
                // use (see tessera-comm), on the oracle's f64 elements.
                let a = self.arg(n, 0);
                let split = self
                    .g
                    .tensor_ty(n.args[0])
                    .and_then(|t| (0..t.rank()).find(|i| t.dim_axis(*i) == Some(axis)));
                let mut bytes: Vec<u8> = a.data.iter().flat_map(|x| x.to_ne_bytes()).collect();
                let buf = Buffer {
                    data: &mut bytes,
                    shape: &a.shape,
                    split,
                };
                if let Err(e) = (Loopback { devices: axis.size }).run(*kind, buf) {
                    return err(format!("{}: {e}", kind.name()));
                }
                let data = bytes
                    .chunks_exact(8)
                    .map(|c| {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        f64::from_ne_bytes(b)
                    })
                    .collect();
                Buf {
                    shape: a.shape.clone(),
                    data,
                }
            }
            Op::KernelOut(_) => {
                return err("a kernel's further output is computed by its launch, which runs on the Tile IR backend")
            }
            Op::Kernel { name, .. } => {
                return err(format!(
                    "kernel `{name}` is called from an op; kernels run on the Tile IR backend, \
                     which this build of the CPU backend does not have yet"
                ))
            }
            Op::Attention {
                acc,
                causal,
                bottom_right,
            } => {
                let causal = causal.then_some(*bottom_right);
                self.attention(n, *acc, causal, &store, out_shape)
            }
        };
        Ok(buf)
    }

    fn reduce(
        &self,
        a: &Buf,
        kind: ReduceKind,
        axis: usize,
        acc: Accumulate,
        store: &impl Fn(f64) -> f64,
        out_shape: Vec<usize>,
    ) -> Buf {
        let outer: usize = a.shape[..axis].iter().product();
        let len = a.shape[axis];
        let inner: usize = a.shape[axis + 1..].iter().product();
        let mut data = Vec::with_capacity(outer * inner);
        let mut lane = vec![0.0; len];
        for o in 0..outer {
            for i in 0..inner {
                for (k, slot) in lane.iter_mut().enumerate() {
                    *slot = a.data[(o * len + k) * inner + i];
                }
                let v = match kind {
                    ReduceKind::Sum => sum(&lane, acc),
                    ReduceKind::Mean => {
                        let s = sum(&lane, acc);
                        match acc {
                            Accumulate::F32(_) => (s / len as f64) as f32 as f64,
                            _ => s / len as f64,
                        }
                    }
                    ReduceKind::Max => lane
                        .iter()
                        .copied()
                        .fold(f64::NEG_INFINITY, |m, x| BinaryOp::Max.eval(m, x)),
                    ReduceKind::Min => lane
                        .iter()
                        .copied()
                        .fold(f64::INFINITY, |m, x| BinaryOp::Min.eval(m, x)),
                    // In the accumulator's precision, in order.
                    ReduceKind::Prod => match acc {
                        Accumulate::F32(_) => lane.iter().fold(1.0f32, |p, x| p * *x as f32) as f64,
                        _ => lane.iter().product(),
                    },
                };
                data.push(store(v));
            }
        }
        Buf {
            shape: out_shape,
            data,
        }
    }

    fn matmul(
        &self,
        a: &Buf,
        b: &Buf,
        acc: Accumulate,
        store: &impl Fn(f64) -> f64,
        out_shape: Vec<usize>,
    ) -> Buf {
        let (ra, rb) = (a.shape.len(), b.shape.len());
        let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
        let batch_shape = &out_shape[..out_shape.len() - 2];
        let batch: usize = batch_shape.iter().product();
        let a_batch = broadcast_strides(&a.shape[..ra - 2], batch_shape);
        let b_batch = broadcast_strides(&b.shape[..rb - 2], batch_shape);
        let (a_in, b_in) = (&a.data, &b.data);
        let f32_acc = matches!(acc, Accumulate::F32(_));
        let mut data = vec![0.0; batch * m * n];
        let bstr = strides(batch_shape);
        let mut col = vec![0.0; k];
        for bi in 0..batch {
            let (mut ao, mut bo) = (0, 0);
            let mut rest = bi;
            for (d, s) in bstr.iter().enumerate() {
                let idx = rest / s;
                rest %= s;
                ao += idx * a_batch[d];
                bo += idx * b_batch[d];
            }
            let (ao, bo) = (ao * m * k, bo * k * n);
            for j in 0..n {
                for (p, c) in col.iter_mut().enumerate() {
                    *c = b_in[bo + p * n + j];
                }
                for i in 0..m {
                    let row = &a_in[ao + i * k..ao + (i + 1) * k];
                    let v = if f32_acc {
                        // One rounding per fused multiply-add, as the hardware.
                        let mut s = 0.0f32;
                        for (x, y) in row.iter().zip(&col) {
                            s = (s as f64 + x * y) as f32;
                        }
                        s as f64
                    } else {
                        row.iter().zip(&col).map(|(x, y)| x * y).sum()
                    };
                    data[bi * m * n + i * n + j] = store(v);
                }
            }
        }
        Buf {
            shape: out_shape,
            data,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        x: &Buf,
        w: &Buf,
        geom: &ConvGeom,
        acc: Accumulate,
        store: &impl Fn(f64) -> f64,
        out_shape: Vec<usize>,
    ) -> Buf {
        let (b, c, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
        let (o, cg, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3]);
        let (p, q) = (out_shape[2], out_shape[3]);
        let [sh, sw] = geom.stride.map(|v| v as isize);
        let [ph, pw] = geom.padding.map(|v| v as isize);
        let [dh, dw] = geom.dilation.map(|v| v as isize);
        // Output channels per group; each reads its group's `cg` inputs.
        let og = o / (geom.groups.max(1) as usize);
        let mut data = Vec::with_capacity(b * o * p * q);
        let mut terms = Vec::with_capacity(cg * kh * kw);
        for bi in 0..b {
            for oi in 0..o {
                let first = (oi / og.max(1)) * cg;
                for pi in 0..p {
                    for qi in 0..q {
                        terms.clear();
                        for cj in 0..cg {
                            let ci = first + cj;
                            for u in 0..kh {
                                for v in 0..kw {
                                    let (y, xx) = (
                                        pi as isize * sh + u as isize * dh - ph,
                                        qi as isize * sw + v as isize * dw - pw,
                                    );
                                    if y < 0 || xx < 0 || y as usize >= h || xx as usize >= wd {
                                        continue;
                                    }
                                    let xv =
                                        x.data[((bi * c + ci) * h + y as usize) * wd + xx as usize];
                                    let wv = w.data[((oi * cg + cj) * kh + u) * kw + v];
                                    terms.push(xv * wv);
                                }
                            }
                        }
                        data.push(store(sum(&terms, acc)));
                    }
                }
            }
        }
        Buf {
            shape: out_shape,
            data,
        }
    }

    /// softmax(q kᵀ · scale) v, one query row at a time, the scores never
    /// stored beyond one row. `causal`: whether the diagonal is aligned at
    /// the bottom right; a row that sees no key is 0.
    fn attention(
        &self,
        n: &Node,
        acc: Dtype,
        causal: Option<bool>,
        store: &impl Fn(f64) -> f64,
        out_shape: Vec<usize>,
    ) -> Buf {
        let (q, k, v, s) = (
            self.arg(n, 0),
            self.arg(n, 1),
            self.arg(n, 2),
            self.arg(n, 3),
        );
        let scale = s.data[0];
        let r = q.shape.len();
        let (nq, d) = (q.shape[r - 2], q.shape[r - 1]);
        let (nk, e) = (k.shape[r - 2], v.shape[r - 1]);
        let batch: usize = q.shape[..r - 2].iter().product();
        let narrow = self.mode == Mode::Device && acc != Dtype::Fp64;
        let rnd = |x: f64| if narrow { x as f32 as f64 } else { x };
        let mut data = vec![0.0; batch * nq * e];
        let mut scores = vec![0.0; nk];
        let mut out = vec![0.0; e];
        let qstr = strides(&q.shape[..r - 2]);
        let kstr = strides(&k.shape[..r - 2]);
        for bi in 0..batch {
            // Grouped-query attention: query batch index `i` reads key/value
            // index `i / (Hq / Hk)` along every batch dim.
            let mut kbi = 0;
            for (a, (qs, ks)) in qstr.iter().zip(&kstr).enumerate() {
                let i = bi / qs % q.shape[a];
                kbi += i / (q.shape[a] / k.shape[a]) * ks;
            }
            let (qb, kb, vb) = (bi * nq * d, kbi * nk * d, kbi * nk * e);
            for i in 0..nq {
                let seen = match causal {
                    Some(true) => (i + 1 + nk).saturating_sub(nq).min(nk),
                    Some(false) => nk.min(i + 1),
                    None => nk,
                };
                let qi = &q.data[qb + i * d..qb + (i + 1) * d];
                let mut m = f64::NEG_INFINITY;
                for (j, sj) in scores[..seen].iter_mut().enumerate() {
                    let kj = &k.data[kb + j * d..kb + (j + 1) * d];
                    let mut dot = 0.0;
                    for (x, y) in qi.iter().zip(kj) {
                        dot = rnd(dot + x * y);
                    }
                    *sj = rnd(dot * scale);
                    m = m.max(*sj);
                }
                let mut l = 0.0;
                out.iter_mut().for_each(|o| *o = 0.0);
                for (j, sj) in scores[..seen].iter().enumerate() {
                    let p = rnd((sj - m).exp());
                    l = rnd(l + p);
                    for (c, o) in out.iter_mut().enumerate() {
                        *o = rnd(*o + p * v.data[vb + j * e + c]);
                    }
                }
                for (c, o) in out.iter().enumerate() {
                    let x = if seen == 0 { 0.0 } else { o / l };
                    data[bi * nq * e + i * e + c] = store(rnd(x));
                }
            }
        }
        Buf {
            shape: out_shape,
            data,
        }
    }
}

fn slice(a: &Buf, axes: &[SliceAxis], out_shape: Vec<usize>) -> Buf {
    let st = strides(&a.shape);
    // Per source dimension: the start offset and whether it is kept.
    let mut base = 0;
    let mut kept_strides = Vec::new();
    for (d, &s) in st.iter().enumerate() {
        match axes.get(d).copied().unwrap_or(SliceAxis::Full) {
            SliceAxis::Index(i) => base += i as usize * s,
            SliceAxis::Range(lo, _) => {
                base += lo as usize * s;
                kept_strides.push(s);
            }
            SliceAxis::Full => kept_strides.push(s),
        }
    }
    let n: usize = out_shape.iter().product();
    let out_st = strides(&out_shape);
    let data = (0..n)
        .map(|i| {
            let mut off = base;
            let mut rest = i;
            for (os, ks) in out_st.iter().zip(&kept_strides) {
                off += (rest / os) * ks;
                rest %= os;
            }
            a.data[off]
        })
        .collect();
    Buf {
        shape: out_shape,
        data,
    }
}

/// One step of a `kind` scan: the running value `r` with the next element.
/// Maxima and minima propagate NaN; log-sum-exp shifts by the larger value
/// where it is finite.
fn scan_step(kind: ScanKind, r: f64, x: f64) -> f64 {
    match kind {
        ScanKind::Sum => r + x,
        ScanKind::Prod => r * x,
        ScanKind::Max | ScanKind::Min if r.is_nan() || x.is_nan() => f64::NAN,
        ScanKind::Max => r.max(x),
        ScanKind::Min => r.min(x),
        ScanKind::LogSumExp => {
            let m = r.max(x);
            let s = if m.is_finite() { m } else { 0.0 };
            s + ((r - s).exp() + (x - s).exp()).ln()
        }
    }
}
