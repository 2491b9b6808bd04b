//! Static figures of SASS (the output of `cuobjdump -sass`), no GPU needed:
//! per kernel its size, its subroutine calls, and how many instructions one
//! warp executes per trip of its main loop along the steady-state path.
//!
//! The main loop is the loop (a backward branch and its target) around the
//! most tensor-core instructions (`HMMA`, `HGMMA`), else the longest one;
//! among several such loops, the leanest (a kernel that splits its key or
//! k loop into a steady part and masked edges, as causal attention does,
//! makes most trips in the steady part). [`mma_loops`] lists them all.
//! One trip is walked from the loop's head to its back edge:
//!
//! * every instruction on the path counts, predicated-off ones too (they
//!   issue);
//! * an unconditional forward branch is followed;
//! * an unpredicated `CALL` is followed into its callee, whose
//!   instructions up to `RET` count too (ptxas turns 64-bit integer
//!   division and IEEE fp32 division into such calls); a predicated one is
//!   ptxas's loop-exit idiom and is not taken;
//! * a conditional forward branch skips its region only when the region is
//!   an element-by-element fallback (scalar 8- or 16-bit global accesses,
//!   or scalar 8/16-bit shared stores, and none of `LDGSTS`, `LDSM`,
//!   `HMMA`, `HGMMA` or 128-bit global loads), or the slow path of an fp32
//!   division (`FCHK` feeding the branch): the fast path never runs them.
//!
//! It is a heuristic for comparing code shapes, not a simulator: a loop
//! whose structure changes deserves a look at [`Trip::skipped`].

/// One SASS instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassInst {
    /// Its address in the function.
    pub addr: u64,
    /// Its guard (`@P0`, `@!PT`), if any.
    pub pred: Option<String>,
    /// The opcode with its modifiers (`LDGSTS.E.BYPASS.LTC128B.128`).
    pub op: String,
    /// The operands, as printed.
    pub operands: String,
}

impl SassInst {
    /// The opcode without modifiers (`LDGSTS`).
    pub fn base(&self) -> &str {
        self.op.split('.').next().unwrap_or("")
    }

    /// The address a branch or call names, if any.
    pub fn target(&self) -> Option<u64> {
        let hex = self.operands.split("0x").nth(1)?;
        let digits: String = hex.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        u64::from_str_radix(&digits, 16).ok()
    }

    fn unconditional(&self) -> bool {
        matches!(self.pred.as_deref(), None | Some("@PT"))
    }
}

/// One function of a SASS listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassFunction {
    /// Its name.
    pub name: String,
    /// Its instructions in address order.
    pub insts: Vec<SassInst>,
}

/// Parses `cuobjdump -sass` output into functions. Lines that are not
/// instructions (headers, encodings) are skipped.
pub fn parse(text: &str) -> Vec<SassFunction> {
    let mut out: Vec<SassFunction> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("Function : ") {
            out.push(SassFunction {
                name: name.trim().to_owned(),
                insts: Vec::new(),
            });
            continue;
        }
        let (Some(f), Some(inst)) = (out.last_mut(), parse_inst(t)) else {
            continue;
        };
        f.insts.push(inst);
    }
    out
}

/// `/*0360*/  @P3 BRA 0x6e0 ;  /* 0x... */` as an instruction.
fn parse_inst(line: &str) -> Option<SassInst> {
    let rest = line.strip_prefix("/*")?;
    let (addr, rest) = rest.split_once("*/")?;
    let addr = u64::from_str_radix(addr, 16).ok()?;
    let body = rest.split(';').next()?.trim();
    if body.is_empty() {
        return None;
    }
    let mut words = body.splitn(2, char::is_whitespace);
    let mut first = words.next()?;
    let mut rest = words.next().unwrap_or("").trim();
    let mut pred = None;
    if first.starts_with('@') {
        pred = Some(first.to_owned());
        let mut w = rest.splitn(2, char::is_whitespace);
        first = w.next()?;
        rest = w.next().unwrap_or("").trim();
    }
    Some(SassInst {
        addr,
        pred,
        op: first.to_owned(),
        operands: rest.to_owned(),
    })
}

/// What one warp executes in one trip of a loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trip {
    /// The loop's head and back edge (addresses).
    pub head: u64,
    /// The address of the backward branch.
    pub back_edge: u64,
    /// Static instructions between them.
    pub static_len: usize,
    /// Instructions executed, callees included.
    pub executed: usize,
    /// Of those, inside called subroutines.
    pub in_calls: usize,
    /// Unpredicated calls on the path.
    pub calls: usize,
    /// Tensor-core instructions executed.
    pub mma: usize,
    /// Regions skipped as fallbacks or slow paths: (branch, target, length).
    pub skipped: Vec<(u64, u64, usize)>,
}

/// Static figures of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelStats {
    /// The kernel's name.
    pub name: String,
    /// Static instructions (the listing's length, `NOP` padding included).
    pub static_len: usize,
    /// `CALL` instructions anywhere in the kernel.
    pub calls: usize,
    /// The main loop's trip, if the kernel has a loop.
    pub main_loop: Option<Trip>,
}

/// The loops of `f`: (head, back edge) of every backward branch (not the
/// branch to itself that pads the end of a kernel).
pub fn loops(f: &SassFunction) -> Vec<(u64, u64)> {
    f.insts
        .iter()
        .filter(|i| i.base() == "BRA")
        .filter_map(|i| i.target().filter(|t| *t < i.addr).map(|t| (t, i.addr)))
        .collect()
}

/// Walks `f` from its first instruction to its first unconditional
/// `EXIT`, as [`walk`] walks a loop's trip: loops run once (a kernel
/// without loops, a one-pass row kernel, is walked exactly).
pub fn walk_kernel(f: &SassFunction) -> Trip {
    match (f.insts.first(), f.insts.last()) {
        (Some(a), Some(b)) => walk(f, (a.addr, b.addr)),
        _ => Trip::default(),
    }
}

fn is_mma(i: &SassInst) -> bool {
    matches!(i.base(), "HMMA" | "HGMMA" | "IMMA" | "QGMMA")
}

/// The main loop of `f` (see the module docs).
pub fn main_loop(f: &SassFunction) -> Option<(u64, u64)> {
    let mma = mma_loops(f);
    if !mma.is_empty() {
        let len = |&(h, b): &(u64, u64)| {
            f.insts
                .iter()
                .filter(|i| h <= i.addr && i.addr <= b)
                .count()
        };
        return mma.into_iter().min_by_key(len);
    }
    let in_loop = |(h, b): (u64, u64)| f.insts.iter().filter(move |i| h <= i.addr && i.addr <= b);
    loops(f).into_iter().max_by_key(|&l| in_loop(l).count())
}

/// The innermost loops of `f` around the most tensor-core instructions, in
/// program order (none when no loop has any). The return of an out-of-line
/// `mbarrier` wait retry (a spin loop, then an unconditional branch back
/// into the loop) spans a loop's addresses without being one: it does not
/// count.
pub fn mma_loops(f: &SassFunction) -> Vec<(u64, u64)> {
    let mma = |(h, b): (u64, u64)| {
        f.insts
            .iter()
            .filter(|i| h <= i.addr && i.addr <= b && is_mma(i))
            .count()
    };
    let retry_return = |(h, b): &(u64, u64)| {
        let Some(k) = f.insts.iter().position(|i| i.addr == *b) else {
            return false;
        };
        let spin = k.checked_sub(1).map(|p| &f.insts[p]).is_some_and(|p| {
            p.base() == "BRA"
                && !p.unconditional()
                && p.target().is_some_and(|t| *h < t && t < p.addr)
        });
        f.insts[k].unconditional() && spin
    };
    let all: Vec<(u64, u64)> = loops(f)
        .into_iter()
        .filter(|l| !retry_return(l) && mma(*l) > 0)
        .collect();
    // Innermost: a persistent kernel's loop over its programs holds the
    // loops that do the work.
    let inner: Vec<(u64, u64)> = all
        .iter()
        .copied()
        .filter(|&(h, b)| {
            !all.iter()
                .any(|&(h2, b2)| (h2, b2) != (h, b) && h <= h2 && b2 <= b)
        })
        .collect();
    let most = inner.iter().map(|l| mma(*l)).max().unwrap_or(0);
    inner.into_iter().filter(|l| mma(*l) == most).collect()
}

/// Whether `region` is an element-by-element fallback (module docs).
fn is_fallback(region: &[SassInst]) -> bool {
    let narrow = |i: &SassInst| {
        let op = i.op.as_str();
        ["LDG.E.U16", "LDG.E.U8", "LDG.E.S16", "LDG.E.S8"]
            .iter()
            .chain(&["STG.E.U16", "STG.E.U8", "STS.U16", "STS.U8"])
            .any(|p| op.starts_with(p))
    };
    let fast = |i: &SassInst| {
        matches!(i.base(), "LDGSTS" | "LDSM" | "HMMA" | "HGMMA") || i.op.starts_with("LDG.E.128")
    };
    region.iter().any(narrow) && !region.iter().any(fast)
}

/// Walks one trip of the loop `(head, back_edge)` of `f` (module docs).
pub fn walk(f: &SassFunction, (head, back_edge): (u64, u64)) -> Trip {
    let at = |addr: u64| f.insts.iter().position(|i| i.addr == addr);
    let mut t = Trip {
        head,
        back_edge,
        static_len: f
            .insts
            .iter()
            .filter(|i| head <= i.addr && i.addr <= back_edge)
            .count(),
        ..Trip::default()
    };
    let Some(mut k) = at(head) else {
        return t;
    };
    // A bound on the walk: a malformed listing cannot loop it forever.
    for _ in 0..1_000_000 {
        let Some(i) = f.insts.get(k) else {
            break;
        };
        t.executed += 1;
        t.mma += usize::from(is_mma(i));
        if i.addr >= back_edge || (i.base() == "EXIT" && i.unconditional()) {
            break;
        }
        match i.base() {
            "CALL" if i.unconditional() => {
                t.calls += 1;
                let n = i.target().and_then(at).map_or(0, |c| callee_len(f, c));
                t.executed += n;
                t.in_calls += n;
            }
            "BRA" => {
                if let Some(to) = i.target().and_then(|a| at(a).map(|j| (a, j))) {
                    let (addr, j) = to;
                    if i.unconditional() {
                        k = j;
                        continue;
                    }
                    if addr > i.addr && skippable(f, k, j) {
                        t.skipped.push((i.addr, addr, j - k - 1));
                        k = j;
                        continue;
                    }
                }
            }
            _ => {}
        }
        k += 1;
    }
    t
}

/// Whether `i` calls a subroutine: a `CALL` whose target reaches a `RET`
/// before an `EXIT`. ptxas's loop-exit idiom (`@P0 CALL.REL.NOINC` to the
/// code after the loop) is a `CALL` too, but it never returns.
fn calls_subroutine(f: &SassFunction, i: &SassInst) -> bool {
    if i.base() != "CALL" {
        return false;
    }
    // (A call whose target cannot be found counts.)
    let Some(start) = i
        .target()
        .and_then(|a| f.insts.iter().position(|j| j.addr == a))
    else {
        return true;
    };
    f.insts[start..]
        .iter()
        .find(|j| matches!(j.base(), "RET" | "EXIT"))
        .is_some_and(|j| j.base() == "RET")
}

/// Instructions of the subroutine starting at index `start`, up to its
/// `RET`.
fn callee_len(f: &SassFunction, start: usize) -> usize {
    f.insts[start..]
        .iter()
        .position(|i| i.base() == "RET")
        .map_or(0, |n| n + 1)
}

/// Whether the conditional forward branch at index `k` to index `j` skips
/// a region the fast path never runs (module docs).
fn skippable(f: &SassFunction, k: usize, j: usize) -> bool {
    let branch = &f.insts[k];
    if let Some(p) = branch.pred.as_deref().and_then(|p| p.strip_prefix("@!")) {
        let checked = f.insts[k.saturating_sub(12)..k]
            .iter()
            .any(|i| i.base() == "FCHK" && i.operands.split(',').next().map(str::trim) == Some(p));
        if checked {
            return true;
        }
    }
    is_fallback(&f.insts[k + 1..j]) || is_wide_slow_path(&f.insts[k + 1..j])
}

/// Whether `region` is the f64 slow path of an inlined correctly rounded
/// division or root (the compiler's `expand` pass: taken only for
/// operands far from 1): double-precision math and nothing that touches
/// memory or tensor cores.
fn is_wide_slow_path(region: &[SassInst]) -> bool {
    let wide = |i: &SassInst| matches!(i.base(), "DFMA" | "DMUL") || i.op.starts_with("F2F.F64");
    let heavy = |i: &SassInst| {
        matches!(
            i.base(),
            "LDG" | "STG" | "LDS" | "STS" | "LDGSTS" | "HMMA" | "HGMMA" | "BAR" | "CALL"
        )
    };
    region.iter().any(wide) && !region.iter().any(heavy)
}

/// The figures of every function of `text` (a `cuobjdump -sass` listing).
pub fn stats(text: &str) -> Vec<KernelStats> {
    parse(text)
        .iter()
        .map(|f| KernelStats {
            name: f.name.clone(),
            static_len: f.insts.len(),
            calls: f.insts.iter().filter(|i| calls_subroutine(f, i)).count(),
            main_loop: main_loop(f).map(|l| walk(f, l)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "
	code for sm_80
		Function : k
        /*0000*/                   S2R R0, SR_TID.X ;          /* 0x0 */
                                                                /* 0x0 */
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0020*/               @P0 BRA 0x50 ;
        /*0030*/                   LDG.E.U16 R2, [R2.64] ;
        /*0040*/                   STS.U16 [R3], R2 ;
        /*0050*/                   CALL.REL.NOINC 0x80 ;
        /*0060*/              @!P1 BRA 0x10 ;
        /*0070*/                   EXIT ;
        /*0080*/                   IADD3 R1, R1, 0x1, RZ ;
        /*0090*/                   RET.REL.NODEC R20 0x0 ;
";

    #[test]
    fn parses_guards_opcodes_and_targets() {
        let f = &parse(LISTING)[0];
        assert_eq!(f.name, "k");
        assert_eq!(f.insts.len(), 10);
        let bra = &f.insts[2];
        assert_eq!(
            (bra.pred.as_deref(), bra.base(), bra.target()),
            (Some("@P0"), "BRA", Some(0x50))
        );
        assert_eq!(loops(f), vec![(0x10, 0x60)]);
    }

    #[test]
    fn a_trip_skips_fallbacks_and_follows_calls() {
        let s = &stats(LISTING)[0];
        assert_eq!((s.static_len, s.calls), (10, 1));
        let t = s.main_loop.as_ref().expect("a loop");
        // HMMA, BRA, CALL (+ IADD3 and RET inside), back edge.
        assert_eq!((t.executed, t.in_calls, t.calls, t.mma), (6, 2, 1, 1));
        assert_eq!(t.skipped, vec![(0x20, 0x50, 2)]);
    }

    #[test]
    fn a_loop_exit_is_not_a_subroutine_call() {
        let listing = "
	code for sm_80
		Function : k
        /*0000*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0010*/               @P0 CALL.REL.NOINC 0x30 ;
        /*0020*/                   BRA 0x0 ;
        /*0030*/                   STG.E [R2.64], R4 ;
        /*0040*/                   EXIT ;
        /*0050*/                   CALL.REL.NOINC 0x70 ;
        /*0060*/                   EXIT ;
        /*0070*/                   RET.REL.NODEC R20 0x0 ;
";
        // The exit idiom leads to EXIT; only the second CALL returns.
        assert_eq!(stats(listing)[0].calls, 1);
    }

    #[test]
    fn a_persistent_kernels_main_loop_is_the_innermost() {
        // A loop over programs (0x00..0x90) around two loops of HGMMAs.
        let listing = "
	code for sm_90a
		Function : k
        /*0000*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R4, gdesc[UR4], R4 ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R4, gdesc[UR4], R4 ;
        /*0030*/               @P0 BRA 0x10 ;
        /*0040*/                   IADD3 R1, R1, 0x1, RZ ;
        /*0050*/                   HGMMA.64x128x16.F32.BF16 R4, gdesc[UR4], R4 ;
        /*0060*/                   HGMMA.64x128x16.F32.BF16 R4, gdesc[UR4], R4 ;
        /*0070*/               @P1 BRA 0x50 ;
        /*0080*/                   STG.E [R2.64], R4 ;
        /*0090*/               @P2 BRA 0x0 ;
        /*00a0*/                   EXIT ;
";
        let f = &parse(listing)[0];
        assert_eq!(mma_loops(f), vec![(0x10, 0x30), (0x50, 0x70)]);
        assert_eq!(main_loop(f), Some((0x10, 0x30)));
    }

    #[test]
    fn garbage_is_no_functions_not_a_panic() {
        assert!(parse("not sass\n/*zz*/ ;\n").is_empty());
        let f = SassFunction {
            name: "x".into(),
            insts: vec![],
        };
        assert_eq!(main_loop(&f), None);
        assert_eq!(walk(&f, (0, 0)).executed, 0);
    }
}
