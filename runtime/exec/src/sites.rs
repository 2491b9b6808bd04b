//! What the runtime does at each site of a Host IR module: decode the
//! argument words by the site's kinds, run the host operation (shared with
//! the interpreter), encode the result.

use tessera_cpu::host::{HostOps, HostValue, IndexValue};
use tessera_diagnostics::{codes, Diagnostic};
use tessera_graph::Callable;
use tessera_host::{HostModule, IndexPart, Kind, Site, SiteKind};

use crate::abi::{handle_ref, handle_value, into_handle, Sites};

type R<T> = Result<T, Box<Diagnostic>>;

/// The sites of one module, run with host operations.
pub struct ModuleSites<'p, 'a> {
    /// The module whose sites these are.
    pub host: &'p HostModule,
    /// The operations.
    pub ops: HostOps<'p, 'a>,
}

fn internal(site: &Site, msg: impl std::fmt::Display) -> Box<Diagnostic> {
    Box::new(Diagnostic::error(
        codes::E0701,
        site.span,
        format!("internal error in the runtime (this is a bug in tsrc): {msg}"),
    ))
}

/// The arguments of `site` of `kinds` from their `words` (an absent kind
/// takes no word).
fn decode_args(site: &Site, kinds: &[Option<Kind>], words: &[i64]) -> R<Vec<Option<HostValue>>> {
    let mut words = words.iter();
    let mut args = Vec::with_capacity(kinds.len());
    for k in kinds {
        args.push(match k {
            None => None,
            Some(k) => match words.next() {
                Some(w) => Some(decode(*k, *w)),
                None => return Err(internal(site, "too few argument words")),
            },
        });
    }
    Ok(args)
}

fn decode(kind: Kind, word: i64) -> HostValue {
    match kind {
        Kind::Int => HostValue::Int(word),
        Kind::Float => HostValue::Float(f64::from_bits(word as u64)),
        Kind::Bool => HostValue::Bool(word != 0),
        // SAFETY: compiled code passes live handles for handle arguments.
        Kind::Handle => unsafe { handle_value(word) },
    }
}

fn encode(site: &Site, v: HostValue) -> R<i64> {
    Ok(match (site.result, v) {
        (None, _) => 0,
        (Some(Kind::Int), HostValue::Int(n)) => n,
        (Some(Kind::Float), HostValue::Float(x)) => x.to_bits() as i64,
        (Some(Kind::Float), HostValue::Int(n)) => (n as f64).to_bits() as i64,
        (Some(Kind::Bool), HostValue::Bool(b)) => i64::from(b),
        // A rank-0 comparison of tensors as an `if` condition.
        (Some(Kind::Bool), HostValue::Tensor(t)) if tessera_cpu::host::truth(&t).is_some() => {
            i64::from(tessera_cpu::host::truth(&t) == Some(true))
        }
        // A one-element tensor read into a host number (`total += x[r, 0]`).
        (Some(k @ (Kind::Float | Kind::Int)), HostValue::Tensor(t)) => {
            match tessera_cpu::host::item(&t, k == Kind::Float) {
                Some(HostValue::Float(x)) => x.to_bits() as i64,
                Some(HostValue::Int(n)) => n,
                _ => {
                    return Err(internal(
                        site,
                        format!(
                            "a {} result, got {}",
                            k.name(),
                            tessera_cpu::host::show(&HostValue::Tensor(t))
                        ),
                    ))
                }
            }
        }
        (Some(Kind::Handle), v) => into_handle(v),
        (Some(k), v) => {
            return Err(internal(
                site,
                format!("a {} result, got {}", k.name(), tessera_cpu::host::show(&v)),
            ))
        }
    })
}

impl ModuleSites<'_, '_> {
    /// Runs `site` on its arguments (one per entry of `site.args`, `None`
    /// where absent).
    pub fn run_site(&mut self, site: &Site, args: Vec<Option<HostValue>>) -> R<HostValue> {
        let span = site.span;
        match &site.kind {
            SiteKind::Op(name) => return self.ops.op_call(name, args, span),
            SiteKind::OpParts(name, n) => return self.ops.op_parts(name, args, Some(*n), span),
            SiteKind::Kernel(name) => {
                return match self.ops.program.lookup(name) {
                    Some(Callable::Kernel(k)) => self.ops.kernel(name, &k.params, args, span),
                    _ => Err(internal(site, format!("no kernel `{name}`"))),
                }
            }
            SiteKind::Builtin(name, dtype) => {
                return match self.ops.program.lookup(name) {
                    Some(Callable::Fn(f, _)) => {
                        self.ops.builtin(name, &f.params, &args, *dtype, span)
                    }
                    _ => Err(internal(site, format!("no builtin `{name}`"))),
                }
            }
            _ => {}
        }
        // The arguments are this site's own: taken, not copied (a tensor
        // copy per operator would cost as much as the tensor).
        let mut present = args.into_iter().flatten();
        let mut next = || {
            present
                .next()
                .ok_or_else(|| internal(site, "missing argument"))
        };
        match &site.kind {
            SiteKind::Op(_)
            | SiteKind::OpParts(..)
            | SiteKind::Kernel(_)
            | SiteKind::Builtin(..) => {
                unreachable!("handled above")
            }
            SiteKind::Part(i) => match next()? {
                HostValue::List(mut items) if *i < items.len() => Ok(items.swap_remove(*i)),
                other => Err(internal(
                    site,
                    format!("part {i} of {}", tessera_cpu::host::show(&other)),
                )),
            },
            SiteKind::Binary(op) => {
                let (a, b) = (next()?, next()?);
                self.ops.binary(*op, a, b, span)
            }
            SiteKind::Unary(op) => {
                let a = next()?;
                self.ops.unary(*op, a, span)
            }
            SiteKind::Index(parts) => {
                let base = next()?;
                drop(next);
                self.index_site(site, parts, &base, &mut present)
            }
            SiteKind::Transpose => {
                let a = next()?;
                self.ops.transpose(a, span)
            }
            SiteKind::Cast(d) => {
                let a = next()?;
                self.ops.cast(a, *d, span)
            }
            SiteKind::List => Ok(HostValue::List(present.collect())),
            SiteKind::Str(s) => Ok(HostValue::Str(s.clone())),
            SiteKind::Arith | SiteKind::Call(_) => Err(internal(site, "not a runtime call")),
        }
    }

    /// An index site: `base` borrowed (slicing copies only the elements
    /// it selects), the integer parts taken from `rest`.
    fn index_site(
        &mut self,
        site: &Site,
        parts: &[IndexPart],
        base: &HostValue,
        rest: &mut dyn Iterator<Item = HostValue>,
    ) -> R<HostValue> {
        let mut vals = Vec::new();
        for p in parts {
            let mut int = || -> R<i64> {
                match rest.next() {
                    Some(HostValue::Int(n)) => Ok(n),
                    _ => Err(internal(site, "a non-integer index")),
                }
            };
            vals.push(match *p {
                IndexPart::Index(s) => match rest.next() {
                    Some(HostValue::Int(n)) => IndexValue::Index(n, s),
                    Some(HostValue::Tensor(t)) => IndexValue::Tensor(t),
                    _ => return Err(internal(site, "a non-integer index")),
                },
                IndexPart::NewAxis => IndexValue::NewAxis,
                IndexPart::Ellipsis(span) => IndexValue::Ellipsis(span),
                IndexPart::Slice { lo, hi, step, span } => {
                    let lo = if lo { Some(int()?) } else { None };
                    let hi = if hi { Some(int()?) } else { None };
                    let step = if step { int()? } else { 1 };
                    IndexValue::Slice(lo, hi, step, span)
                }
            });
        }
        self.ops.index(base, &vals, site.span)
    }
}

impl Sites for ModuleSites<'_, '_> {
    fn call(&mut self, site: u32, words: &[i64]) -> R<i64> {
        let host = self.host;
        let Some(site) = host.sites.get(site as usize) else {
            return Err(Box::new(Diagnostic::error(
                codes::E0701,
                Default::default(),
                format!("internal error in the runtime: no site {site}"),
            )));
        };
        if let (SiteKind::Index(parts), Some(Some(Kind::Handle)), Some(&w)) =
            (&site.kind, site.args.first(), words.first())
        {
            // SAFETY: compiled code passes live handles for handle arguments.
            if let Some(base) = unsafe { handle_ref(w) } {
                let rest = decode_args(site, &site.args[1..], &words[1..])?;
                let v = self.index_site(site, parts, base, &mut rest.into_iter().flatten())?;
                return encode(site, v);
            }
        }
        if let (SiteKind::Part(i), Some(&w)) = (&site.kind, words.first()) {
            // The list is borrowed: only the part is copied.
            // SAFETY: compiled code passes live handles for handle arguments.
            if let Some(HostValue::List(items)) = unsafe { handle_ref(w) } {
                if let Some(item) = items.get(*i) {
                    return encode(site, item.clone());
                }
            }
        }
        let args = decode_args(site, &site.args, words)?;
        let v = self.run_site(site, args)?;
        encode(site, v)
    }

    fn arith_error(&self, site: u32) -> Box<Diagnostic> {
        self.error_at(site, "integer overflow or division by zero", "here".into())
    }

    fn depth_error(&self, site: u32) -> Box<Diagnostic> {
        let limit = tessera_cpu::host::MAX_CALL_DEPTH;
        self.error_at(
            site,
            "host calls nest too deeply",
            format!("more than {limit} nested calls"),
        )
    }
}

impl ModuleSites<'_, '_> {
    /// A run-time error (E0701) at a site's source span.
    fn error_at(&self, site: u32, msg: &str, label: String) -> Box<Diagnostic> {
        let span = self.host.sites.get(site as usize).map(|s| s.span);
        Box::new(Diagnostic::error(codes::E0701, span.unwrap_or_default(), msg).with_label(label))
    }
}
