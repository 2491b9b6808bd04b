//! The interpreter of one program: runs a kernel body on tiles, with an
//! environment indexed by SSA value.
//!
//! Every value in the environment has the element count and class of its
//! type (checked when it is defined), so the operations can rely on their
//! operands' shapes. Malformed IR (a wrong arity, an undefined value, a type
//! mismatch) is an error, never a panic.

use super::buffer::GlobalBuf;
use super::elementwise::{self, Arg};
use super::value::{check_fits, Elems, Scalar, TileVal, ValInfo};
use super::{dot, fail, memory, reduction, R};
use crate::EvalError;
use tessera_tile::{Block, Inst, Kernel, Seed, TOp, Value};

/// What every program of a launch shares: the kernel, the types of its
/// values at this launch, its buffers and the grid.
pub(crate) struct Ctx<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// The type of every value, evaluated for this launch.
    pub info: Vec<ValInfo>,
    /// One buffer per kernel parameter.
    pub params: &'a [&'a GlobalBuf],
    /// The value of every `size` operation, by result value.
    pub sizes: Vec<Option<i64>>,
    /// Programs along each grid axis.
    pub grid: [i64; 3],
}

/// The short name of an operation, for messages.
fn op_name(op: &TOp) -> &'static str {
    match op {
        TOp::ProgramId(_) => "program_id",
        TOp::NumPrograms(_) => "num_programs",
        TOp::Size(_) => "size",
        TOp::Const(_) => "const",
        TOp::Arange(_) => "arange",
        TOp::Unary(..) => "unary",
        TOp::Binary(..) => "binary",
        TOp::Rand { .. } => "rand",
        TOp::Select(..) => "select",
        TOp::Cast(_) => "cast",
        TOp::Broadcast(_) => "broadcast",
        TOp::Reshape(_) => "reshape",
        TOp::Permute(..) => "permute",
        TOp::Load { .. } => "load",
        TOp::Store { atomic: None, .. } => "store",
        TOp::Store {
            atomic: Some(_), ..
        } => "atomic",
        TOp::Dot { .. } => "dot",
        TOp::Reduce { .. } => "reduce",
        TOp::KahanAdd { .. } => "kahan_add",
        TOp::Sort { .. } => "sort",
        TOp::Stage { .. } => "stage",
        TOp::Barrier => "barrier",
        TOp::Assert(..) => "assert",
        TOp::For { .. } => "for",
        TOp::If { .. } => "if",
        TOp::Yield(_) => "yield",
    }
}

/// The single result of an instruction.
fn one(inst: &Inst) -> R<Value> {
    match inst.results[..] {
        [r] => Ok(r),
        _ => fail(format!(
            "`{}` has {} results, not 1",
            op_name(&inst.op),
            inst.results.len()
        )),
    }
}

/// A program's state: its index in the grid and its values.
pub(crate) struct Program<'c, 'a> {
    /// The launch.
    ctx: &'c Ctx<'a>,
    /// This program's index along each grid axis.
    pid: [i64; 3],
    /// The value of each SSA value, once defined.
    env: Vec<Option<TileVal>>,
}

impl<'c, 'a> Program<'c, 'a> {
    /// An interpreter for the programs of a launch (reusable across them).
    pub fn new(ctx: &'c Ctx<'a>) -> Program<'c, 'a> {
        Program {
            ctx,
            pid: [0; 3],
            env: vec![None; ctx.info.len()],
        }
    }

    /// Runs the program at grid index `pid`.
    pub fn run(&mut self, pid: [i64; 3]) -> R<()> {
        self.pid = pid;
        self.env.iter_mut().for_each(|v| *v = None);
        let body = &self.ctx.kernel.body;
        if !body.args.is_empty() {
            return fail("the kernel body takes arguments");
        }
        self.block(body).map(|_| ())
    }

    /// The type of `v`.
    fn info(&self, v: Value) -> R<&'c ValInfo> {
        self.ctx
            .info
            .get(v.index())
            .map_or_else(|| fail(format!("value {v} is not declared")), Ok)
    }

    /// The value of `v`.
    fn get(&self, v: Value) -> R<&TileVal> {
        match self.env.get(v.index()) {
            Some(Some(t)) => Ok(t),
            Some(None) => fail(format!("value {v} is used before it is defined")),
            None => fail(format!("value {v} is not declared")),
        }
    }

    /// The value of `v` with its type.
    fn arg(&self, v: Value) -> R<Arg<'_>> {
        Ok((self.get(v)?, self.info(v)?))
    }

    /// An integer scalar operand.
    fn int(&self, v: Value) -> R<i64> {
        match self.get(v)?.only() {
            Some(Scalar::Int(x)) => Ok(x),
            _ => fail(format!("{v} is not an integer scalar")),
        }
    }

    /// Defines `v` as `t`, which must fit its type.
    fn set(&mut self, v: Value, t: TileVal) -> R<()> {
        check_fits(&t, self.info(v)?, &|| format!("value {v}"))?;
        self.env[v.index()] = Some(t);
        Ok(())
    }

    /// Defines `v` as the scalar `s` converted to its type (splatted if the
    /// type has several elements).
    fn set_scalar(&mut self, v: Value, s: Scalar) -> R<()> {
        let info = self.info(v)?;
        self.set(v, TileVal::splat(s.cast(info.num, true), info.len))
    }

    /// Defines `dst` as `t`, the value of `src`; their types must agree.
    fn carry(&mut self, dst: Value, src: Value, t: TileVal) -> R<()> {
        let (d, s) = (self.info(dst)?, self.info(src)?);
        if d != s {
            return fail(format!(
                "{src} of type {}{:?} flows into {dst} of type {}{:?}",
                s.num.dtype, s.shape, d.num.dtype, d.shape
            ));
        }
        self.set(dst, t)
    }

    /// Copies of the values of `vs`.
    fn values(&self, vs: &[Value]) -> R<Vec<TileVal>> {
        vs.iter().map(|v| self.get(*v).cloned()).collect()
    }

    /// Runs a block; returns the operands of its final `yield`, if any.
    fn block(&mut self, b: &'a Block) -> R<Option<&'a [Value]>> {
        for (k, inst) in b.insts.iter().enumerate() {
            if let TOp::Yield(vs) = &inst.op {
                if k + 1 != b.insts.len() {
                    return fail("`yield` before the end of a block");
                }
                return Ok(Some(vs));
            }
            // An instruction with a source position is reported there; one
            // without is named by its Tile IR value.
            self.inst(inst).map_err(|e| match inst.op {
                TOp::For { .. } | TOp::If { .. } => e,
                _ if inst.span != Default::default() => e.at(inst.span),
                _ => {
                    let defs: Vec<String> = inst.results.iter().map(Value::to_string).collect();
                    let at = if defs.is_empty() {
                        String::new()
                    } else {
                        format!(" defining {}", defs.join(", "))
                    };
                    e.within(format_args!("`{}`{at}", op_name(&inst.op)))
                }
            })?;
        }
        Ok(None)
    }

    /// Runs one instruction.
    fn inst(&mut self, inst: &'a Inst) -> R<()> {
        match &inst.op {
            TOp::ProgramId(a) | TOp::NumPrograms(a) => {
                let r = one(inst)?;
                let axis = usize::from(*a);
                if axis >= 3 {
                    return fail(format!("there is no grid axis {axis}"));
                }
                let x = if matches!(inst.op, TOp::ProgramId(_)) {
                    self.pid[axis]
                } else {
                    self.ctx.grid[axis]
                };
                self.set_scalar(r, Scalar::Int(x))
            }
            TOp::Size(s) => {
                let r = one(inst)?;
                match self.ctx.sizes.get(r.index()).copied().flatten() {
                    Some(x) => self.set_scalar(r, Scalar::Int(x)),
                    None => fail(format!("size `{s}` was not evaluated")),
                }
            }
            TOp::Const(c) => {
                let r = one(inst)?;
                let info = self.info(r)?;
                self.set(r, TileVal::splat(Scalar::from_f64(*c, info.num), info.len))
            }
            TOp::Arange(start) => {
                let r = one(inst)?;
                let info = self.info(r)?;
                if info.shape.len() != 1 {
                    return fail("`arange` of a tile that is not 1-d");
                }
                let end = i64::try_from(info.len)
                    .ok()
                    .and_then(|n| start.checked_add(n))
                    .ok_or_else(|| EvalError::new("`arange` overflows"))?;
                let t = TileVal::Int(Elems::from_vec((*start..end).collect()));
                let t = elementwise::finish(t, info);
                self.set(r, t)
            }
            TOp::Unary(op, a) => {
                let r = one(inst)?;
                let t = elementwise::unary(*op, self.arg(*a)?, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Binary(op, a, b) => {
                let r = one(inst)?;
                let t = elementwise::binary(*op, self.arg(*a)?, self.arg(*b)?, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Rand { seed, counter } => {
                let r = one(inst)?;
                let key = match seed {
                    Seed::Const(k) => *k,
                    Seed::Value(v) => self.int(*v)? as u64,
                };
                let t = elementwise::rand(key, self.arg(*counter)?, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Select(c, a, b) => {
                let r = one(inst)?;
                let (c, a, b) = (self.arg(*c)?, self.arg(*a)?, self.arg(*b)?);
                let t = elementwise::select(c, a, b, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Cast(a) => {
                let r = one(inst)?;
                let t = elementwise::cast(self.arg(*a)?, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Broadcast(a) => {
                let r = one(inst)?;
                let t = elementwise::broadcast(self.arg(*a)?, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Reshape(a) => {
                let r = one(inst)?;
                let t = elementwise::reshape(self.arg(*a)?, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Permute(a, perm) => {
                let r = one(inst)?;
                let t = elementwise::permute(self.arg(*a)?, perm, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Load {
                param,
                index,
                mask,
                other,
            } => {
                let r = one(inst)?;
                let buf = self.param(*param)?;
                let index = index.iter().map(|v| self.arg(*v)).collect::<R<Vec<_>>>()?;
                let mask = mask.map(|m| self.arg(m)).transpose()?;
                let t = memory::load(buf, &index, mask, *other, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Store {
                param,
                index,
                value,
                mask,
                atomic,
            } => {
                if !inst.results.is_empty() {
                    return fail("`store` has results");
                }
                let buf = self.param(*param)?;
                let index = index.iter().map(|v| self.arg(*v)).collect::<R<Vec<_>>>()?;
                let mask = mask.map(|m| self.arg(m)).transpose()?;
                match atomic {
                    None => memory::store(buf, &index, self.arg(*value)?, mask),
                    Some(c) => memory::atomic(buf, &index, self.arg(*value)?, mask, *c),
                }
            }
            TOp::Dot {
                a, b, acc, tf32, ..
            } => {
                let r = one(inst)?;
                let (a, b, acc) = (self.arg(*a)?, self.arg(*b)?, self.arg(*acc)?);
                let t = dot::dot(a, b, acc, *tf32, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::Reduce {
                combine,
                value,
                axis,
                policy,
            } => {
                let r = one(inst)?;
                let t =
                    reduction::reduce(*combine, self.arg(*value)?, *axis, *policy, self.info(r)?)?;
                self.set(r, t)
            }
            TOp::KahanAdd { sum, comp, x } => {
                let [s, c] = inst.results[..] else {
                    return fail("`kahan_add` does not have 2 results");
                };
                let outs = (self.info(s)?, self.info(c)?);
                let (ts, tc) =
                    reduction::kahan_add(self.arg(*sum)?, self.arg(*comp)?, self.arg(*x)?, outs)?;
                self.set(s, ts)?;
                self.set(c, tc)
            }
            TOp::Sort { value, descending } => {
                let [s, i] = inst.results[..] else {
                    return fail("`sort` does not have 2 results");
                };
                let outs = (self.info(s)?, self.info(i)?);
                let (ts, ti) = super::sort::sort(self.arg(*value)?, *descending, outs)?;
                self.set(s, ts)?;
                self.set(i, ti)
            }
            TOp::Stage { shared, value } => {
                let r = one(inst)?;
                if *shared >= self.ctx.kernel.shared.len() {
                    return fail(format!("there is no shared buffer {shared}"));
                }
                let t = self.get(*value)?.clone();
                self.carry(r, *value, t)
            }
            TOp::Assert(c, check, about) => {
                let failed = match self.get(*c)? {
                    TileVal::Bool(e) => e.as_slice().iter().position(|b| !*b),
                    _ => return fail("`assert` of a tile that is not bool"),
                };
                let Some(lane) = failed else {
                    return Ok(());
                };
                // Name the index that failed (that of the first failing
                // lane, or the first outside its extent where the index
                // tile is broadcast), when the check says which it is.
                if let [i, n] = about[..] {
                    if let (TileVal::Int(ix), TileVal::Int(n)) = (self.get(i)?, self.get(n)?) {
                        let n = n.as_slice().first().copied().unwrap_or(0);
                        let ix = ix.as_slice();
                        let at = ix.get(lane).filter(|k| !(0..n).contains(*k));
                        if let Some(k) = at.or_else(|| ix.iter().find(|k| !(0..n).contains(*k))) {
                            return fail(format!(
                                "index {k} is out of range for an axis of {n}: {}",
                                check.failure()
                            ));
                        }
                    }
                }
                fail(check.failure())
            }
            TOp::Barrier => {
                if inst.results.is_empty() {
                    Ok(())
                } else {
                    fail("`barrier` has results")
                }
            }
            TOp::For {
                lo,
                hi,
                step,
                init,
                body,
            } => self.for_loop(inst, (*lo, *hi, *step), init, body),
            TOp::If { cond, then, els } => {
                let c = match self.get(*cond)?.only() {
                    Some(Scalar::Bool(c)) => c,
                    Some(Scalar::Int(x)) => x != 0,
                    _ => return fail(format!("the condition {cond} is not a boolean scalar")),
                };
                let arm = if c { then } else { els };
                if !arm.args.is_empty() {
                    return fail("an `if` arm takes arguments");
                }
                let ys = self.block(arm)?.unwrap_or(&[]);
                if ys.len() != inst.results.len() {
                    return fail(format!(
                        "an `if` arm yields {} values for {} results",
                        ys.len(),
                        inst.results.len()
                    ));
                }
                let vals = self.values(ys)?;
                for ((r, y), t) in inst.results.iter().zip(ys).zip(vals) {
                    self.carry(*r, *y, t)?;
                }
                Ok(())
            }
            TOp::Yield(_) => fail("`yield` outside the end of a block"),
        }
    }

    /// The buffer of kernel parameter `i`.
    fn param(&self, i: usize) -> R<&'a GlobalBuf> {
        self.ctx
            .params
            .get(i)
            .copied()
            .map_or_else(|| fail(format!("there is no parameter {i}")), Ok)
    }

    /// Runs a `for` loop.
    fn for_loop(
        &mut self,
        inst: &'a Inst,
        (lo, hi, step): (Value, Value, Value),
        init: &'a [Value],
        body: &'a Block,
    ) -> R<()> {
        let (lo, hi, step) = (self.int(lo)?, self.int(hi)?, self.int(step)?);
        if step <= 0 {
            return fail(format!("`for` with step {step}"));
        }
        let n = init.len();
        let [iv, args @ ..] = &body.args[..] else {
            return fail("a `for` body without an induction variable");
        };
        if args.len() != n || inst.results.len() != n {
            return fail(format!(
                "a `for` carrying {n} values has {} body arguments and {} results",
                body.args.len(),
                inst.results.len()
            ));
        }
        let vals = self.values(init)?;
        for ((a, v), t) in args.iter().zip(init).zip(vals) {
            self.carry(*a, *v, t)?;
        }
        let mut i = lo;
        while i < hi {
            self.set_scalar(*iv, Scalar::Int(i))?;
            let ys = self
                .block(body)?
                .ok_or_else(|| EvalError::new("a `for` body does not end in `yield`"))?;
            if ys.len() != n {
                return fail(format!("a `for` body yields {} values, not {n}", ys.len()));
            }
            let vals = self.values(ys)?;
            for ((a, y), t) in args.iter().zip(ys).zip(vals) {
                self.carry(*a, *y, t)?;
            }
            i = match i.checked_add(step) {
                Some(next) => next,
                None => break,
            };
        }
        for (r, a) in inst.results.iter().zip(args) {
            let t = self.env[a.index()]
                .take()
                .ok_or_else(|| EvalError::new(format!("{a} is undefined after the loop")))?;
            self.carry(*r, *a, t)?;
        }
        Ok(())
    }
}
