//! Address folding: a memory access whose address is an earlier access's
//! plus a constant reads the earlier register with an immediate offset
//! (`[%rd7+2048]`) instead of computing its own address.
//!
//! The lowering computes every element's address from its coordinates
//! (`((b·H + h)·N + row)·D + col`, scaled and added to the base), so the
//! addresses of the 32 stores of an accumulator tile are 32 chains of
//! 64-bit multiply-adds that differ only in constants. ptxas merges some of
//! them and not others. This pass reads each integer register written
//! once as an affine form over the registers it cannot see through
//! (`Σ cᵢ·leafᵢ + k`, in the register's width, so exactly, wrapping as
//! the hardware does), and an access whose form differs from an earlier
//! access's in `k` alone takes the earlier register plus the difference.
//! The chains nobody reads any more are then dead.
//!
//! Sound for the same reasons as [`crate::opt`]'s value numbering: only
//! registers written exactly once are leaves or folded, and only within a
//! basic block (a label starts a new one), where such a register keeps its
//! value from its definition on. The reuse window bounds how far a base
//! register's life is stretched.

use crate::ir::*;
use crate::opt::for_defs;
use rustc_hash::FxHashMap as HashMap;

/// At most this many leaves per form; wider sums are leaves themselves.
const MAX_TERMS: usize = 8;

/// How far (in instructions) after the access that last used it a base
/// register is reused: each reuse stretches the base's life to the new
/// access, and this bounds a gap in which it would be held for nothing.
const WINDOW: usize = 256;

/// The largest immediate offset folded (PTX address offsets are 32-bit).
const MAX_OFFSET: i64 = i32::MAX as i64;

/// `Σ coef·leaf + konst`, the terms sorted by leaf, no zero coefficient;
/// a leaf is a register and the point its value dates from (see
/// [`Block::form`]).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Form {
    terms: Vec<(u64, i64)>,
    konst: i64,
}

impl Form {
    fn leaf(id: u64) -> Form {
        Form {
            terms: vec![(id, 1)],
            konst: 0,
        }
    }

    fn konst(k: i64) -> Form {
        Form {
            terms: Vec::new(),
            konst: k,
        }
    }

    /// `self + k·other`, wrapped to `bits`.
    fn add_scaled(&self, other: &Form, k: i64, bits: u32) -> Form {
        let mut terms = self.terms.clone();
        for &(r, c) in &other.terms {
            match terms.binary_search_by_key(&r, |t| t.0) {
                Ok(at) => terms[at].1 = terms[at].1.wrapping_add(c.wrapping_mul(k)),
                Err(at) => terms.insert(at, (r, c.wrapping_mul(k))),
            }
        }
        for t in &mut terms {
            t.1 = wrap(t.1, bits);
        }
        terms.retain(|t| t.1 != 0);
        Form {
            terms,
            konst: wrap(self.konst.wrapping_add(other.konst.wrapping_mul(k)), bits),
        }
    }

    /// `k·self`, wrapped to `bits`.
    fn scaled(&self, k: i64, bits: u32) -> Form {
        Form::konst(0).add_scaled(self, k, bits)
    }
}

/// `x` reduced to `bits` bits, sign-extended (so that equal values in
/// that width compare equal).
fn wrap(x: i64, bits: u32) -> i64 {
    if bits >= 64 {
        x
    } else {
        let s = 64 - bits;
        (x << s) >> s
    }
}

/// The width in bits of an integer register type folded here.
fn width(ty: Ty) -> Option<u32> {
    match ty {
        Ty::U32 | Ty::S32 | Ty::B32 => Some(32),
        Ty::U64 | Ty::S64 | Ty::B64 => Some(64),
        _ => None,
    }
}

/// The memory address `i` accesses, mutably (each of these has one).
pub(crate) fn address(i: &mut Inst) -> Option<&mut Addr> {
    match i {
        Inst::Ld { addr, .. }
        | Inst::St { addr, .. }
        | Inst::Red { addr, .. }
        | Inst::LdV { addr, .. }
        | Inst::StV { addr, .. }
        | Inst::Ldmatrix { addr, .. } => Some(addr),
        Inst::CpAsync { dst, .. } => Some(dst),
        _ => None,
    }
}

/// Folds constant differences between addresses into immediate offsets
/// (see the module docs). The address arithmetic left unread is dead
/// code for the caller to remove.
pub fn fold_addresses(f: &mut Function) {
    let n = f.regs.len();
    let mut defs = vec![0u32; n];
    for i in &mut f.body {
        for_defs(i, |r| defs[r.index()] += 1);
    }
    let mut st = Block {
        defs,
        forms: vec![None; n],
        last_def: vec![usize::MAX; n],
        start: 0,
    };
    let mut table = Table::default();
    let mut dsts = Vec::new();
    // Positions count instructions other than source records, so that
    // what folds does not depend on them.
    let mut sources = 0;
    for idx in 0..f.body.len() {
        let pos = idx - sources;
        match f.body[idx] {
            Inst::Source(_) => {
                sources += 1;
                continue;
            }
            Inst::Label(_) => {
                table.clear();
                st.start = pos;
                continue;
            }
            _ => {}
        }
        // Fold this instruction's address.
        if let Some(a) = address(&mut f.body[idx]) {
            fold(a, pos, &f.regs, &st, &mut table);
        }
        // The form of the register this instruction defines.
        dsts.clear();
        for_defs(&mut f.body[idx], |r| dsts.push(*r));
        for &d in &dsts {
            st.last_def[d.index()] = pos;
        }
        if let [dst] = dsts[..] {
            if st.defs[dst.index()] == 1 && width(f.regs[dst.index()]).is_some() {
                let form = define(&f.body[idx], dst, &f.regs, &st);
                st.forms[dst.index()] = Some(form);
            }
        }
    }
}

/// Linear part -> (register, its constant, width, last use).
type Table = HashMap<Vec<(u64, i64)>, (Reg, i64, u32, usize)>;

/// Folds address `a` of instruction `idx` into an earlier base register
/// with the same linear part, or records it as a base.
fn fold(a: &mut Addr, idx: usize, regs: &[Ty], st: &Block, table: &mut Table) {
    let Addr::Reg(r, off) = *a else { return };
    let Some(bits) = width(regs[r.index()]) else {
        return;
    };
    let form = st.form(r);
    match table.get_mut(&form.terms) {
        Some((base, k0, b0, last)) if *b0 == bits && idx - *last <= WINDOW && *base != r => {
            let d = wrap(form.konst.wrapping_sub(*k0), bits).wrapping_add(off);
            if d.abs() <= MAX_OFFSET {
                *a = Addr::Reg(*base, d);
                *last = idx;
            }
        }
        // Only a register written once may serve as a base: a later write
        // would change what the offset is from.
        _ if st.defs[r.index()] == 1 => {
            table.insert(form.terms, (r, form.konst, bits, idx));
        }
        _ => {}
    }
}

/// What the pass knows at a point of the body.
struct Block {
    /// How many instructions write each register.
    defs: Vec<u32>,
    /// The forms of registers written once, in terms of the leaves at
    /// their definition.
    forms: Vec<Option<Form>>,
    /// Where each register was last written (`usize::MAX`: not yet).
    last_def: Vec<usize>,
    /// The index of the label that starts the current basic block.
    start: usize,
}

impl Block {
    /// The form of `r` as read here. A register written once in this
    /// block expands to its definition's form; anything else is a leaf,
    /// named by the register and the point its value dates from (its last
    /// write in this block, or the block's start), so that two reads
    /// share a leaf exactly when they read the same value.
    fn form(&self, r: Reg) -> Form {
        let at = self.last_def[r.index()];
        let in_block = at != usize::MAX && at >= self.start;
        if in_block && self.defs[r.index()] == 1 {
            if let Some(f) = &self.forms[r.index()] {
                return f.clone();
            }
        }
        let since = if in_block { at } else { self.start };
        Form::leaf(u64::from(r.0) << 32 | since as u64)
    }

    /// `dst`, just written by the instruction being read, as a leaf.
    fn form_leaf(&self, dst: Reg) -> Form {
        Form::leaf(u64::from(dst.0) << 32 | self.last_def[dst.index()] as u64)
    }
}

/// The affine form of integer register `dst`, which `i` defines: its
/// operands' forms combined when `i` is arithmetic this pass sees
/// through, else `dst` itself as a leaf.
fn define(i: &Inst, dst: Reg, regs: &[Ty], st: &Block) -> Form {
    let leaf = || st.form_leaf(dst);
    let Some(bits) = width(regs[dst.index()]) else {
        return leaf();
    };
    // An operand's form: its register's, a leaf, or a constant. Operands
    // of another width (or registers written more than once) stop here.
    let of = |o: &Operand| -> Option<Form> {
        match o {
            Operand::Int(k) => Some(Form::konst(wrap(*k, bits))),
            Operand::Reg(r) if width(regs[r.index()]) == Some(bits) => Some(st.form(*r)),
            _ => None,
        }
    };
    let konst = |o: &Operand| match o {
        Operand::Int(k) => Some(*k),
        _ => None,
    };
    let form = match i {
        Inst::Mov { src, .. } => of(src),
        Inst::Bin { op, ty, a, b, .. } if width(*ty) == Some(bits) => match op {
            BinOp::Add => of(a).zip(of(b)).map(|(x, y)| x.add_scaled(&y, 1, bits)),
            BinOp::Sub => of(a).zip(of(b)).map(|(x, y)| x.add_scaled(&y, -1, bits)),
            BinOp::Mul => match (konst(a), konst(b)) {
                (_, Some(k)) => of(a).map(|x| x.scaled(k, bits)),
                (Some(k), _) => of(b).map(|x| x.scaled(k, bits)),
                _ => None,
            },
            BinOp::Shl => match konst(b) {
                Some(s) if (0..bits as i64).contains(&s) => {
                    of(a).map(|x| x.scaled(1i64.wrapping_shl(s as u32), bits))
                }
                _ => None,
            },
            _ => None,
        },
        Inst::Fma { ty, a, b, c, .. } if width(*ty) == Some(bits) => {
            let (x, k) = match (konst(a), konst(b)) {
                (_, Some(k)) => (a, k),
                (Some(k), _) => (b, k),
                _ => return leaf(),
            };
            of(x).zip(of(c)).map(|(x, c)| c.add_scaled(&x, k, bits))
        }
        _ => None,
    };
    let form = form.filter(|f| f.terms.len() <= MAX_TERMS);
    // Anything else this register holds is a leaf of later forms.
    form.unwrap_or_else(leaf)
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::ir::Function;

    /// Kernel `k(a)` with `body` after `%rd1` = param `a`, `%rd2` = the
    /// thread index widened, optimised; its printed body.
    pub(crate) fn optimised(body: &str) -> String {
        let text = format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n\
             .extern .shared .align 16 .b8 tsr_smem[];\n\n\
             .visible .entry k(\n\t.param .u64 a\n)\n.maxntid 32, 1, 1\n{{\n\
             \t.reg .pred %p<4>;\n\t.reg .b16 %rs<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<4>;\n\
             \tld.param.u64 %rd1, [a];\n\
             \tmov.u32 %r0, %tid.x;\n\
             \tcvt.u64.u32 %rd2, %r0;\n\
             {body}\tret;\n}}\n"
        );
        let m = crate::read_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut f: Function = m.functions[0].clone();
        crate::opt::optimize(&mut f);
        let mut out = String::new();
        crate::print::print_function(&mut out, &f);
        out
    }

    /// The lines of `out` before the loop label `$L0`, and those from it
    /// to its back edge (`bra.uni $L0;`), trimmed.
    pub(crate) fn split_loop(out: &str) -> (Vec<&str>, Vec<&str>) {
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        let h = lines.iter().position(|l| *l == "$L0:").expect("a loop");
        let e = lines
            .iter()
            .position(|l| *l == "bra.uni $L0;")
            .expect("a back edge");
        (lines[..h].to_vec(), lines[h + 1..e].to_vec())
    }

    /// The address operands of the memory instructions in `out`.
    fn addresses(out: &str) -> Vec<&str> {
        out.lines()
            .filter(|l| l.contains("ld.") || l.contains("st."))
            .filter_map(|l| Some(&l[l.find('[')? + 1..l.find(']')?]))
            .filter(|a| *a != "a")
            .collect()
    }

    #[test]
    fn addresses_a_constant_apart_share_one_register() {
        // (tid + 8)·4 + a and (tid·2 + 16)·2 + a are tid·4 + a plus 32.
        let out = optimised(
            "\tadd.s64 %rd3, %rd2, 8;\n\
             \tmad.lo.s64 %rd4, %rd3, 4, %rd1;\n\
             \tst.global.f32 [%rd4], 0f00000000;\n\
             \tmul.lo.s64 %rd5, %rd2, 2;\n\
             \tadd.s64 %rd6, %rd5, 16;\n\
             \tmad.lo.s64 %rd7, %rd6, 2, %rd1;\n\
             \tst.global.f32 [%rd7+4], 0f00000000;\n",
        );
        let a = addresses(&out);
        assert_eq!(a.len(), 2, "{out}");
        assert_eq!(format!("{}+4", a[0]), a[1], "{out}");
        assert!(!out.contains("mul.lo.s64"), "dead arithmetic left:\n{out}");
    }

    #[test]
    fn a_register_written_again_in_between_is_another_leaf() {
        // %rd3 changes between the two stores: the second address is not
        // the first plus a constant.
        let out = optimised(
            "\tmov.u64 %rd3, %rd2;\n\
             \tmad.lo.s64 %rd4, %rd3, 4, %rd1;\n\
             \tst.global.f32 [%rd4], 0f00000000;\n\
             \tadd.s64 %rd3, %rd3, 1;\n\
             \tmad.lo.s64 %rd5, %rd3, 4, %rd1;\n\
             \tst.global.f32 [%rd5], 0f00000000;\n",
        );
        let a = addresses(&out);
        assert_eq!(a.len(), 2, "{out}");
        assert!(!a[1].starts_with(a[0]), "{out}");
    }

    #[test]
    fn no_address_is_folded_across_a_label() {
        let out = optimised(
            "\tmad.lo.s64 %rd4, %rd2, 4, %rd1;\n\
             \tst.global.f32 [%rd4], 0f00000000;\n\
             $L0:\n\
             \tmad.lo.s64 %rd5, %rd2, 4, %rd1;\n\
             \tst.global.f32 [%rd5], 0f00000000;\n",
        );
        let a = addresses(&out);
        assert_ne!(a[0], a[1], "{out}");
    }

    #[test]
    fn thirty_two_bit_shared_addresses_fold_in_their_width() {
        let out = optimised(
            "\tmov.u32 %r1, tsr_smem;\n\
             \tshl.b32 %r2, %r0, 4;\n\
             \tadd.u32 %r3, %r1, %r2;\n\
             \tld.shared.f32 %f0, [%r3];\n\
             \tadd.u32 %r4, %r2, 4096;\n\
             \tadd.u32 %r5, %r1, %r4;\n\
             \tld.shared.f32 %f1, [%r5];\n\
             \tst.global.f32 [%rd1], %f0;\n\
             \tst.global.f32 [%rd1+4], %f1;\n",
        );
        let a = addresses(&out);
        assert_eq!(format!("{}+4096", a[0]), a[1], "{out}");
    }
}
