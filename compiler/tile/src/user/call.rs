//! Calls in user kernels lowered to Tile IR: the primitives of `std.tile`
//! and `std.core` (`load`, `store`, `dot`, reductions, scans, reshapes,
//! `rand`, ...), their arguments put in declared order, and elementwise ops
//! inlined on tiles.

use super::*;
use crate::scan::scan_dtype;
use tessera_core::ScanKind;

impl Lower<'_> {
    /// Tile `t` with its axes reordered: result axis `i` is axis
    /// `perm[i]` of `t`.
    pub(super) fn permute(&mut self, t: Value, perm: Vec<usize>) -> Value {
        let ty = self.b.ty(t).clone();
        let shape = perm.iter().map(|p| ty.shape[*p].clone()).collect();
        self.b.op(
            crate::ir::TOp::Permute(t, perm),
            TileTy {
                shape,
                dtype: ty.dtype,
            },
        )
    }

    /// The `axis` (default: the last; negative counts from the end) and
    /// `keepdims` (default false) arguments of a reduction over a tile of
    /// `rank` axes.
    pub(super) fn axis_args(
        &mut self,
        e: &ast::Expr,
        args: &[ast::Arg],
        pos: &[&ast::Expr],
        rank: usize,
    ) -> R<(usize, bool)> {
        let rank = rank as i64;
        let axis = match Self::named(args, "axis").or(pos.get(1).copied()) {
            Some(a) => self.int_arg(a)?,
            None => rank - 1,
        };
        let axis = if axis < 0 { axis + rank } else { axis };
        if axis < 0 || axis >= rank {
            return fail(e.span, "the axis is out of range");
        }
        let keepdims = match Self::named(args, "keepdims").or(pos.get(2).copied()) {
            Some(k) => match self.expr(k)? {
                KV::Bool(b) => b,
                _ => return fail(k.span, "`keepdims` must be a constant boolean"),
            },
            None => false,
        };
        Ok((axis as usize, keepdims))
    }

    /// `argmax`/`argmin` of tile `t` along `axis`, as std.core defines
    /// them: the first index of the extreme value, or of the first NaN
    /// where the row has one; int32.
    pub(super) fn arg_extreme(
        &mut self,
        t: Value,
        axis: usize,
        keepdims: bool,
        most: bool,
    ) -> Value {
        use crate::build::INDEX;
        use crate::ir::Combine;
        let shape = self.b.ty(t).shape.clone();
        let mut kept = shape.clone();
        kept[axis] = Size::Const(1);
        let combine = if most { Combine::Max } else { Combine::Min };
        let m = self.b.reduce(combine, t, axis, Policy::Deterministic);
        let m = self.b.reshape(m, kept.clone());
        let at_extreme = self.b.binary(BinaryOp::Eq, t, m);
        let nan = self.b.binary(BinaryOp::Ne, t, t);
        let nan_count = self.b.cast(nan, Dtype::Int32);
        let any = self
            .b
            .reduce(Combine::Max, nan_count, axis, Policy::Deterministic);
        let any = self.b.reshape(any, kept.clone());
        let zero = self.b.constant(0.0, TileTy::scalar(Dtype::Int32));
        let has_nan = self.b.binary(BinaryOp::Gt, any, zero);
        let hit = self.b.select(has_nan, nan, at_extreme, Dtype::Bool);
        // Each element's index along the axis, and past-the-end elsewhere.
        let n = shape[axis].clone();
        let mut along = vec![Size::Const(1); shape.len()];
        along[axis] = n.clone();
        let idx = self.b.arange(&n);
        let idx = self.b.cast(idx, INDEX);
        let idx = self.b.reshape(idx, along);
        let past = self.b.size(&n);
        let cand = self.b.select(hit, idx, past, INDEX);
        let first = self
            .b
            .reduce(Combine::Min, cand, axis, Policy::Deterministic);
        let first = self.b.cast(first, Dtype::Int32);
        if keepdims {
            self.b.reshape(first, kept)
        } else {
            first
        }
    }

    /// The inclusive `kind` scan of a 1-d or 2-d tile along `axis`, in
    /// the scan's dtype, given back in the tile's.
    pub(super) fn tile_scan(
        &mut self,
        kind: ScanKind,
        t: Value,
        ty: &TileTy,
        axis: usize,
    ) -> Value {
        let m = if ty.shape.len() == 1 {
            self.b.reshape(t, vec![Size::Const(1), ty.shape[0].clone()])
        } else {
            t
        };
        let m = self.b.cast(m, scan_dtype(kind, ty.dtype));
        let axis = if ty.shape.len() == 1 { 1 } else { axis };
        let out = self.b.scan_tile(kind, m, axis);
        let out = self.b.cast(out, ty.dtype);
        self.b.reshape(out, ty.shape.clone())
    }

    pub(super) fn named<'e>(args: &'e [ast::Arg], name: &str) -> Option<&'e ast::Expr> {
        args.iter().find_map(|a| match &a.kind {
            ArgKind::Named(n) if n.text == name => Some(&a.value),
            _ => None,
        })
    }

    pub(super) fn positional(args: &[ast::Arg]) -> Vec<&ast::Expr> {
        args.iter()
            .filter(|a| matches!(a.kind, ArgKind::Positional))
            .map(|a| &a.value)
            .collect()
    }

    /// The arguments of a call of primitive `callee` in its declared
    /// order: the positional ones, then those named (`program_id(axis =
    /// 0)`, `arange(start = 0, end = 64)`) in their parameters' places, up
    /// to the first left out (those after it are read by name).
    pub(super) fn in_order<'e>(&self, callee: &str, args: &'e [ast::Arg]) -> Vec<&'e ast::Expr> {
        let Some(params) = self
            .program
            .resolve(callee, self.in_std)
            .map(|c| c.params())
        else {
            return Self::positional(args);
        };
        let params: Vec<&ast::Param> = params.iter().collect();
        let mut slots: Vec<Option<&ast::Expr>> = vec![None; params.len()];
        for (a, slot) in args.iter().zip(ast::arg_slots(&params, args)) {
            if let Some(i) = slot {
                slots[i] = slots[i].or(Some(&a.value));
            }
        }
        slots.into_iter().map_while(|s| s).collect()
    }

    pub(super) fn int_arg(&mut self, e: &ast::Expr) -> R<i64> {
        match self.expr(e)? {
            KV::Int(n) => Ok(n),
            _ => fail(e.span, "a compile-time integer is needed here"),
        }
    }

    /// Index tiles placed on their own axes (the outer-product rule), or,
    /// when one has two axes or more, broadcast together (numpy's rule).
    pub(super) fn index_list(&mut self, e: &ast::Expr) -> R<Vec<Value>> {
        let ExprKind::List(items) = &e.kind else {
            return fail(e.span, "an index list `[i, j]` is needed here");
        };
        let mut tiles = Vec::new();
        for it in items {
            let v = self.expr(it)?;
            let t = self.tile(v, it.span)?;
            tiles.push(self.b.cast(t, INDEX));
        }
        let ranks: Vec<usize> = tiles.iter().map(|t| self.b.ty(*t).shape.len()).collect();
        if ranks.iter().any(|r| *r >= 2) {
            let mut full = Vec::new();
            for t in &tiles {
                full = crate::build::broadcast_shapes(&full, &self.b.ty(*t).shape);
            }
            return Ok(tiles
                .into_iter()
                .zip(ranks)
                .map(|(t, r)| {
                    if r == 0 {
                        t
                    } else {
                        self.b.broadcast(t, full.clone())
                    }
                })
                .collect());
        }
        let total: usize = ranks.iter().sum();
        let mut before = 0;
        let mut out = Vec::new();
        for (t, r) in tiles.iter().zip(&ranks) {
            let mut shape = vec![Size::Const(1); total];
            for (j, s) in self.b.ty(*t).shape.clone().into_iter().enumerate() {
                shape[before + j] = s;
            }
            let shaped = if *r == 0 {
                *t
            } else {
                self.b.reshape(*t, shape)
            };
            out.push(shaped);
            before += r;
        }
        Ok(out)
    }

    pub(super) fn param_arg(&mut self, e: &ast::Expr) -> R<usize> {
        match self.expr(e)? {
            KV::Param(i) => Ok(i),
            _ => fail(e.span, "a tensor parameter is needed here"),
        }
    }

    pub(super) fn shape_arg(&mut self, e: &ast::Expr) -> R<Vec<Size>> {
        let ExprKind::List(items) = &e.kind else {
            return fail(e.span, "a shape `[a, b]` is needed here");
        };
        items
            .iter()
            .map(|i| Ok(Size::Const(self.int_arg(i)?)))
            .collect()
    }

    pub(super) fn call(
        &mut self,
        e: &ast::Expr,
        callee: &ast::Name,
        dtypes: &[(Dtype, Span)],
        args: &[ast::Arg],
    ) -> R<KV> {
        let pos = self.in_order(&callee.text, args);
        let need = |n: usize| -> R<()> {
            if pos.len() < n {
                let s = if n == 1 { "" } else { "s" };
                fail(e.span, format!("`{}` needs {n} argument{s}", callee.text))
            } else {
                Ok(())
            }
        };
        let dtype = dtypes.first().map(|d| d.0).unwrap_or(Dtype::Fp32);
        if let Some(op) = UnaryOp::from_function(&callee.text) {
            need(1)?;
            let v = self.expr(pos[0])?;
            let t = self.tile(v, pos[0].span)?;
            let t = if self.b.ty(t).dtype.is_float() || op == UnaryOp::Abs {
                t
            } else {
                self.b.cast(t, Dtype::Fp32)
            };
            return Ok(KV::Tile(self.b.unary(op, t)));
        }
        if let Some(Callable::Op(def, module)) = self.program.resolve(&callee.text, self.in_std) {
            if def.body.is_some() {
                return self.inline_op(def, module.is_some(), args, e.span);
            }
        }
        Ok(match callee.text.as_str() {
            "program_id" | "num_programs" => {
                need(1)?;
                let axis = self.int_arg(pos[0])?.clamp(0, 2) as u8;
                if callee.text == "program_id" {
                    KV::Tile(self.b.program_id(axis))
                } else {
                    let v = self.b.op(
                        crate::ir::TOp::NumPrograms(axis),
                        TileTy::scalar(Dtype::Int32),
                    );
                    KV::Tile(self.b.cast(v, INDEX))
                }
            }
            "arange" => {
                need(2)?;
                let (a, z) = (self.int_arg(pos[0])?, self.int_arg(pos[1])?);
                if z <= a {
                    return fail(e.span, "arange needs end > start");
                }
                let r = self.b.arange(&Size::Const(z - a));
                let s = self.b.int(a);
                let r = self.b.binary(BinaryOp::Add, r, s);
                // `arange<fp32>(0, B)` converts.
                KV::Tile(match dtypes.first() {
                    Some((d, _)) => self.b.cast(r, *d),
                    None => r,
                })
            }
            "cdiv" => {
                need(2)?;
                let (a, b) = (self.expr(pos[0])?, self.expr(pos[1])?);
                let bm1 = self.binary(BinaryOp::Sub, b, KV::Int(1), e.span)?;
                let s = self.binary(BinaryOp::Add, a, bm1, e.span)?;
                self.binary(BinaryOp::Div, s, b, e.span)?
            }
            "load" => {
                need(2)?;
                let p = self.param_arg(pos[0])?;
                let idx = self.index_list(pos[1])?;
                let mask = match Self::named(args, "mask").or(pos.get(2).copied()) {
                    Some(m) => {
                        let v = self.expr(m)?;
                        let t = self.tile(v, m.span)?;
                        Some(self.b.cast(t, Dtype::Bool))
                    }
                    None => None,
                };
                let other = match Self::named(args, "other") {
                    Some(o) => match self.expr(o)? {
                        KV::Int(n) => Some(n as f64),
                        KV::Float(x) => Some(x),
                        _ => return fail(o.span, "`other` must be a constant"),
                    },
                    None => None,
                };
                let t = self.b.load(p, idx, mask, other.unwrap_or(0.0));
                if let (Some(m), None) = (mask, other) {
                    if !self.b.ty(t).dtype.is_float() {
                        self.masked_reads.insert(t, m);
                    }
                }
                KV::Tile(t)
            }
            "store" | "atomic_add" | "atomic_max" | "atomic_min" => {
                let atomic = match callee.text.as_str() {
                    "atomic_add" => Some(Combine::Sum),
                    "atomic_max" => Some(Combine::Max),
                    "atomic_min" => Some(Combine::Min),
                    _ => None,
                };
                need(3)?;
                let p = self.param_arg(pos[0])?;
                let idx = self.index_list(pos[1])?;
                let v = self.expr(pos[2])?;
                let v = self.tile(v, pos[2].span)?;
                let mask = match Self::named(args, "mask").or(pos.get(3).copied()) {
                    Some(m) => {
                        let mv = self.expr(m)?;
                        let t = self.tile(mv, m.span)?;
                        Some(self.b.cast(t, Dtype::Bool))
                    }
                    None => None,
                };
                let v = match atomic {
                    // The value combines in the destination's dtype, as a
                    // store rounds it.
                    Some(_) => {
                        let dtype = self.b.param_dtype(p);
                        self.b.cast(v, dtype)
                    }
                    None => v,
                };
                self.b.store(p, idx, v, mask, atomic);
                KV::Int(0)
            }
            "dot" => {
                need(2)?;
                let mut t = Vec::new();
                for a in &pos[..2] {
                    let v = self.expr(a)?;
                    t.push(self.tile(v, a.span)?);
                }
                let acc = match Self::named(args, "acc").or(pos.get(2).copied()) {
                    Some(a) => {
                        let v = self.expr(a)?;
                        self.tile(v, a.span)?
                    }
                    // `dot(a, b)`: the product alone, from a zero
                    // accumulator of fp32 (int32 for 8-bit integers).
                    None => {
                        let (ta, tb) = (self.b.ty(t[0]).clone(), self.b.ty(t[1]).clone());
                        let (Some(m), Some(n)) = (ta.shape.first(), tb.shape.get(1)) else {
                            return fail(e.span, "`dot` multiplies two 2-D tiles");
                        };
                        let dtype = ta.dtype.dot_accumulator();
                        let shape = vec![m.clone(), n.clone()];
                        self.b.constant(0.0, TileTy { shape, dtype })
                    }
                };
                // `numerics matmul = tf32`: fp32 operands rounded to tf32
                // (tensor cores on the GPU path), as an op's `@`.
                let tf32 = self
                    .program
                    .numerics(&self.k.name.text)
                    .is_some_and(|n| n.matmul == tessera_sema::MatmulPrecision::Tf32)
                    && self.b.ty(t[0]).dtype == Dtype::Fp32;
                KV::Tile(self.b.dot(t[0], t[1], acc, tf32))
            }
            "sort" | "argsort" => {
                need(1)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let rank = self.b.ty(t).shape.len() as i64;
                let axis = match Self::named(args, "axis").or(pos.get(1).copied()) {
                    Some(a) => self.int_arg(a)?,
                    None => rank - 1,
                };
                let axis = if axis < 0 { axis + rank } else { axis };
                if rank < 1 || axis < 0 || axis >= rank {
                    return fail(e.span, "the axis is out of range");
                }
                let descending = match Self::named(args, "descending").or(pos.get(2).copied()) {
                    Some(d) => match self.expr(d)? {
                        KV::Bool(b) => b,
                        _ => return fail(d.span, "`descending` must be a constant boolean"),
                    },
                    None => false,
                };
                // Sorted along the last axis: another one swapped there
                // and back.
                let (axis, last) = (axis as usize, rank as usize - 1);
                let mut perm: Vec<usize> = (0..=last).collect();
                perm.swap(axis, last);
                let t = if axis == last {
                    t
                } else {
                    self.permute(t, perm.clone())
                };
                let (values, places) = self.b.sort(t, descending);
                let r = if callee.text == "sort" {
                    values
                } else {
                    places
                };
                KV::Tile(if axis == last {
                    r
                } else {
                    self.permute(r, perm)
                })
            }
            "cumsum" | "cumprod" | "cummax" | "cummin" | "logcumsumexp" => {
                let name = callee.text.as_str();
                let kind = ScanKind::from_name(name).expect("a scan's name");
                need(1)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let t = match kind {
                    ScanKind::Sum | ScanKind::Prod => self.widen_for_sum(t),
                    _ => t,
                };
                let ty = self.b.ty(t).clone();
                let rank = ty.shape.len() as i64;
                let axis = match Self::named(args, "axis").or(pos.get(1).copied()) {
                    Some(a) => self.int_arg(a)?,
                    None => rank - 1,
                };
                let axis = if axis < 0 { axis + rank } else { axis };
                if !(1..=2).contains(&rank) || axis < 0 || axis >= rank {
                    return fail(
                        e.span,
                        &format!(
                            "`{name}` in a kernel takes a 1-d or 2-d tile and one of its axes"
                        ),
                    );
                }
                KV::Tile(self.tile_scan(kind, t, &ty, axis as usize))
            }
            "rand" => {
                need(2)?;
                let seed = match self.expr(pos[0])? {
                    KV::Int(seed) => Seed::Const(seed as u64),
                    // Known when the kernel runs: one integer in a register.
                    other => {
                        let k = self.tile(other, pos[0].span)?;
                        let t = self.b.ty(k);
                        if !t.shape.is_empty() || !t.dtype.is_int() {
                            return fail(
                                pos[0].span,
                                "the seed of `rand` is one integer, not a tile",
                            );
                        }
                        Seed::Value(self.b.cast(k, INDEX))
                    }
                };
                let offsets = self.expr(pos[1])?;
                let offsets = self.tile(offsets, pos[1].span)?;
                let counter = self.b.cast(offsets, crate::build::INDEX);
                let ty = TileTy {
                    shape: self.b.ty(counter).shape.clone(),
                    dtype: Dtype::Fp32,
                };
                let r = self.b.op(crate::ir::TOp::Rand { seed, counter }, ty);
                KV::Tile(match dtype.float_format() {
                    // `rand<bf16>`: rounded, and kept below 1 as elsewhere.
                    Some(format) if dtype != Dtype::Fp32 && dtype != Dtype::Fp64 => {
                        let r = self.b.cast(r, dtype);
                        let shape = self.b.ty(r).shape.clone();
                        let below = self.b.constant(format.pred_one(), TileTy { shape, dtype });
                        self.b.binary(BinaryOp::Min, r, below)
                    }
                    Some(_) => self.b.cast(r, dtype),
                    None => r,
                })
            }
            "reshape" => {
                need(2)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let mut shape = self.shape_arg(pos[1])?;
                let count = |s: &[Size]| s.iter().map(Size::as_const).product::<Option<i64>>();
                let from = self.b.ty(t).shape.clone();
                // One `-1` is the size the others leave.
                if let Some(at) = shape.iter().position(|s| s.as_const() == Some(-1)) {
                    shape[at] = Size::Const(1);
                    if let (Some(n), Some(rest)) = (count(&from), count(&shape)) {
                        if rest > 0 && n % rest == 0 {
                            shape[at] = Size::Const(n / rest);
                        }
                    }
                }
                if count(&from) != count(&shape) || count(&shape).is_none() {
                    return fail(
                        pos[1].span,
                        "a tile keeps its element count and constant shape in a reshape",
                    );
                }
                KV::Tile(self.b.reshape(t, shape))
            }
            "broadcast_to" => {
                need(2)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let shape = self.shape_arg(pos[1])?;
                KV::Tile(self.b.broadcast(t, shape))
            }
            "unsqueeze" | "expand_dims" | "squeeze" => {
                need(2)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let mut shape = self.b.ty(t).shape.clone();
                let adds = callee.text != "squeeze";
                let rank = shape.len() as i64 + i64::from(adds);
                let axis = self.int_arg(pos[1])?;
                let at = if axis < 0 { axis + rank } else { axis };
                if !(0..rank).contains(&at) {
                    return fail(pos[1].span, "the axis is out of range");
                }
                if adds {
                    shape.insert(at as usize, Size::Const(1));
                } else {
                    if shape[at as usize] != Size::Const(1) {
                        return fail(pos[1].span, "only an axis of extent 1 goes");
                    }
                    shape.remove(at as usize);
                }
                KV::Tile(self.b.reshape(t, shape))
            }
            "zeros" | "full" => {
                need(1)?;
                let shape = self.shape_arg(pos[0])?;
                let value = if callee.text == "full" {
                    need(2)?;
                    match self.expr(pos[1])? {
                        KV::Int(n) => n as f64,
                        KV::Float(x) => x,
                        _ => return fail(pos[1].span, "the fill value must be a constant"),
                    }
                } else {
                    0.0
                };
                KV::Tile(self.b.constant(value, TileTy { shape, dtype }))
            }
            "type_as" => {
                need(2)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let like = self.expr(pos[1])?;
                let like = self.tile(like, pos[1].span)?;
                let to = self.b.ty(like).dtype;
                KV::Tile(self.b.cast(t, to))
            }
            "maximum" | "minimum" => {
                need(2)?;
                let (a, b) = (self.expr(pos[0])?, self.expr(pos[1])?);
                let op = if callee.text == "maximum" {
                    BinaryOp::Max
                } else {
                    BinaryOp::Min
                };
                self.binary(op, a, b, e.span)?
            }
            "where" => {
                need(3)?;
                let c = self.expr(pos[0])?;
                // A constant condition (an inlined op's `mode == "tanh"`)
                // picks one of two tiles.
                if let KV::Bool(pick) = c {
                    let (a, b) = (self.expr(pos[1])?, self.expr(pos[2])?);
                    if let (KV::Tile(_), KV::Tile(_)) = (a, b) {
                        return Ok(if pick { a } else { b });
                    }
                    let (a, b, d) = self.tile_pair(a, b, e.span)?;
                    let c = self.tile(KV::Bool(pick), pos[0].span)?;
                    return Ok(KV::Tile(self.b.select(c, a, b, d)));
                }
                let c = self.tile(c, pos[0].span)?;
                let c = self.b.cast(c, Dtype::Bool);
                let (a, b) = (self.expr(pos[1])?, self.expr(pos[2])?);
                let (a, b, d) = self.tile_pair(a, b, e.span)?;
                KV::Tile(self.b.select(c, a, b, d))
            }
            "pow" => {
                need(2)?;
                let (a, b) = (self.expr(pos[0])?, self.expr(pos[1])?);
                self.binary(BinaryOp::Pow, a, b, e.span)?
            }
            "matmul" => {
                need(2)?;
                let (a, b) = (self.expr(pos[0])?, self.expr(pos[1])?);
                self.matmul((a, pos[0].span), (b, pos[1].span), e.span)?
            }
            "transpose" | "permute" => {
                need(1)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let rank = self.b.ty(t).shape.len();
                let perm = if callee.text == "transpose" {
                    if rank < 2 {
                        return fail(e.span, "`transpose` needs a tile of 2 or more axes");
                    }
                    // torch's `transpose(x, dim0, dim1)`; the last two by
                    // default.
                    let mut axis = |i: usize, default: i64| -> R<usize> {
                        let a = match pos.get(i) {
                            Some(d) => self.int_arg(d)?,
                            None => default,
                        };
                        let a = if a < 0 { a + rank as i64 } else { a };
                        usize::try_from(a)
                            .ok()
                            .filter(|a| *a < rank)
                            .map_or_else(|| fail(e.span, "the axis is out of range"), Ok)
                    };
                    let (a, b) = (axis(1, -2)?, axis(2, -1)?);
                    let mut p: Vec<usize> = (0..rank).collect();
                    p.swap(a, b);
                    p
                } else {
                    let dims = Self::named(args, "dims").or(pos.get(1).copied());
                    let Some(ExprKind::List(items)) = dims.map(|d| &d.kind) else {
                        return fail(e.span, "`permute` needs its axes as a list: `[1, 0]`");
                    };
                    let mut p = Vec::new();
                    for i in items {
                        let a = self.int_arg(i)?;
                        let a = if a < 0 { a + rank as i64 } else { a };
                        p.push(usize::try_from(a).unwrap_or(usize::MAX));
                    }
                    let mut sorted = p.clone();
                    sorted.sort_unstable();
                    if sorted != (0..rank).collect::<Vec<_>>() {
                        return fail(
                            dims.map_or(e.span, |d| d.span),
                            format!("not a permutation of the tile's {rank} axes"),
                        );
                    }
                    p
                };
                KV::Tile(self.permute(t, perm))
            }
            "argmax" | "argmin" => {
                need(1)?;
                let v = self.expr(pos[0])?;
                let t = self.tile(v, pos[0].span)?;
                let (axis, keepdims) = self.axis_args(e, args, &pos, self.b.ty(t).shape.len())?;
                KV::Tile(self.arg_extreme(t, axis, keepdims, callee.text == "argmax"))
            }
            "sum" | "max" | "min" | "mean" | "prod" => {
                need(1)?;
                let mut v = self.expr(pos[0])?;
                // A scalar parameter is its value.
                if matches!(v, KV::Param(i) if self.b.param_rank(i) == 0) {
                    v = KV::Tile(self.tile(v, pos[0].span)?);
                }
                let scalar = match v {
                    KV::Int(_) | KV::Float(_) => true,
                    KV::Tile(t) => self.b.ty(t).shape.is_empty(),
                    _ => false,
                };
                if scalar && matches!(callee.text.as_str(), "max" | "min") {
                    // Of two scalars, the larger or smaller (Triton's
                    // `min(a, b)`); of one, itself.
                    let Some(other) = pos.get(1) else {
                        return Ok(v);
                    };
                    let op = if callee.text == "max" {
                        BinaryOp::Max
                    } else {
                        BinaryOp::Min
                    };
                    let b = self.expr(other)?;
                    return self.binary(op, v, b, e.span);
                }
                let t = self.tile(v, pos[0].span)?;
                let (axis, keepdims) = self.axis_args(e, args, &pos, self.b.ty(t).shape.len())?;
                let t = if callee.text == "sum" {
                    self.widen_for_sum(t)
                } else {
                    t
                };
                let combine = match callee.text.as_str() {
                    "sum" | "mean" => crate::ir::Combine::Sum,
                    "max" => crate::ir::Combine::Max,
                    "prod" => crate::ir::Combine::Prod,
                    _ => crate::ir::Combine::Min,
                };
                let mut shape = self.b.ty(t).shape.clone();
                let mut r = self.b.reduce(combine, t, axis, Policy::Deterministic);
                if callee.text == "mean" {
                    let n = shape[axis].as_const().unwrap_or(1) as f64;
                    let dtype = self.b.ty(r).dtype;
                    let n = self.b.constant(n, TileTy::scalar(dtype));
                    r = self.b.binary(BinaryOp::Div, r, n);
                }
                if keepdims {
                    // The reduced axis stays, of extent 1.
                    shape[axis] = Size::Const(1);
                    KV::Tile(self.b.reshape(r, shape))
                } else {
                    KV::Tile(r)
                }
            }
            other => {
                return fail(
                    callee.span,
                    format!("`{other}` cannot be called in a kernel on this backend"),
                )
            }
        })
    }

    /// A call of op `def` (elementwise: `let`s and a `return`, as `check`
    /// ensures) inlined on tiles: its parameters bound to the arguments
    /// (or their defaults), its body seeing nothing of the kernel's names.
    /// `def` inlined on `args` (evaluated here); its body's calls mean the
    /// stdlib's ops where it is one (`std`).
    pub(super) fn inline_op(
        &mut self,
        def: &ast::OpDef,
        std: bool,
        args: &[ast::Arg],
        span: Span,
    ) -> R<KV> {
        let pos = Self::positional(args);
        let mut scope = HashMap::new();
        for (i, p) in def.params.iter().enumerate() {
            let arg = Self::named(args, &p.name.text).or(pos.get(i).copied());
            let v = match (arg, &p.default) {
                (Some(a), _) => self.expr(a)?,
                (None, Some(d)) => self.expr(d)?,
                (None, None) => {
                    return fail(
                        span,
                        format!("`{}` needs its argument `{}`", def.name.text, p.name.text),
                    )
                }
            };
            scope.insert(p.name.text.clone(), v);
        }
        let Some(body) = &def.body else {
            return fail(span, format!("`{}` has no body", def.name.text));
        };
        let outer = std::mem::replace(&mut self.env, vec![scope]);
        let consts = std::mem::take(&mut self.consts);
        let dims = std::mem::take(&mut self.dims);
        let in_std = std::mem::replace(&mut self.in_std, std);
        let mut result = fail(span, format!("`{}` returns nothing", def.name.text));
        for s in &body.stmts {
            match &s.kind {
                StmtKind::Return(Some(v)) => {
                    result = self.expr(v);
                    break;
                }
                _ => {
                    if let Err(e) = self.stmt(s) {
                        result = Err(e);
                        break;
                    }
                }
            }
        }
        self.env = outer;
        self.consts = consts;
        self.dims = dims;
        self.in_std = in_std;
        result
    }

    /// `t` as int32 when it is boolean or a narrow integer (`sum` and
    /// `cumsum` count the trues and add int8 in int32, as numpy's and
    /// torch's do: `Dtype::sum_result`), else `t`.
    pub(super) fn widen_for_sum(&mut self, t: Value) -> Value {
        let (d, wide) = (self.b.ty(t).dtype, self.b.ty(t).dtype.sum_result());
        if d != wide {
            self.b.cast(t, wide)
        } else {
            t
        }
    }
}
