//! The Host IR verifier: every value defined once before its use in the
//! same block, kinds agree with each instruction, runtime calls match their
//! sites, branch targets exist, returns match the function's result.

use crate::ir::*;

/// A verifier finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// The function.
    pub function: String,
    /// What is wrong.
    pub message: String,
}

/// Checks a module.
pub fn verify(m: &HostModule) -> Result<(), VerifyError> {
    for f in &m.functions {
        verify_fn(m, f).map_err(|message| VerifyError {
            function: f.name.clone(),
            message,
        })?;
    }
    Ok(())
}

fn verify_fn(m: &HostModule, f: &HostFn) -> Result<(), String> {
    if f.params > f.vars.len() {
        return Err("more parameters than variables".into());
    }
    let mut defined = vec![false; f.values.len()];
    for (b, block) in f.blocks.iter().enumerate() {
        // Values are block-local: defined in this block before use.
        let mut here = vec![false; f.values.len()];
        let kind = |v: Value| -> Result<Kind, String> {
            f.values
                .get(v.index())
                .copied()
                .ok_or_else(|| format!("bb{b}: {v} does not exist"))
        };
        let used = |v: Value, here: &[bool]| -> Result<(), String> {
            if here.get(v.index()) == Some(&true) {
                Ok(())
            } else {
                Err(format!(
                    "bb{b}: {v} is used before it is defined in this block"
                ))
            }
        };
        let want = |v: Value, k: Kind, here: &[bool]| -> Result<(), String> {
            used(v, here)?;
            let have = kind(v)?;
            if have == k {
                Ok(())
            } else {
                Err(format!(
                    "bb{b}: {v} is {} where {} is expected",
                    have.name(),
                    k.name()
                ))
            }
        };
        let site = |s: SiteId| -> Result<&Site, String> {
            m.sites
                .get(s.index())
                .ok_or_else(|| format!("bb{b}: no site {s}"))
        };
        let var = |v: Var| -> Result<Kind, String> {
            f.vars
                .get(v.index())
                .map(|d| d.kind)
                .ok_or_else(|| format!("bb{b}: no variable {v}"))
        };
        for d in &block.insts {
            let result: Option<Kind> = match &d.inst {
                Inst::IConst(_) => Some(kind(d.result.ok_or("iconst without a result")?)?),
                Inst::FConst(_) => Some(Kind::Float),
                Inst::BConst(_) => Some(Kind::Bool),
                Inst::Int(_, a, c, s) => {
                    want(*a, Kind::Int, &here)?;
                    want(*c, Kind::Int, &here)?;
                    site(*s)?;
                    Some(Kind::Int)
                }
                Inst::Float(_, a, c) => {
                    want(*a, Kind::Float, &here)?;
                    want(*c, Kind::Float, &here)?;
                    Some(Kind::Float)
                }
                Inst::ICmp(_, a, c) => {
                    want(*a, Kind::Int, &here)?;
                    want(*c, Kind::Int, &here)?;
                    Some(Kind::Bool)
                }
                Inst::FCmp(_, a, c) => {
                    want(*a, Kind::Float, &here)?;
                    want(*c, Kind::Float, &here)?;
                    Some(Kind::Bool)
                }
                Inst::And(a, c) | Inst::Or(a, c) => {
                    want(*a, Kind::Bool, &here)?;
                    want(*c, Kind::Bool, &here)?;
                    Some(Kind::Bool)
                }
                Inst::Not(a) => {
                    want(*a, Kind::Bool, &here)?;
                    Some(Kind::Bool)
                }
                Inst::FNeg(a) => {
                    want(*a, Kind::Float, &here)?;
                    Some(Kind::Float)
                }
                Inst::IToF(a) => {
                    want(*a, Kind::Int, &here)?;
                    Some(Kind::Float)
                }
                Inst::BToI(a) => {
                    want(*a, Kind::Bool, &here)?;
                    Some(Kind::Int)
                }
                Inst::Get(v) => Some(var(*v)?),
                Inst::Set(v, x) => {
                    want(*x, var(*v)?, &here)?;
                    None
                }
                Inst::Call(callee, args, s) => {
                    site(*s)?;
                    let g = m
                        .functions
                        .get(callee.index())
                        .ok_or_else(|| format!("bb{b}: no function {callee}"))?;
                    if args.len() != g.params {
                        return Err(format!(
                            "bb{b}: `{}` takes {} arguments, given {}",
                            g.name,
                            g.params,
                            args.len()
                        ));
                    }
                    for (a, p) in args.iter().zip(&g.vars) {
                        want(*a, p.kind, &here)?;
                    }
                    g.ret
                }
                Inst::Runtime(s, args) => {
                    let st = site(*s)?;
                    let present: Vec<Kind> = st.args.iter().flatten().copied().collect();
                    if present.len() != args.len() {
                        return Err(format!(
                            "bb{b}: site {s} takes {} arguments, given {}",
                            present.len(),
                            args.len()
                        ));
                    }
                    for (a, k) in args.iter().zip(present) {
                        want(*a, k, &here)?;
                    }
                    st.result
                }
                Inst::Retain(a) | Inst::Release(a) => {
                    want(*a, Kind::Handle, &here)?;
                    None
                }
            };
            match (d.result, result) {
                (Some(r), Some(k)) => {
                    if kind(r)? != k {
                        return Err(format!(
                            "bb{b}: {r} is declared {} but defined as {}",
                            kind(r)?.name(),
                            k.name()
                        ));
                    }
                    if std::mem::replace(&mut defined[r.index()], true) {
                        return Err(format!("bb{b}: {r} is defined twice"));
                    }
                    here[r.index()] = true;
                }
                (None, None) => {}
                (Some(r), None) => {
                    return Err(format!(
                        "bb{b}: {r} is defined by an instruction without a result"
                    ))
                }
                (None, Some(_)) => {
                    return Err(format!("bb{b}: an instruction's result is dropped"))
                }
            }
        }
        let target = |t: BlockId| -> Result<(), String> {
            if t.index() < f.blocks.len() {
                Ok(())
            } else {
                Err(format!("bb{b}: jumps to missing {t}"))
            }
        };
        match &block.term {
            Term::Jump(t) => target(*t)?,
            Term::Branch(c, t, e) => {
                want(*c, Kind::Bool, &here)?;
                target(*t)?;
                target(*e)?;
            }
            Term::Return(v) => match (v, f.ret) {
                (Some(v), Some(k)) => want(*v, k, &here)?,
                (None, None) => {}
                (Some(_), None) => return Err(format!("bb{b}: returns a value from a unit fn")),
                (None, Some(k)) => {
                    return Err(format!(
                        "bb{b}: returns nothing where {} is expected",
                        k.name()
                    ))
                }
            },
        }
    }
    Ok(())
}
