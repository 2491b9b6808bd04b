//! Calls in op bodies: arguments bound to parameters, user and stdlib ops inlined, primitives and kernel launches.

use super::*;

impl Builder<'_, '_> {
    pub(super) fn call(
        &mut self,
        f: &mut Frame,
        callee: &ast::Name,
        args: &[ast::Arg],
        dtype_arg: Option<Dtype>,
        span: Span,
    ) -> R<V> {
        let name = callee.text.as_str();
        let Some(target) = self.program.resolve(name, !f.user) else {
            return Err(unsupported(
                self.span(f, span),
                format!("no op named `{name}`"),
                "unknown",
            ));
        };
        let params = target.params();
        let inputs: Vec<&ast::Param> = match target {
            Callable::Kernel(_) => params.iter().filter(|p| p.is_input()).collect(),
            _ => params.iter().collect(),
        };
        // Evaluate arguments in the caller's frame, matched to parameters.
        let mut bound: Vec<Option<V>> = vec![None; inputs.len()];
        for (a, slot) in args.iter().zip(ast::arg_slots(&inputs, args)) {
            let v = self.expr(f, &a.value)?;
            if let Some(s) = slot {
                bound[s] = Some(v);
            }
        }
        // Set after the arguments, whose own calls set theirs.
        self.dtype_arg = dtype_arg;
        self.call_values(f, name, target, &inputs, bound, span)
    }

    /// A call whose arguments are evaluated and matched to `inputs`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_values(
        &mut self,
        f: &mut Frame,
        name: &str,
        target: Callable<'_>,
        inputs: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<V> {
        match target {
            Callable::Op(op, module) if op.body.is_some() => {
                self.inline(f, op, module.is_none(), inputs, bound, span)
            }
            Callable::Op(..) | Callable::Fn(..)
                if matches!(name, "min" | "max")
                    && (self.is_scalar(bound.first())
                        || (self.is_rank0(bound.first())
                            && bound.iter().flatten().count() > 1)) =>
            {
                // Of two scalars, the larger or smaller (Python's `min(a,
                // b)`); of one, itself.
                let mut given = bound.into_iter().flatten();
                let x = given.next().unwrap_or(V::Unit);
                match given.next() {
                    Some(y) => {
                        let op = if name == "max" {
                            BinaryOp::Max
                        } else {
                            BinaryOp::Min
                        };
                        self.binary(f, op, x, y, span)
                    }
                    None => Ok(x),
                }
            }
            Callable::Op(..) | Callable::Fn(..) => {
                // Defaults are evaluated with the primitive's own symbols
                // bound from its arguments (`scale: float = rsqrt(D)`).
                let mut frame = Frame::new(f.numerics, f.user, f.site);
                let pairs: Vec<(&ast::Param, Type)> = inputs
                    .iter()
                    .zip(&bound)
                    .filter_map(|(p, v)| match v {
                        Some(V::Node(id)) => Some((*p, self.graph.ty(*id).clone())),
                        _ => None,
                    })
                    .collect();
                self.bind_types(&mut frame, name, &pairs, Some(span))?;
                let mut vals = Vec::new();
                for (p, v) in inputs.iter().zip(bound) {
                    let v = match (v, &p.default) {
                        (Some(v), _) => v,
                        (None, Some(d)) => self.expr(&mut frame, d)?,
                        (None, None) => V::Unit,
                    };
                    vals.push((p.name.text.as_str(), v));
                }
                self.primitive(f, name, &vals, span)
            }
            Callable::Kernel(k) => self.kernel_call(f, k, inputs, bound, span),
        }
    }

    /// Whether argument `v` is a scalar (a number, or a value of no shape).
    /// Whether `v` is a tensor of rank 0 (a full reduction's result).
    fn is_rank0(&self, v: Option<&Option<V>>) -> bool {
        match v {
            Some(Some(V::Node(id))) => self.graph.tensor_ty(*id).is_some_and(|t| t.rank() == 0),
            _ => false,
        }
    }

    fn is_scalar(&self, v: Option<&Option<V>>) -> bool {
        match v {
            Some(Some(V::Int(_) | V::Float(_))) => true,
            Some(Some(V::Node(id))) => self.graph.tensor_ty(*id).is_none(),
            _ => false,
        }
    }

    /// The value an op body returns against its declared result type at
    /// the sizes bound: a known dim that differs (a slice `0:D/2` the
    /// checker could only type as unknown, returned as `tensor<T, D>`) is
    /// an E0204 at the result type, never a tensor of the wrong shape.
    pub(super) fn check_result(&self, f: &Frame, op: &ast::OpDef, v: &V) -> R<()> {
        if let (
            Some(ast::Type {
                kind: ast::TypeKind::Tuple(parts),
                ..
            }),
            V::List(vs),
        ) = (&op.ret, v)
        {
            for (ret, v) in parts.iter().zip(vs) {
                if let V::Node(id) = v {
                    self.check_part(f, op, ret, *id)?;
                }
            }
            return Ok(());
        }
        let (Some(ret), V::Node(id)) = (&op.ret, v) else {
            return Ok(());
        };
        self.check_part(f, op, ret, *id)
    }

    /// [`Builder::check_result`] of one result, `id`, declared `ret`.
    fn check_part(&self, f: &Frame, op: &ast::OpDef, ret: &ast::Type, id: ValueId) -> R<()> {
        let (Ok(Some(Type::Tensor(want))), Type::Tensor(got)) =
            (self.lower_type(f, ret), self.graph.ty(id))
        else {
            return Ok(());
        };
        let differs =
            want.rank() != got.rank()
                || want.dims.iter().zip(&got.dims).any(
                    |(a, b)| matches!((a.as_known(), b.as_known()), (Some(x), Some(y)) if x != y),
                );
        if !differs {
            return Ok(());
        }
        Err(Box::new(
            Diagnostic::error(
                codes::E0204,
                self.span(f, ret.span),
                format!(
                    "`{}` returns `{got}`, not the declared `{want}`",
                    op.name.text
                ),
            )
            .with_label(format!("declared `{want}` at these sizes"))
            .with_help("declare the result type the body computes"),
        ))
    }

    pub(super) fn inline(
        &mut self,
        caller: &mut Frame,
        op: &ast::OpDef,
        user: bool,
        params: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<V> {
        if self.depth >= MAX_INLINE_DEPTH {
            return Err(unsupported(
                self.span(caller, span),
                "ops nest too deeply to inline",
                format!("more than {MAX_INLINE_DEPTH} nested calls").as_str(),
            ));
        }
        let numerics = if user {
            self.program
                .numerics(&op.name.text)
                .unwrap_or(caller.numerics)
        } else {
            caller.numerics
        };
        let site = if caller.user { span } else { caller.site };
        let mut frame = Frame::new(numerics, user && caller.user, site);
        let mut pairs = Vec::new();
        for (p, v) in params.iter().zip(bound) {
            let v = match (v, &p.default) {
                (Some(v), _) => v,
                (None, Some(d)) => self.expr(&mut frame, d)?,
                (None, None) => V::Unit,
            };
            let v = match v {
                V::Node(id) => {
                    let actual = self.graph.ty(id).clone();
                    self.bind_type(&mut frame, &p.ty, &actual);
                    pairs.push((*p, actual.clone()));
                    // A narrower float argument for a parameter of a fixed
                    // wider dtype is promoted.
                    match self.lower_type(&frame, &p.ty) {
                        Ok(Some(Type::Tensor(want))) => match &actual {
                            Type::Tensor(t) if t.dtype != want.dtype => {
                                self.cast(&frame, V::Node(id), want.dtype, span)?
                            }
                            _ => V::Node(id),
                        },
                        _ => V::Node(id),
                    }
                }
                V::Str(given) => {
                    // The value a caller's attribute passed on has here
                    // (the checker saw only its type). One this op passes
                    // on is checked where it arrives.
                    let choices = op.string_choices(p);
                    let passed_on = !op.calls_passing(&p.name.text).is_empty();
                    if choices.len() >= 2 && !passed_on && !choices.contains(&given) {
                        let listed: Vec<String> =
                            choices.iter().map(|c| format!("{c:?}")).collect();
                        return Err(Box::new(
                            Diagnostic::error(
                                codes::E0201,
                                self.span(caller, span),
                                format!("`{}` of `{}` is not {given:?}", p.name.text, op.name.text),
                            )
                            .with_label(format!("one of {}", listed.join(", "))),
                        ));
                    }
                    V::Str(given)
                }
                other => other,
            };
            frame.bind(&p.name.text, v);
        }
        // Products met before the parameter that binds a factor.
        self.bind_types(&mut frame, &op.name.text, &pairs, Some(span))?;
        let widened = if user {
            Vec::new()
        } else {
            self.widen_arguments(&mut frame, op, params, span)?
        };
        self.depth += 1;
        let flow = match &op.body {
            Some(b) => self.block(&mut frame, b),
            None => Ok(Flow::Normal),
        };
        self.depth -= 1;
        let v = match flow? {
            Flow::Return(v) => v,
            Flow::Normal => V::Unit,
        };
        self.check_result(&frame, op, &v)?;
        self.narrow_result(&frame, op, &widened, v, span)
    }

    /// A kernel launch in an op body: the kernel's one output (an op's
    /// value is a single tensor, so a kernel with several is an error here).
    pub(super) fn kernel_call(
        &mut self,
        f: &Frame,
        k: &ast::KernelDef,
        inputs: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<V> {
        let n_outs = k.params.iter().filter(|p| p.is_output()).count();
        // `let (a, b) = k(x);`: one part per output.
        if n_outs > 1 && self.tuple_call == Some((span, n_outs)) {
            let outs = self.kernel_launch(f, k, inputs, bound, span)?;
            return Ok(V::List(outs.into_iter().map(V::Node).collect()));
        }
        if n_outs != 1 {
            return Err(unsupported(
                self.span(f, span),
                format!(
                    "kernel `{}` has {n_outs} outputs; bind them with `let (...)`, one name each",
                    k.name.text
                ),
                "called here",
            ));
        }
        let outs = self.kernel_launch(f, k, inputs, bound, span)?;
        Ok(V::Node(outs[0]))
    }

    /// Launches kernel `k` on the `bound` values of its `inputs`: one
    /// [`Op::Kernel`] node for its first output and an [`Op::KernelOut`]
    /// of it for each further one. Returns the outputs in the order of the
    /// kernel's `out` parameters.
    pub(super) fn kernel_launch(
        &mut self,
        f: &Frame,
        k: &ast::KernelDef,
        inputs: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<Vec<ValueId>> {
        // The kernel's own symbols, bound from its inputs.
        let mut frame = Frame::new(f.numerics, f.user, f.site);
        let mut args = Vec::new();
        let mut pairs = Vec::new();
        for (p, v) in inputs.iter().zip(bound) {
            // A scalar left out takes its default (`s: fp32 = 1.0`).
            let v = match (v, &p.default) {
                (Some(v), _) => v,
                (None, Some(d)) => self.expr(&mut frame, d)?,
                (None, None) => V::Unit,
            };
            let id = self.node(f, v, span)?;
            pairs.push((*p, self.graph.ty(id).clone()));
            args.push(id);
        }
        self.bind_types(&mut frame, &k.name.text, &pairs, Some(span))?;
        let mut types = Vec::new();
        for out in k.params.iter().filter(|p| p.is_output()) {
            let Some(ty) = self.lower_type(&frame, &out.ty)? else {
                return Err(unsupported(span, "kernel output is not a tensor", "here"));
            };
            types.push(ty);
        }
        if types.is_empty() {
            return Err(unsupported(span, "a kernel without outputs", "here"));
        }
        let mut consts = Vec::new();
        for g in &k.generics {
            if let Some(d) = &g.default {
                let value = match self.expr(&mut frame, d)? {
                    V::Float(x) => Some(Const::Float(x)),
                    V::Bool(b) => Some(Const::Bool(b)),
                    v => const_int(&v).map(Const::Int),
                };
                if let Some(c) = value {
                    consts.push((g.name.text.clone(), c));
                }
            }
        }
        let op = Op::Kernel {
            name: k.name.text.clone(),
            consts,
        };
        let mut types = types.into_iter();
        let first = types.next().expect("a kernel has an output");
        let launch = self.push_typed(f, op, args, first, span);
        let mut outs = vec![launch];
        for (i, ty) in types.enumerate() {
            outs.push(self.push_typed(f, Op::KernelOut(i + 1), vec![launch], ty, span));
        }
        Ok(outs)
    }
}
