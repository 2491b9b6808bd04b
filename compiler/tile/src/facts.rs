//! Static facts about a kernel's integer and boolean values once its sizes
//! are bound: the range each value stays in over every element, program and
//! loop trip, and a power of two that divides it at the tile's origin.
//!
//! The analysis is one forward walk in program order (values are SSA and
//! control flow is structured). A program id ranges over its grid axis, a
//! loop variable over the trips its (bound) limits allow, an `arange` over
//! its extent; arithmetic, comparisons, selects and casts combine ranges
//! as intervals, with overflow giving up. Anything else (loads, reductions,
//! loop-carried values) is unknown. A boolean is the range `[0, 1]`, or a
//! single value when the comparison that defines it is decided.
//!
//! [`crate::specialise`] folds decided comparisons and masks away with
//! these facts, and the PTX lowering drops bounds tests on indices whose
//! range is inside the tensor and alignment tests on accesses that the
//! alignments prove.

use crate::ir::{Block, Kernel, TOp, Value};
use tessera_core::{BinaryOp, Bindings, Dtype, UnaryOp};

/// The closed interval `[lo, hi]` a value stays in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The smallest value.
    pub lo: i64,
    /// The largest value.
    pub hi: i64,
}

impl Range {
    /// The single value `x`.
    pub fn point(x: i64) -> Range {
        Range { lo: x, hi: x }
    }

    /// Whether every value lies in `[0, n)`.
    pub fn within(self, n: i64) -> bool {
        self.lo >= 0 && self.hi < n
    }

    fn union(self, o: Range) -> Range {
        Range {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    /// Whether every value is non-zero (`Some(true)`), every value is zero
    /// (`Some(false)`), or it depends.
    fn truth_value(self) -> Option<bool> {
        if self == Range::point(0) {
            Some(false)
        } else if self.lo > 0 || self.hi < 0 {
            Some(true)
        } else {
            None
        }
    }

    /// The range of a boolean: decided, or either.
    fn truth(t: Option<bool>) -> Range {
        match t {
            Some(b) => Range::point(i64::from(b)),
            None => Range { lo: 0, hi: 1 },
        }
    }
}

/// The largest exponent [`Facts::align`] reports (zero is divisible by
/// every power of two).
pub const MAX_ALIGN: u32 = 62;

/// The exponent of the largest power of two dividing `x` ([`MAX_ALIGN`]
/// for 0, which every power divides).
pub fn twos(x: i64) -> u32 {
    if x == 0 {
        MAX_ALIGN
    } else {
        x.trailing_zeros().min(MAX_ALIGN)
    }
}

/// What is known of every value of one kernel under one set of bindings.
#[derive(Clone, Debug)]
pub struct Facts {
    ranges: Vec<Option<Range>>,
    aligns: Vec<u32>,
}

impl Facts {
    /// Analyses `k` with its sizes bound by `b`.
    pub fn of(k: &Kernel, b: &Bindings) -> Facts {
        let mut f = Facts {
            ranges: vec![None; k.values.len()],
            aligns: vec![0; k.values.len()],
        };
        let grid: Vec<Option<i64>> = k.grid.iter().map(|s| s.eval(b).ok()).collect();
        f.block(k, b, &grid, &k.body);
        f
    }

    /// The range of `v` over every element, program and trip, when known.
    pub fn range(&self, v: Value) -> Option<Range> {
        self.ranges.get(v.index()).copied().flatten()
    }

    /// The value of boolean (or integer) `v` when it is the same
    /// everywhere: `Some(true)` for a comparison that always holds.
    pub fn decided(&self, v: Value) -> Option<bool> {
        self.range(v)?.truth_value()
    }

    /// The exponent of a power of two that divides integer `v` at the
    /// origin of its tile (all coordinates zero) in every program and trip
    /// (0 when nothing is known). With an affine index tile this is the
    /// alignment of its uniform part.
    pub fn align(&self, v: Value) -> u32 {
        self.aligns.get(v.index()).copied().unwrap_or(0)
    }

    fn set(&mut self, v: Value, range: Option<Range>, align: u32) {
        self.ranges[v.index()] = range;
        self.aligns[v.index()] = align;
    }

    fn block(&mut self, k: &Kernel, b: &Bindings, grid: &[Option<i64>], block: &Block) {
        for inst in &block.insts {
            if let TOp::For {
                lo, hi, step, body, ..
            } = &inst.op
            {
                if let Some(iv) = body.args.first() {
                    let range = self.trips(*lo, *hi, *step);
                    let align = self.align(*lo).min(self.align(*step));
                    self.set(*iv, range, align);
                }
                // Carried values and the loop's results stay unknown.
                self.block(k, b, grid, body);
                continue;
            }
            if let TOp::If { then, els, .. } = &inst.op {
                self.block(k, b, grid, then);
                self.block(k, b, grid, els);
                continue;
            }
            let Some(&v) = inst.results.first() else {
                continue;
            };
            let dtype = k.ty(v).dtype;
            if !(dtype.is_int() || dtype == Dtype::Bool) {
                continue;
            }
            let extent = || k.ty(v).shape.first().and_then(|s| s.eval(b).ok());
            let (range, align) = self.op(&inst.op, dtype, grid, b, extent);
            // A boolean is 0 or 1 at most.
            let range = if dtype == Dtype::Bool {
                Some(Range::truth(range.and_then(Range::truth_value)))
            } else {
                range.filter(|r| fits(*r, dtype))
            };
            self.set(v, range, align);
        }
    }

    /// The range of a loop variable running from `lo` below `hi` by `step`.
    fn trips(&self, lo: Value, hi: Value, step: Value) -> Option<Range> {
        let (l, h, s) = (self.range(lo)?, self.range(hi)?, self.range(step)?);
        if s.lo <= 0 {
            return None;
        }
        if l.lo == l.hi && h.lo == h.hi && s.lo == s.hi {
            // Exactly the trips there are (none: any single value will do).
            let trips = h.lo.saturating_sub(l.lo).max(0).saturating_add(s.lo - 1) / s.lo;
            let last = l.lo.checked_add(s.lo.checked_mul((trips - 1).max(0))?)?;
            return Some(Range { lo: l.lo, hi: last });
        }
        // From a fixed start by a fixed step, the variable stays on the
        // start's residue: the last trip is the largest such value below
        // the largest limit (a limit `min(end, L)` leaves `L - step` when
        // L is a multiple of the step).
        let hi = if l.lo == l.hi && s.lo == s.hi && h.hi > l.lo {
            l.lo + (h.hi - 1 - l.lo) / s.lo * s.lo
        } else {
            h.hi - 1
        };
        // The variable is a multiple of what divides both the start and
        // the step, so is the last trip: `min(next, L)` rounded down to 64
        // by a step of 64 stops at L - 64.
        let a = self.align(lo).min(self.align(step)).min(32);
        let hi = if hi >= 0 { hi >> a << a } else { hi };
        Some(Range {
            lo: l.lo,
            hi: hi.max(l.lo),
        })
    }

    /// The range and alignment of the result of `op`.
    fn op(
        &self,
        op: &TOp,
        dtype: Dtype,
        grid: &[Option<i64>],
        b: &Bindings,
        extent: impl Fn() -> Option<i64>,
    ) -> (Option<Range>, u32) {
        let r = |v: &Value| self.range(*v);
        let a = |v: &Value| self.align(*v);
        match op {
            TOp::Const(x) if x.fract() == 0.0 && x.abs() < 9.0e18 => {
                let x = *x as i64;
                (Some(Range::point(x)), twos(x))
            }
            TOp::Size(s) => match s.eval(b) {
                Ok(x) => (Some(Range::point(x)), twos(x)),
                Err(_) => (None, 0),
            },
            TOp::ProgramId(axis) => {
                let n = grid.get(usize::from(*axis)).copied().flatten();
                let range = n.filter(|n| *n > 0).map(|n| Range { lo: 0, hi: n - 1 });
                (range, 0)
            }
            TOp::NumPrograms(axis) => match grid.get(usize::from(*axis)).copied().flatten() {
                Some(n) => (Some(Range::point(n)), twos(n)),
                None => (None, 0),
            },
            TOp::Arange(start) => {
                let range = extent().filter(|n| *n > 0).and_then(|n| {
                    Some(Range {
                        lo: *start,
                        hi: start.checked_add(n - 1)?,
                    })
                });
                (range, twos(*start))
            }
            TOp::Broadcast(x) | TOp::Reshape(x) | TOp::Permute(x, _) => (r(x), a(x)),
            TOp::Cast(x) => (r(x), a(x)),
            TOp::Unary(UnaryOp::Neg, x) => {
                let range = r(x).and_then(|x| {
                    Some(Range {
                        lo: x.hi.checked_neg()?,
                        hi: x.lo.checked_neg()?,
                    })
                });
                (range, a(x))
            }
            TOp::Unary(UnaryOp::Not, x) => {
                let t = self.decided(*x).map(|t| !t);
                (Some(Range::truth(t)), 0)
            }
            TOp::Binary(op, x, y) => self.binary(*op, *x, *y, dtype),
            TOp::Select(c, x, y) => match self.decided(*c) {
                Some(true) => (r(x), a(x)),
                Some(false) => (r(y), a(y)),
                None => {
                    let range = r(x).zip(r(y)).map(|(p, q)| p.union(q));
                    (range, a(x).min(a(y)))
                }
            },
            _ => (None, 0),
        }
    }

    fn binary(&self, op: BinaryOp, x: Value, y: Value, dtype: Dtype) -> (Option<Range>, u32) {
        let (ax, ay) = (self.align(x), self.align(y));
        let truth = |t: Option<bool>| (Some(Range::truth(t)), 0);
        if dtype == Dtype::Bool {
            let (dx, dy) = (self.decided(x), self.decided(y));
            return match op {
                BinaryOp::BitXor => truth(dx.zip(dy).map(|(p, q)| p != q)),
                BinaryOp::And | BinaryOp::BitAnd => truth(match (dx, dy) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }),
                BinaryOp::Or | BinaryOp::BitOr => truth(match (dx, dy) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }),
                _ => match (self.range(x), self.range(y)) {
                    (Some(p), Some(q)) => truth(compare(op, p, q)),
                    _ => truth(None),
                },
            };
        }
        let (Some(p), Some(q)) = (self.range(x), self.range(y)) else {
            let align = match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Min | BinaryOp::Max => ax.min(ay),
                BinaryOp::Mul => (ax + ay).min(MAX_ALIGN),
                _ => 0,
            };
            return (None, align);
        };
        let range = match op {
            BinaryOp::Add => p.lo.checked_add(q.lo).zip(p.hi.checked_add(q.hi)),
            BinaryOp::Sub => p.lo.checked_sub(q.hi).zip(p.hi.checked_sub(q.lo)),
            BinaryOp::Mul => {
                let c = [
                    p.lo.checked_mul(q.lo),
                    p.lo.checked_mul(q.hi),
                    p.hi.checked_mul(q.lo),
                    p.hi.checked_mul(q.hi),
                ];
                c.iter().copied().collect::<Option<Vec<i64>>>().map(|c| {
                    (
                        c.iter().copied().min().unwrap_or(0),
                        c.iter().copied().max().unwrap_or(0),
                    )
                })
            }
            // Truncating division by a positive divisor is monotone in
            // the dividend, and shrinks its magnitude as the divisor grows.
            BinaryOp::Div if q.lo > 0 => Some((
                (p.lo / q.lo).min(p.lo / q.hi),
                (p.hi / q.lo).max(p.hi / q.hi),
            )),
            BinaryOp::Rem if p.lo >= 0 && q.lo > 0 => {
                if p.hi < q.lo {
                    Some((p.lo, p.hi))
                } else {
                    Some((0, p.hi.min(q.hi - 1)))
                }
            }
            // The remainder takes the dividend's sign.
            BinaryOp::Rem if q.lo > 0 => Some((
                p.lo.max(1 - q.hi),
                if p.hi > 0 { p.hi.min(q.hi - 1) } else { 0 },
            )),
            BinaryOp::Min => Some((p.lo.min(q.lo), p.hi.min(q.hi))),
            BinaryOp::Max => Some((p.lo.max(q.lo), p.hi.max(q.hi))),
            _ => None,
        }
        .map(|(lo, hi)| Range { lo, hi });
        let align = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Min | BinaryOp::Max => ax.min(ay),
            BinaryOp::Mul => (ax + ay).min(MAX_ALIGN),
            BinaryOp::Rem | BinaryOp::Div if p.lo == p.hi && q.lo == q.hi && q.lo != 0 => {
                let v = if op == BinaryOp::Div {
                    p.lo / q.lo
                } else {
                    p.lo % q.lo
                };
                twos(v)
            }
            _ => 0,
        };
        (range, align)
    }
}

/// Whether `op` holds between every pair of values of `p` and `q`
/// (`Some(true)`), none (`Some(false)`), or it depends.
fn compare(op: BinaryOp, p: Range, q: Range) -> Option<bool> {
    let lt = |p: Range, q: Range| {
        if p.hi < q.lo {
            Some(true)
        } else if p.lo >= q.hi {
            Some(false)
        } else {
            None
        }
    };
    let not = |t: Option<bool>| t.map(|t| !t);
    match op {
        BinaryOp::Lt => lt(p, q),
        BinaryOp::Ge => not(lt(p, q)),
        BinaryOp::Gt => lt(q, p),
        BinaryOp::Le => not(lt(q, p)),
        BinaryOp::Eq | BinaryOp::Ne => {
            let eq = if p.lo == p.hi && q.lo == q.hi && p.lo == q.lo {
                Some(true)
            } else if p.hi < q.lo || q.hi < p.lo {
                Some(false)
            } else {
                None
            };
            if op == BinaryOp::Eq {
                eq
            } else {
                not(eq)
            }
        }
        _ => None,
    }
}

/// Whether every value of `r` is representable in integer `dtype` (a cast
/// to a narrower type that wraps loses the range).
fn fits(r: Range, dtype: Dtype) -> bool {
    dtype
        .int_range()
        .is_none_or(|(lo, hi)| r.lo >= lo && r.hi <= hi)
}
