//! The operations host code performs on values, shared by the interpreter
//! and by compiled host code (through the runtime's call sites): creating
//! tensors, calling ops and kernels, elementwise operators, indexing,
//! transposes, casts and `print`. Every op call runs as a graph on a
//! [`GraphRunner`]: the CPU backend, or a GPU device supplied by the caller.

use std::io::Write;

use crate::{prepare_graph, tensor_type};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_graph::{
    build_call, build_kernel, infer, Arg, BinaryOp, Graph, Node, Op, Param, Program, ScalarKind,
    SliceAxis, Type, UnaryOp,
};
use tessera_syntax::ast::{self, Dtype};
use tessera_tensor::Tensor;

/// A host value.
#[derive(Clone, Debug)]
pub enum HostValue {
    /// A tensor.
    Tensor(Tensor),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A list (shapes).
    List(Vec<HostValue>),
    /// A string.
    Str(String),
    /// No value.
    Unit,
}

/// The result type of host operations: a diagnostic at the source span.
pub type R<T> = Result<T, Box<Diagnostic>>;

/// A runtime error (E0701) at `span`.
pub fn fail<T>(span: Span, msg: impl Into<String>, label: impl Into<String>) -> R<T> {
    Err(Box::new(
        Diagnostic::error(codes::E0701, span, msg).with_label(label),
    ))
}

/// Runs a graph built on concrete shapes (already optimised) on its inputs.
pub trait GraphRunner {
    /// The graph's outputs.
    fn run(&mut self, program: &Program<'_>, g: &Graph, inputs: &[Tensor]) -> R<Vec<Tensor>>;
}

/// The CPU backend.
pub struct CpuRunner;

impl GraphRunner for CpuRunner {
    fn run(&mut self, program: &Program<'_>, g: &Graph, inputs: &[Tensor]) -> R<Vec<Tensor>> {
        crate::kernels::run_graph(program, g, inputs, None)
    }
}

/// One element of an index, evaluated: `t[i]` or `t[lo:hi]` (bounds
/// optional), with where it is written.
#[derive(Clone, Debug)]
pub enum IndexValue {
    /// A single index.
    Index(i64, Span),
    /// A slice.
    /// A slice `lo:hi:step` (a step of 1 when none is written).
    Slice(Option<i64>, Option<i64>, i64, Span),
    /// `None`: a new axis of extent 1.
    NewAxis,
    /// `...`: full slices of every axis the other parts leave.
    Ellipsis(Span),
    /// An integer tensor: `x[ids]`, `x[:, ids]` pick along its axis, and
    /// several (or one with integers) pick paired: `x[rows, cols]`.
    Tensor(Tensor),
}

/// Host operations on a program, running graphs on a runner and printing to
/// an output.
pub struct HostOps<'p, 'a> {
    /// The checked program.
    pub program: &'p Program<'a>,
    /// Where graphs run.
    pub runner: &'p mut dyn GraphRunner,
    /// Where `print` writes.
    pub out: &'p mut dyn Write,
}

impl HostOps<'_, '_> {
    /// A builtin of `std.host` on arguments bound to its parameters.
    pub fn builtin(
        &mut self,
        name: &str,
        params: &[ast::Param],
        bound: &[Option<HostValue>],
        dtype: Dtype,
        span: Span,
    ) -> R<HostValue> {
        let get = |n: &str| -> Option<HostValue> {
            let i = params.iter().position(|p| p.name.text == n)?;
            bound.get(i).cloned().flatten()
        };
        let shape = || -> R<Vec<usize>> {
            match get("shape") {
                Some(HostValue::List(items)) => items
                    .iter()
                    .map(|v| match v {
                        HostValue::Int(n) if *n >= 0 => Ok(*n as usize),
                        _ => fail(span, "a shape holds non-negative integers", "bad shape"),
                    })
                    .collect(),
                _ => fail(span, "expected a shape `[d0, d1, ...]`", "no shape"),
            }
        };
        let text = |n: &str| -> R<String> {
            match get(n) {
                Some(HostValue::Str(s)) => Ok(s),
                _ => fail(span, format!("`{name}` needs a string `{n}`"), "here"),
            }
        };
        let seed = match get("seed") {
            Some(HostValue::Int(s)) => s as u64,
            _ => 0,
        };
        let d = dtype;
        let made = match name {
            "randn" => tessera_tensor::randn(d, &shape()?, seed),
            "rand" => {
                let offset = match get("offset") {
                    Some(HostValue::Int(o)) => o as u64,
                    _ => 0,
                };
                tessera_tensor::rand(d, &shape()?, seed, offset)
            }
            "zeros" => Tensor::zeros(d, &shape()?),
            "ones" => Tensor::full(d, &shape()?, 1.0),
            "full" => {
                let v = match get("value") {
                    Some(HostValue::Float(x)) => x,
                    Some(HostValue::Int(n)) => n as f64,
                    _ => 0.0,
                };
                Tensor::full(d, &shape()?, v)
            }
            "load_npy" => {
                let path = text("path")?;
                let want = shape()?;
                let array = tessera_tensor::read_npy_file(&path)
                    .or_else(|e| fail(span, format!("cannot load a tensor: {e}"), "here"))?;
                if array.tensor.shape != want {
                    return fail(
                        span,
                        format!(
                            "`{path}` holds a tensor of shape {:?} where {want:?} was expected",
                            array.tensor.shape
                        ),
                        "the shape given here",
                    );
                }
                // As `--input`: a value `d` cannot hold is an error, not
                // a saturated or truncated one.
                match array.tensor.convert_exact(d) {
                    Ok(t) => return Ok(HostValue::Tensor(t)),
                    Err(why) => {
                        return fail(
                            span,
                            format!(
                                "`{path}` ({} {:?}) {why}",
                                array.tensor.dtype, array.tensor.shape
                            ),
                            "loaded here",
                        )
                    }
                }
            }
            "save_npy" => {
                let path = text("path")?;
                let Some(HostValue::Tensor(t)) = get("value") else {
                    return fail(span, "`save_npy` writes tensors", "not a tensor");
                };
                tessera_tensor::write_npy_file(&path, &t)
                    .or_else(|e| fail(span, format!("cannot save a tensor: {e}"), "here"))?;
                return Ok(HostValue::Unit);
            }
            "allclose" => {
                let (Some(HostValue::Tensor(a)), Some(HostValue::Tensor(b))) = (get("a"), get("b"))
                else {
                    return fail(span, "`allclose` compares two tensors", "here");
                };
                if a.shape != b.shape {
                    return fail(
                        span,
                        format!("`allclose` of shapes {:?} and {:?}", a.shape, b.shape),
                        "the shapes must be equal",
                    );
                }
                let num = |n: &str, default: f64| match get(n) {
                    Some(HostValue::Float(x)) => x,
                    Some(HostValue::Int(k)) => k as f64,
                    _ => default,
                };
                let (rtol, atol) = (num("rtol", 1e-5), num("atol", 1e-8));
                let close = a
                    .to_f64_vec()
                    .iter()
                    .zip(b.to_f64_vec())
                    .all(|(x, y)| (x - y).abs() <= atol + rtol * y.abs());
                return Ok(HostValue::Bool(close));
            }
            "assert" => {
                let holds = match get("cond") {
                    Some(HostValue::Bool(b)) => Some(b),
                    Some(HostValue::Tensor(t)) => truth(&t),
                    _ => None,
                };
                return match holds {
                    Some(true) => Ok(HostValue::Unit),
                    Some(false) => fail(span, text("message")?, "this assert failed"),
                    None => fail(span, "an assert's condition is a bool", "here"),
                };
            }
            "print" => {
                let text = show(&get("value").unwrap_or(HostValue::Unit));
                let _ = writeln!(self.out, "{text}");
                return Ok(HostValue::Unit);
            }
            "cdiv" => {
                return match (get("a"), get("b")) {
                    (Some(HostValue::Int(a)), Some(HostValue::Int(b))) if b > 0 => Ok(
                        HostValue::Int(a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0)),
                    ),
                    _ => fail(span, "`cdiv` needs integers, the divisor positive", "here"),
                }
            }
            _ => {
                return fail(
                    span,
                    format!("`{name}` is not available in host code"),
                    "unknown builtin",
                )
            }
        };
        made.map(HostValue::Tensor)
            .or_else(|e| fail(span, format!("cannot create the tensor: {e}"), "here"))
    }

    /// Launches user kernel `name`: its non-`out` parameters take the bound
    /// tensors, and the result is its one output (a list of its outputs
    /// for a kernel with several, bound by `let (...)`; an `inout`
    /// parameter's updated contents among them). A call that passes the
    /// `out` parameters too (to write into them) is an error: host values
    /// are immutable, and results are returned, not written into
    /// arguments.
    pub fn kernel(
        &mut self,
        name: &str,
        params: &[ast::Param],
        bound: Vec<Option<HostValue>>,
        span: Span,
    ) -> R<HostValue> {
        let outs = params.iter().filter(|p| p.is_output()).count();
        let passed = params
            .iter()
            .zip(&bound)
            .any(|(p, v)| p.mode == ast::ParamMode::Out && v.is_some());
        if passed {
            return fail(
                span,
                format!(
                    "kernel `{name}` is called with its outputs: an `out` tensor is allocated \
                     by the launch (a tensor the kernel updates is declared `inout`){}",
                    if outs == 1 {
                        "; pass the inputs only and take the result (`let c = kernel(a, b);`)"
                    } else {
                        "; pass the inputs only and bind the results (`let (c, d) = kernel(a, b);`)"
                    }
                ),
                "outputs passed here",
            );
        }
        let mut inputs = Vec::new();
        for (p, v) in params.iter().zip(bound) {
            if !p.is_input() {
                continue;
            }
            // A scalar left out takes its default (`s: fp32 = 1.0`).
            let v = v.or_else(|| {
                let x = p.default.as_ref()?.kind.literal_number()?;
                Some(HostValue::Float(x))
            });
            // A scalar parameter (`s: fp32`) takes a number: a tensor of
            // rank 0 of its dtype.
            let scalar = match (&p.ty.kind, &v) {
                (
                    ast::TypeKind::Tensor { dims, elem, .. },
                    Some(HostValue::Int(_) | HostValue::Float(_) | HostValue::Bool(_)),
                ) if dims.is_empty() => match elem {
                    ast::ElemType::Dtype(d, _) => Some(*d),
                    ast::ElemType::Var(_) => None,
                },
                _ => None,
            };
            match (v, scalar) {
                (Some(HostValue::Tensor(t)), _) => inputs.push(t),
                (Some(x), Some(d)) => {
                    let value = match x {
                        HostValue::Int(n) => n as f64,
                        HostValue::Float(f) => f,
                        HostValue::Bool(b) => f64::from(u8::from(b)),
                        _ => 0.0,
                    };
                    // An integer parameter takes integers its dtype holds
                    // (the checker rejects literals that do not).
                    if let Some((lo, hi)) = d.int_range() {
                        if value.fract() != 0.0 || value < lo as f64 || value > hi as f64 {
                            return fail(
                                span,
                                format!("{value} does not fit `{}: {d}`", p.name.text),
                                "in this launch",
                            );
                        }
                    }
                    match Tensor::from_f64(d, &[], &[value]) {
                        Ok(t) => inputs.push(t),
                        Err(e) => return fail(span, e.to_string(), "in this launch"),
                    }
                }
                _ => {
                    return fail(
                        span,
                        format!("kernel input `{}` needs a tensor", p.name.text),
                        "in this launch",
                    )
                }
            }
        }
        let types: Vec<Type> = inputs.iter().map(tensor_type).collect();
        let g = build_kernel(self.program, name, Some(&types)).map_err(|d| at(d, span))?;
        self.run_graph(&g, &inputs, span)
    }

    /// Runs one op call (user op or stdlib op) as a graph.
    pub fn op_call(
        &mut self,
        name: &str,
        bound: Vec<Option<HostValue>>,
        span: Span,
    ) -> R<HostValue> {
        self.op_parts(name, bound, None, span)
    }

    /// [`HostOps::op_call`] for a call with several results (`split`,
    /// `chunk`, `topk`) bound by `let (...)` with `parts` names: the parts
    /// as a list.
    pub fn op_parts(
        &mut self,
        name: &str,
        bound: Vec<Option<HostValue>>,
        parts: Option<usize>,
        span: Span,
    ) -> R<HostValue> {
        let mut inputs = Vec::new();
        let args: Vec<Option<Arg>> = bound
            .into_iter()
            .map(|v| match v {
                None => None,
                Some(HostValue::Tensor(t)) => {
                    let ty = tensor_type(&t);
                    inputs.push(t);
                    Some(Arg::Type(ty))
                }
                Some(HostValue::Int(n)) => Some(Arg::Int(n)),
                Some(HostValue::Float(x)) => Some(Arg::Float(x)),
                Some(HostValue::Bool(b)) => Some(Arg::Bool(b)),
                Some(HostValue::Str(s)) => Some(Arg::Str(s)),
                Some(HostValue::List(items)) => {
                    let all = |f: fn(&HostValue) -> bool| !items.is_empty() && items.iter().all(f);
                    if all(|i| matches!(i, HostValue::Tensor(_))) {
                        let mut types = Vec::new();
                        for i in items {
                            if let HostValue::Tensor(t) = i {
                                types.push(tensor_type(&t));
                                inputs.push(t);
                            }
                        }
                        Some(Arg::Types(types))
                    } else {
                        items
                            .iter()
                            .map(|i| match i {
                                HostValue::Int(n) => Some(*n),
                                _ => None,
                            })
                            .collect::<Option<Vec<i64>>>()
                            .map(Arg::Ints)
                    }
                }
                Some(_) => None,
            })
            .collect();
        let g = build_call(self.program, name, &args, parts, span).map_err(|d| at(d, span))?;
        let v = self.run_graph(&g, &inputs, span)?;
        // An op declared `-> bool` gives host code a truth value.
        Ok(match v {
            HostValue::Tensor(t) if t.shape.is_empty() && self.returns_truth(name) => {
                HostValue::Bool(t.get_f64(0).unwrap_or(0.0) != 0.0)
            }
            v => v,
        })
    }

    /// Whether op `name` declares its result `bool` (a truth value, not a
    /// tensor of them).
    fn returns_truth(&self, name: &str) -> bool {
        let Some(tessera_graph::Callable::Op(def, _)) = self.program.lookup(name) else {
            return false;
        };
        def.ret
            .as_ref()
            .is_some_and(|t| matches!(t.kind, ast::TypeKind::Tensor { .. }) && t.is_attribute())
    }

    fn run_graph(&mut self, g: &Graph, inputs: &[Tensor], span: Span) -> R<HostValue> {
        let g = prepare_graph(self.program, g).map_err(|d| at(d, span))?;
        let out = self
            .runner
            .run(self.program, &g, inputs)
            .map_err(|d| at(d, span))?;
        if out.is_empty() {
            return fail(span, "the op produced no result", "here");
        }
        let value = |t: Tensor, ty: &Type| match ty {
            Type::Scalar(ScalarKind::Int) => HostValue::Int(t.get_f64(0).unwrap_or(0.0) as i64),
            Type::Scalar(ScalarKind::Float) => HostValue::Float(t.get_f64(0).unwrap_or(0.0)),
            Type::Scalar(ScalarKind::Bool) => HostValue::Bool(t.get_f64(0).unwrap_or(0.0) != 0.0),
            Type::Tensor(_) => HostValue::Tensor(t),
        };
        let mut values: Vec<HostValue> = out
            .into_iter()
            .zip(&g.outputs)
            .map(|(t, o)| value(t, g.ty(*o)))
            .collect();
        // Several outputs (a kernel's, the parts of `split`) are a list.
        Ok(if values.len() == 1 {
            values.remove(0)
        } else {
            HostValue::List(values)
        })
    }

    /// A binary operator on host values: scalars compute here, anything
    /// with a tensor runs as a one-node graph.
    pub fn binary(&mut self, op: BinaryOp, l: HostValue, r: HostValue, span: Span) -> R<HostValue> {
        use HostValue::*;
        Ok(match (&l, &r) {
            (Int(a), Int(b)) => {
                let v = match op {
                    BinaryOp::Add => a.checked_add(*b),
                    BinaryOp::Sub => a.checked_sub(*b),
                    BinaryOp::Mul => a.checked_mul(*b),
                    BinaryOp::Div => a.checked_div(*b),
                    BinaryOp::Rem => a.checked_rem(*b),
                    BinaryOp::Eq => return Ok(Bool(a == b)),
                    BinaryOp::Ne => return Ok(Bool(a != b)),
                    BinaryOp::Lt => return Ok(Bool(a < b)),
                    BinaryOp::Le => return Ok(Bool(a <= b)),
                    BinaryOp::Gt => return Ok(Bool(a > b)),
                    BinaryOp::Ge => return Ok(Bool(a >= b)),
                    _ if op.is_bitwise() => op.eval_int(*a, *b),
                    _ => return Ok(Bool(op.eval(*a as f64, *b as f64) != 0.0)),
                };
                match v {
                    Some(v) => Int(v),
                    None => return fail(span, "integer overflow or division by zero", "here"),
                }
            }
            // `&`, `|`, `^` of booleans are logical.
            (Bool(a), Bool(b)) if op.is_bitwise() => Bool(match op {
                BinaryOp::BitAnd => *a && *b,
                BinaryOp::BitOr => *a || *b,
                _ => a != b,
            }),
            (Int(_) | Float(_) | Bool(_), Int(_) | Float(_) | Bool(_)) => {
                let (a, b) = (num(&l), num(&r));
                let v = op.eval(a, b);
                if op.is_comparison() || matches!(op, BinaryOp::And | BinaryOp::Or) {
                    Bool(v != 0.0)
                } else {
                    Float(v)
                }
            }
            // An integer outside an integer tensor's range compares by
            // value (numpy, torch): the tensor is widened to int64 first.
            (Tensor(t), Int(c)) | (Int(c), Tensor(t))
                if op.by_value() && t.dtype.excludes_int(*c) =>
            {
                let dtype = t.dtype;
                let widen = |v: &HostValue| match v {
                    Tensor(t) => Tensor(t.cast(Dtype::Int64)),
                    other => other.clone(),
                };
                let v = self.apply(Op::Binary(op), vec![widen(&l), widen(&r)], span)?;
                match v {
                    Tensor(t) if !op.is_comparison() => Tensor(t.cast(dtype)),
                    v => v,
                }
            }
            _ => {
                let (l, r) = promote(l, r);
                self.apply(Op::Binary(op), vec![l, r], span)?
            }
        })
    }

    /// A unary operator on a host value.
    pub fn unary(&mut self, op: UnaryOp, v: HostValue, span: Span) -> R<HostValue> {
        Ok(match (op, v) {
            (UnaryOp::Neg, HostValue::Int(n)) => match n.checked_neg() {
                Some(m) => HostValue::Int(m),
                None => return fail(span, "integer overflow or division by zero", "here"),
            },
            (UnaryOp::Neg, HostValue::Float(x)) => HostValue::Float(-x),
            (UnaryOp::Not, HostValue::Bool(b)) => HostValue::Bool(!b),
            (op, t) => self.apply(Op::Unary(op), vec![t], span)?,
        })
    }

    /// `base[...]`.
    pub fn index(&mut self, base: &HostValue, parts: &[IndexValue], span: Span) -> R<HostValue> {
        let HostValue::Tensor(t) = base else {
            return fail(span, "only tensors can be indexed", "not a tensor");
        };
        let parts = &*expand_ellipsis(parts, t.rank());
        // Integer tensors among integers and full slices (the checker has
        // typed the form): numpy's integer-array indexing.
        if parts.iter().any(|p| matches!(p, IndexValue::Tensor(_))) {
            return super::pick::pick(t, parts, span).map(HostValue::Tensor);
        }
        let selecting = parts.iter().filter(|p| !matches!(p, IndexValue::NewAxis));
        let consumed = selecting.clone().count();
        if consumed > t.rank() {
            return fail(
                span,
                format!("{consumed} indices for a tensor of rank {}", t.rank()),
                "too many indices",
            );
        }
        let mut axes = Vec::new();
        // Strided slices: (axis of the sliced tensor, the positions kept
        // along it, in order).
        let mut strided = Vec::new();
        for (i, part) in selecting.enumerate() {
            let n = t.shape[i] as i64;
            // A negative index or bound counts from the end, as in Python.
            let from_end = |k: i64| if k < 0 { k + n } else { k };
            axes.push(match part {
                IndexValue::NewAxis | IndexValue::Tensor(_) | IndexValue::Ellipsis(_) => {
                    unreachable!("handled above")
                }
                &IndexValue::Index(k, s) => {
                    if !(0..n).contains(&from_end(k)) {
                        return fail(
                            s,
                            format!("index {k} is out of bounds for dimension {i} of size {n}"),
                            "out of bounds",
                        );
                    }
                    SliceAxis::Index(from_end(k) as u64)
                }
                &IndexValue::Slice(lo, hi, step, s) => {
                    if step < 0 && (lo.is_some() || hi.is_some()) {
                        return fail(
                            s,
                            format!("a step of {step} with bounds"),
                            "a negative step takes a whole axis (`::-1`)",
                        );
                    }
                    if step == 0 {
                        return fail(s, "a slice's step of 0", "the step must not be 0");
                    }
                    let (lo, hi) = (lo.map_or(0, from_end), hi.map_or(n, from_end));
                    // An empty slice (`ys[0:t]` at t = 0) is a tensor
                    // with no elements, which `concat` leaves out.
                    if lo < 0 || hi > n || lo > hi {
                        return fail(
                            s,
                            format!("slice {lo}:{hi} does not fit dimension {i} of size {n}"),
                            "out of bounds",
                        );
                    }
                    if step != 1 {
                        let kept = axes.iter().filter(|a| !matches!(a, SliceAxis::Index(_)));
                        let len = hi - lo;
                        let picks: Vec<i64> = if step > 0 {
                            (0..len).step_by(step as usize).collect()
                        } else {
                            (0..len)
                                .rev()
                                .step_by(step.unsigned_abs() as usize)
                                .collect()
                        };
                        strided.push((kept.count(), picks));
                    }
                    SliceAxis::Range(lo as u64, hi as u64)
                }
            });
        }
        // Only the selected elements are copied (cost ∝ the slice, not
        // the source).
        let mut out = slice_tensor(t, &axes);
        for (axis, picks) in strided {
            // The kept positions, in order: `take` at them.
            let picks: Vec<f64> = picks.into_iter().map(|k| k as f64).collect();
            let ids = match Tensor::from_f64(Dtype::Int32, &[picks.len()], &picks) {
                Ok(t) => t,
                Err(e) => return fail(span, e.to_string(), "here"),
            };
            let bound = vec![
                Some(HostValue::Tensor(out)),
                Some(HostValue::Tensor(ids)),
                Some(HostValue::Int(axis as i64)),
            ];
            out = match self.op_call("take", bound, span)? {
                HostValue::Tensor(t) => t,
                _ => return fail(span, "a strided slice gave no tensor", "here"),
            };
        }
        if consumed < parts.len() {
            // `None` entries: axes of extent 1 where written (the row-major
            // order of the elements is unchanged).
            let mut kept = out.shape.iter().copied();
            let mut shape = Vec::new();
            for p in parts {
                match p {
                    IndexValue::NewAxis => shape.push(1),
                    IndexValue::Slice(..) => shape.extend(kept.next()),
                    IndexValue::Index(..) | IndexValue::Tensor(_) | IndexValue::Ellipsis(_) => {}
                }
            }
            shape.extend(kept);
            out.shape = shape;
        }
        Ok(HostValue::Tensor(out))
    }

    /// `x.T`.
    pub fn transpose(&mut self, v: HostValue, span: Span) -> R<HostValue> {
        self.apply(Op::Transpose, vec![v], span)
    }

    /// `x as dtype`.
    pub fn cast(&mut self, v: HostValue, dtype: Dtype, span: Span) -> R<HostValue> {
        Ok(match v {
            HostValue::Tensor(t) => HostValue::Tensor(t.cast(dtype)),
            HostValue::Int(n) => scalar_as(n as f64, dtype),
            HostValue::Float(x) => scalar_as(x, dtype),
            HostValue::Bool(b) => scalar_as(f64::from(u8::from(b)), dtype),
            _ => return fail(span, "cannot convert this value", "not a number or tensor"),
        })
    }

    /// Runs a single op on host values as a one-node graph.
    fn apply(&mut self, op: Op, args: Vec<HostValue>, span: Span) -> R<HostValue> {
        let mut g = Graph {
            name: "host".into(),
            params: Vec::new(),
            nodes: Vec::new(),
            outputs: Vec::new(),
            numerics: Default::default(),
        };
        let mut inputs = Vec::new();
        let mut ids = Vec::new();
        for a in args {
            let (op, ty) = match a {
                HostValue::Tensor(t) => {
                    let ty = tensor_type(&t);
                    g.params.push(Param {
                        name: format!("arg{}", inputs.len()),
                        ty: ty.clone(),
                    });
                    inputs.push(t);
                    (Op::Param(inputs.len() - 1), ty)
                }
                HostValue::Int(n) => (Op::Const(n as f64), Type::Scalar(ScalarKind::Int)),
                HostValue::Float(x) => (Op::Const(x), Type::Scalar(ScalarKind::Float)),
                HostValue::Bool(b) => (
                    Op::Const(f64::from(u8::from(b))),
                    Type::Scalar(ScalarKind::Bool),
                ),
                _ => return fail(span, "expected a tensor or a number", "here"),
            };
            ids.push(g.push(Node {
                op,
                args: Vec::new(),
                ty,
                span,
            }));
        }
        let tys: Vec<&Type> = ids.iter().map(|i| g.ty(*i)).collect();
        let ty = match infer(&op, &tys, &g.params) {
            Ok(Some(t)) => t,
            Ok(None) => return fail(span, "cannot type this operation", "here"),
            Err(e) => return fail(span, e.message, "here"),
        };
        let out = g.push(Node {
            op,
            args: ids,
            ty,
            span,
        });
        g.outputs.push(out);
        self.run_graph(&g, &inputs, span)
    }
}

/// Moves a diagnostic raised while building or running a graph to the
/// host expression that asked for it.
/// Diagnostic `d` of building the call at `span`: one at an expression of
/// an op body in the user's file keeps its place and names the call as
/// well; one elsewhere moves to the call.
fn at(mut d: Box<Diagnostic>, span: Span) -> Box<Diagnostic> {
    let own = d.primary.span;
    if own.file != span.file {
        d.primary.span = span;
    } else if own != span {
        d.secondary.push(tessera_diagnostics::Label {
            span,
            message: "at the sizes of this call".into(),
        });
    }
    d
}

fn num(v: &HostValue) -> f64 {
    match v {
        HostValue::Int(n) => *n as f64,
        HostValue::Float(x) => *x,
        HostValue::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

/// Converts the narrower of two float tensors to the wider dtype.
fn promote(l: HostValue, r: HostValue) -> (HostValue, HostValue) {
    match (&l, &r) {
        (HostValue::Tensor(a), HostValue::Tensor(b)) if a.dtype != b.dtype => {
            if a.dtype.size_bytes() >= b.dtype.size_bytes() {
                let b = b.convert(a.dtype);
                (l, HostValue::Tensor(b))
            } else {
                let a = a.convert(b.dtype);
                (HostValue::Tensor(a), r)
            }
        }
        _ => (l, r),
    }
}

fn scalar_as(x: f64, d: Dtype) -> HostValue {
    if d.is_float() {
        HostValue::Float(d.round(x))
    } else if d == Dtype::Bool {
        HostValue::Bool(x != 0.0)
    } else {
        HostValue::Int(d.round_int(x).unwrap_or(0))
    }
}

/// The number a one-element tensor holds, as a host float (`float`) or
/// integer (of an integer tensor only): how a host number takes a rank-0
/// tensor (`total += x[r, 0]`). `None` for any other tensor.
pub fn item(t: &Tensor, float: bool) -> Option<HostValue> {
    if t.shape.iter().product::<usize>() != 1 {
        return None;
    }
    if float {
        Some(HostValue::Float(t.to_f64_vec()[0]))
    } else if !t.dtype.is_float() {
        t.data.get_i64(0).map(HostValue::Int)
    } else {
        None
    }
}

/// The truth of a one-element boolean tensor (`if err < tol` on a reduced
/// value); `None` for other tensors.
pub fn truth(t: &Tensor) -> Option<bool> {
    if t.dtype != Dtype::Bool || t.shape.iter().product::<usize>() != 1 {
        return None;
    }
    t.data.get_i64(0).map(|b| b != 0)
}

/// How `print` shows a value.
pub fn show(v: &HostValue) -> String {
    match v {
        HostValue::Tensor(t) => t.format(),
        HostValue::Int(n) => n.to_string(),
        HostValue::Float(x) => tessera_tensor::format::format_float(*x),
        HostValue::Bool(b) => b.to_string(),
        HostValue::Str(s) => s.clone(),
        HostValue::List(items) => {
            let parts: Vec<String> = items.iter().map(show).collect();
            format!("[{}]", parts.join(", "))
        }
        HostValue::Unit => "()".into(),
    }
}

/// The elements of `t` that `axes` select (an index drops its dimension, a
/// range keeps its part; dimensions past `axes` are kept whole), copied
/// without touching the rest.
fn slice_tensor(t: &Tensor, axes: &[SliceAxis]) -> Tensor {
    let strides = t.strides();
    // Per source dimension: the first index and the extent kept (None for
    // a dimension an index drops).
    let mut parts: Vec<(usize, Option<usize>)> = Vec::with_capacity(t.rank());
    for (i, n) in t.shape.iter().enumerate() {
        parts.push(match axes.get(i) {
            Some(SliceAxis::Index(k)) => (*k as usize, None),
            Some(SliceAxis::Range(lo, hi)) => (*lo as usize, Some((*hi - *lo) as usize)),
            Some(SliceAxis::Full) | None => (0, Some(*n)),
        });
    }
    let shape: Vec<usize> = parts.iter().filter_map(|(_, e)| *e).collect();
    let count: usize = shape.iter().product();
    let base: usize = parts.iter().zip(&strides).map(|((lo, _), s)| lo * s).sum();
    let kept: Vec<(usize, usize)> = parts
        .iter()
        .zip(&strides)
        .filter_map(|((_, e), s)| e.map(|e| (e, *s)))
        .collect();
    let mut flat = Vec::with_capacity(count);
    let mut at = vec![0usize; kept.len()];
    for _ in 0..count {
        flat.push(base + at.iter().zip(&kept).map(|(i, (_, s))| i * s).sum::<usize>());
        for d in (0..kept.len()).rev() {
            at[d] += 1;
            if at[d] < kept[d].0 {
                break;
            }
            at[d] = 0;
        }
    }
    t.take(&shape, &flat)
}

#[cfg(test)]
mod slice_tests {
    use super::*;

    /// Every selection of a 3 x 4 x 5 tensor, against the definition.
    #[test]
    fn slices_pick_exactly_their_elements() {
        let t = Tensor::from_fn(Dtype::Int64, &[3, 4, 5], |i| i as f64).unwrap();
        let at = |i: usize, j: usize, k: usize| (i * 20 + j * 5 + k) as f64;
        let got = slice_tensor(&t, &[SliceAxis::Index(1), SliceAxis::Range(1, 3)]);
        assert_eq!(got.shape, vec![2, 5]);
        let want: Vec<f64> = (1..3)
            .flat_map(|j| (0..5).map(move |k| at(1, j, k)))
            .collect();
        assert_eq!(got.to_f64_vec(), want);
        let got = slice_tensor(
            &t,
            &[SliceAxis::Full, SliceAxis::Index(2), SliceAxis::Range(3, 5)],
        );
        assert_eq!(got.shape, vec![3, 2]);
        let want: Vec<f64> = (0..3)
            .flat_map(|i| (3..5).map(move |k| at(i, 2, k)))
            .collect();
        assert_eq!(got.to_f64_vec(), want);
        let got = slice_tensor(
            &t,
            &[
                SliceAxis::Index(2),
                SliceAxis::Index(3),
                SliceAxis::Index(4),
            ],
        );
        assert_eq!(got.shape, Vec::<usize>::new());
        assert_eq!(got.to_f64_vec(), vec![at(2, 3, 4)]);
        // Large integers survive exactly (no round trip through f64).
        let big = Tensor::from_fn(Dtype::Int64, &[2], |_| 0.0).unwrap();
        let mut big = big;
        if let tessera_tensor::Data::I64(v) = &mut big.data {
            v[1] = (1 << 60) + 1;
        }
        let got = slice_tensor(&big, &[SliceAxis::Range(1, 2)]);
        assert!(matches!(&got.data, tessera_tensor::Data::I64(v) if v[0] == (1 << 60) + 1));
    }
}

/// `parts` with its `...` replaced by the full slices that leave no axis
/// unselected (the checker allows one `...` only).
fn expand_ellipsis(parts: &[IndexValue], rank: usize) -> std::borrow::Cow<'_, [IndexValue]> {
    let Some(at) = parts
        .iter()
        .position(|p| matches!(p, IndexValue::Ellipsis(_)))
    else {
        return std::borrow::Cow::Borrowed(parts);
    };
    let IndexValue::Ellipsis(span) = parts[at] else {
        unreachable!("found above")
    };
    let taken = (parts.iter())
        .filter(|p| !matches!(p, IndexValue::NewAxis | IndexValue::Ellipsis(_)))
        .count();
    let mut out = parts[..at].to_vec();
    out.extend(std::iter::repeat_n(
        IndexValue::Slice(None, None, 1, span),
        rank.saturating_sub(taken),
    ));
    out.extend(parts[at + 1..].iter().cloned());
    std::borrow::Cow::Owned(out)
}
