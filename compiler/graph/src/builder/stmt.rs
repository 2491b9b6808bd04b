//! Statements of op bodies: blocks, `let`, assignments, `for` loops unrolled, `if` on compile-time conditions, `return`.

use super::*;

impl Builder<'_, '_> {
    pub(super) fn block(&mut self, f: &mut Frame, b: &ast::Block) -> R<Flow> {
        f.scopes.push(HashMap::new());
        let mut flow = Flow::Normal;
        for s in &b.stmts {
            flow = self.stmt(f, s)?;
            if matches!(flow, Flow::Return(_)) {
                break;
            }
        }
        f.scopes.pop();
        Ok(flow)
    }

    pub(super) fn stmt(&mut self, f: &mut Frame, s: &ast::Stmt) -> R<Flow> {
        match &s.kind {
            StmtKind::Let { name, value, .. } => {
                let v = self.expr(f, value)?;
                f.bind(&name.text, v);
            }
            StmtKind::LetTuple { names, value } => {
                let outer = self.tuple_call.replace((value.span, names.len()));
                let v = self.expr(f, value);
                self.tuple_call = outer;
                let parts = match v? {
                    V::List(parts) if parts.len() == names.len() => parts,
                    _ => {
                        return Err(unsupported(
                            self.span(f, value.span),
                            format!("this does not give {} parts", names.len()),
                            "bound by `let (...)`",
                        ))
                    }
                };
                for (name, part) in names.iter().zip(parts) {
                    if name.text != "_" {
                        f.bind(&name.text, part);
                    }
                }
            }
            StmtKind::Assign { target, op, value } => {
                let v = self.expr(f, value)?;
                let v = match op.elementwise() {
                    None => v,
                    Some(bin) => {
                        let old = f.local(&target.text).cloned().unwrap_or(V::Unit);
                        self.binary(f, bin, old, v, s.span)?
                    }
                };
                for scope in f.scopes.iter_mut().rev() {
                    if let Some(slot) = scope.get_mut(&target.text) {
                        *slot = v;
                        break;
                    }
                }
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.expr(f, e)?,
                    None => V::Unit,
                };
                return Ok(Flow::Return(v));
            }
            StmtKind::Expr(e) => {
                self.expr(f, e)?;
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (cond, block) in branches {
                    match self.expr(f, cond)? {
                        V::Bool(true) => return self.block(f, block),
                        V::Bool(false) => {}
                        _ => {
                            return Err(Box::new(
                                Diagnostic::error(
                                    codes::E0700,
                                    self.span(f, cond.span),
                                    "an `if` in an op needs a condition known at compile time",
                                )
                                .with_label("depends on tensor data")
                                .with_help("use `where(cond, a, b)` to select elementwise"),
                            ))
                        }
                    }
                }
                if let Some(block) = otherwise {
                    return self.block(f, block);
                }
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let (lo, hi) = (self.expr(f, start)?, self.expr(f, end)?);
                let step = match step {
                    Some(e) => {
                        const_int(&self.expr(f, e)?)
                            .filter(|s| *s > 0)
                            .ok_or_else(|| {
                                unsupported(
                                    self.span(f, e.span),
                                    "a loop step must be a positive constant",
                                    "not one",
                                )
                            })?
                    }
                    None => 1,
                };
                let (Some(lo), Some(hi)) = (const_int(&lo), const_int(&hi)) else {
                    return Err(unsupported(
                        self.span(f, s.span),
                        "a `for` loop in an op needs bounds known at compile time",
                        "bounds not constant",
                    ));
                };
                if hi - lo > MAX_UNROLL {
                    return Err(unsupported(
                        self.span(f, s.span),
                        format!(
                            "a `for` loop in an op is unrolled; {} iterations is too many",
                            hi - lo
                        ),
                        format!("the limit is {MAX_UNROLL}").as_str(),
                    ));
                }
                for i in (lo..hi).step_by(step as usize) {
                    f.scopes
                        .push(HashMap::from([(var.text.clone(), V::Int(i))]));
                    let flow = self.block(f, body)?;
                    f.scopes.pop();
                    if let Flow::Return(v) = flow {
                        return Ok(Flow::Return(v));
                    }
                }
            }
            StmtKind::Numerics(_) | StmtKind::Empty => {}
            // The checker keeps these to host code (E0109).
            StmtKind::Break | StmtKind::Continue | StmtKind::While { .. } | StmtKind::Error => {
                return Err(unsupported(s.span, "erroneous statement", "here"));
            }
        }
        Ok(Flow::Normal)
    }

    /// `assert(cond, message)` in an op: its condition, made of sizes and
    /// attributes, is known here, at the sizes of the call; false is E0215
    /// at the user's call (the stdlib's frames take its span).
    pub(super) fn assert(&mut self, f: &Frame, get: &dyn Fn(&str) -> V, span: Span) -> R<V> {
        let message = match get("message") {
            V::Str(s) => s,
            _ => String::new(),
        };
        match get("cond") {
            V::Bool(true) => Ok(V::Unit),
            V::Bool(false) => Err(Box::new(
                Diagnostic::error(codes::E0215, self.span(f, span), message)
                    .with_label("at the sizes and attributes of this call"),
            )),
            _ => Err(unsupported(
                self.span(f, span),
                "an assert's condition must be known when the op compiles",
                "not known at these sizes",
            )),
        }
    }
}
