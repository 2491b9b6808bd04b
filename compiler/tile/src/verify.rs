//! The Tile IR verifier: values defined once before use in scope, operand
//! types that fit each operation, loads and stores with one index per
//! parameter dimension, loop bodies that yield what they carry.

use crate::ir::*;
use tessera_syntax::ast::Dtype;

/// Checks every kernel and step of `p`.
pub fn verify(p: &TileProgram) -> Result<(), String> {
    for k in &p.kernels {
        verify_kernel(k).map_err(|e| format!("kernel {}: {e}", k.name))?;
    }
    for (i, s) in p.steps.iter().enumerate() {
        if let Step::Launch { kernel, args } = s {
            let k = p
                .kernels
                .get(*kernel)
                .ok_or_else(|| format!("step {i} launches a kernel that does not exist"))?;
            if k.params.len() != args.len() {
                return Err(format!(
                    "step {i} passes {} buffers to {}, which takes {}",
                    args.len(),
                    k.name,
                    k.params.len()
                ));
            }
            for (a, kp) in args.iter().zip(&k.params) {
                if matches!(a, BufferId::Input(_))
                    && (kp.access != Access::In || kp.init != Start::Held)
                {
                    return Err(format!("step {i} lets {} write an input", k.name));
                }
            }
        }
    }
    Ok(())
}

/// Checks one kernel.
pub fn verify_kernel(k: &Kernel) -> Result<(), String> {
    let mut defined = vec![false; k.values.len()];
    block(k, &k.body, &mut defined, None)
}

fn is_int(d: Dtype) -> bool {
    d.is_int()
}

fn block(
    k: &Kernel,
    b: &Block,
    defined: &mut [bool],
    carried: Option<&[Value]>,
) -> Result<(), String> {
    let mut scope = defined.to_vec();
    for a in &b.args {
        def(&mut scope, *a)?;
    }
    for (i, inst) in b.insts.iter().enumerate() {
        let last = i + 1 == b.insts.len();
        check_inst(k, inst, &mut scope, last, carried)?;
        for r in &inst.results {
            def(&mut scope, *r)?;
        }
    }
    // Values defined inside are not visible outside; ids stay unique
    // because the kernel numbers every value once.
    Ok(())
}

fn def(scope: &mut [bool], v: Value) -> Result<(), String> {
    let slot = scope
        .get_mut(v.index())
        .ok_or_else(|| format!("{v} has no type"))?;
    if *slot {
        return Err(format!("{v} is defined twice"));
    }
    *slot = true;
    Ok(())
}

fn used(scope: &[bool], v: Value) -> Result<(), String> {
    if scope.get(v.index()).copied() == Some(true) {
        Ok(())
    } else {
        Err(format!("{v} is used where it is not defined"))
    }
}

fn check_inst(
    k: &Kernel,
    inst: &Inst,
    scope: &mut Vec<bool>,
    last: bool,
    carried: Option<&[Value]>,
) -> Result<(), String> {
    let uses = inst.op.operands();
    for v in &uses {
        used(scope, *v)?;
    }
    let ty = |v: Value| k.ty(v);
    let one = |n: usize| -> Result<(), String> {
        if inst.results.len() == n {
            Ok(())
        } else {
            Err(format!(
                "{:?} has {} results, expected {n}",
                inst.op,
                inst.results.len()
            ))
        }
    };
    match &inst.op {
        TOp::Load {
            param, index, mask, ..
        }
        | TOp::Store {
            param, index, mask, ..
        } => {
            let p = k
                .params
                .get(*param)
                .ok_or_else(|| format!("access to parameter {param}, which does not exist"))?;
            if index.len() != p.dims.len() {
                return Err(format!(
                    "{} has {} dims but is indexed with {}",
                    p.name,
                    p.dims.len(),
                    index.len()
                ));
            }
            for i in index {
                if !is_int(ty(*i).dtype) {
                    return Err(format!("index {i} of {} is not an integer", p.name));
                }
            }
            if let Some(m) = mask {
                if ty(*m).dtype != Dtype::Bool {
                    return Err(format!("mask {m} is not bool"));
                }
            }
            if let TOp::Store { atomic, .. } = &inst.op {
                if p.access == Access::In {
                    return Err(format!("store to input {}", p.name));
                }
                if *atomic == Some(crate::ir::Combine::Prod) {
                    return Err(format!("an atomic product into {}", p.name));
                }
                one(0)?;
            } else {
                if p.access == Access::Out {
                    return Err(format!("load from output-only {}", p.name));
                }
                one(1)?;
            }
        }
        TOp::Dot {
            a,
            b,
            acc,
            bf16_acc,
            ..
        } => {
            one(1)?;
            let (ta, tb, tc) = (ty(*a), ty(*b), ty(*acc));
            if *bf16_acc && tc.dtype != Dtype::Fp32 {
                return Err(format!(
                    "a bf16_acc dot sums in fp32, not {}",
                    tc.dtype.name()
                ));
            }
            if ta.shape.len() != 2 || tb.shape.len() != 2 || tc.shape.len() != 2 {
                return Err("dot needs 2-d tiles".into());
            }
            if ta.shape[1] != tb.shape[0]
                || ta.shape[0] != tc.shape[0]
                || tb.shape[1] != tc.shape[1]
            {
                return Err(format!("dot shapes do not agree: {a}, {b}, {acc}"));
            }
        }
        TOp::Reduce { value, axis, .. } => {
            one(1)?;
            if *axis >= ty(*value).shape.len() {
                return Err(format!(
                    "reduce axis {axis} of a rank-{} tile",
                    ty(*value).shape.len()
                ));
            }
        }
        TOp::Rand { counter, seed } => {
            one(1)?;
            if !ty(*counter).dtype.is_int() {
                return Err("rand takes integer counters".into());
            }
            if let Seed::Value(k) = seed {
                if !ty(*k).dtype.is_int() || !ty(*k).shape.is_empty() {
                    return Err("a rand seed value is one integer".into());
                }
            }
            if inst.results.first().map(|r| ty(*r).dtype) != Some(Dtype::Fp32) {
                return Err("rand makes fp32 values".into());
            }
        }
        TOp::Select(c, _, _) => {
            one(1)?;
            if ty(*c).dtype != Dtype::Bool {
                return Err(format!("select condition {c} is not bool"));
            }
        }
        TOp::KahanAdd { .. } => one(2)?,
        TOp::Sort { value, .. } => {
            one(2)?;
            let t = ty(*value);
            if t.shape.is_empty() {
                return Err("sort of a scalar".into());
            }
            let (vals, idx) = (ty(inst.results[0]), ty(inst.results[1]));
            if *vals != *t || idx.shape != t.shape || idx.dtype != Dtype::Int32 {
                return Err(format!(
                    "a sort gives {value}'s type and int32 indices of its shape"
                ));
            }
        }
        TOp::Permute(v, perm) => {
            one(1)?;
            let mut p = perm.clone();
            p.sort_unstable();
            if p != (0..ty(*v).shape.len()).collect::<Vec<_>>() {
                return Err(format!("{perm:?} is not a permutation"));
            }
        }
        TOp::Stage { shared, .. } => {
            one(1)?;
            if *shared >= k.shared.len() {
                return Err(format!(
                    "stage through shared buffer {shared}, which does not exist"
                ));
            }
        }
        TOp::Arange(_) => {
            one(1)?;
            if inst.results.first().map(|r| ty(*r).shape.len()) != Some(1) {
                return Err("arange makes a 1-d tile".into());
            }
        }
        TOp::Barrier => one(0)?,
        TOp::Assert(c, _, about) => {
            one(0)?;
            if ty(*c).dtype != Dtype::Bool {
                return Err("assert takes a bool tile".into());
            }
            if !about.is_empty() && about.len() != 2 {
                return Err("an assert names an index and its extent, or nothing".into());
            }
        }
        TOp::Yield(vs) => {
            if !last {
                return Err("yield before the end of a block".into());
            }
            if let Some(c) = carried {
                if c.len() != vs.len() {
                    return Err(format!(
                        "yield of {} values in a block carrying {}",
                        vs.len(),
                        c.len()
                    ));
                }
                for (y, c) in vs.iter().zip(c) {
                    if ty(*y) != ty(*c) {
                        return Err(format!("{y} is yielded for {c} of another type"));
                    }
                }
            }
        }
        TOp::For {
            init,
            body,
            lo,
            hi,
            step,
        } => {
            for b in [lo, hi, step] {
                if !ty(*b).shape.is_empty() || !is_int(ty(*b).dtype) {
                    return Err(format!("loop bound {b} is not an integer scalar"));
                }
            }
            if body.args.len() != init.len() + 1 || inst.results.len() != init.len() {
                return Err("loop arity does not match its carried values".into());
            }
            if !matches!(body.insts.last().map(|i| &i.op), Some(TOp::Yield(_))) {
                return Err("loop body does not end in yield".into());
            }
            let carried: Vec<Value> = body.args[1..].to_vec();
            block(k, body, scope, Some(&carried))?;
        }
        TOp::If { cond, then, els } => {
            if ty(*cond).dtype != Dtype::Bool || !ty(*cond).shape.is_empty() {
                return Err(format!("if condition {cond} is not a bool scalar"));
            }
            let res = inst.results.clone();
            block(k, then, scope, Some(&res))?;
            block(k, els, scope, Some(&res))?;
        }
        _ => one(1)?,
    }
    Ok(())
}
