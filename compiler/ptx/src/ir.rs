//! The Target IR data structures: one thread's code, PTX-shaped.
//!
//! A [`Function`] is what every thread of a block runs. Its registers are
//! typed virtual registers (PTX allocates the physical ones); memory is
//! reached through explicit state spaces; the special registers (thread and
//! block indices) are read by [`Inst::Special`]. Control flow is flat:
//! labels and (optionally predicated) branches, as in PTX itself. The text
//! form of this IR *is* the PTX our printer writes.

use tessera_core::Number;

/// How the comment before an `assert`'s traps begins; the rest says what
/// a failure means (the simulator reports it where a trap fires).
pub const ASSERT_COMMENT: &str = "assert: ";

/// A register type, as PTX names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A predicate (`.pred`).
    Pred,
    /// 16 untyped bits (bf16 and fp16 values in memory).
    B16,
    /// 32 untyped bits.
    B32,
    /// 64 untyped bits.
    B64,
    /// Unsigned 8-bit integers (memory only).
    U8,
    /// Signed 8-bit integers (memory only).
    S8,
    /// Signed 16-bit integers (memory only).
    S16,
    /// Unsigned 32-bit integers.
    U32,
    /// Unsigned 64-bit integers (addresses).
    U64,
    /// Signed 32-bit integers.
    S32,
    /// Signed 64-bit integers.
    S64,
    /// Single precision.
    F32,
    /// Double precision.
    F64,
}

impl Ty {
    /// The PTX suffix, without the dot.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Pred => "pred",
            Ty::B16 => "b16",
            Ty::B32 => "b32",
            Ty::B64 => "b64",
            Ty::U8 => "u8",
            Ty::S8 => "s8",
            Ty::S16 => "s16",
            Ty::U32 => "u32",
            Ty::U64 => "u64",
            Ty::S32 => "s32",
            Ty::S64 => "s64",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
        }
    }

    /// Bytes in memory.
    pub fn bytes(self) -> u32 {
        match self {
            Ty::Pred | Ty::U8 | Ty::S8 => 1,
            Ty::B16 | Ty::S16 => 2,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 => 4,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 8,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }

    /// The type of a register that holds a value of this type (PTX has no
    /// 8-bit registers; 8- and 16-bit memory values widen to 32 bits).
    pub fn reg(self) -> Ty {
        match self {
            Ty::U8 => Ty::U32,
            Ty::S8 | Ty::S16 => Ty::S32,
            t => t,
        }
    }
}

/// A narrow float format of tensor-core operands and packed conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fmt {
    /// bfloat16.
    Bf16,
    /// IEEE half precision.
    F16,
    /// TensorFloat-32 (f32 bits, 10 mantissa bits used).
    Tf32,
    /// fp8 with 4 exponent and 3 mantissa bits (saturating, no infinity).
    E4m3,
    /// fp8 with 5 exponent and 2 mantissa bits.
    E5m2,
    /// Signed 8-bit integers (`mma` accumulates them in s32).
    S8,
    /// Unsigned 8-bit integers.
    U8,
}

impl Fmt {
    /// The PTX name, without the dot.
    pub fn name(self) -> &'static str {
        match self {
            Fmt::Bf16 => "bf16",
            Fmt::F16 => "f16",
            Fmt::Tf32 => "tf32",
            Fmt::E4m3 => "e4m3",
            Fmt::E5m2 => "e5m2",
            Fmt::S8 => "s8",
            Fmt::U8 => "u8",
        }
    }

    /// Elements per 32-bit fragment register.
    pub fn per_reg(self) -> i64 {
        match self {
            Fmt::Tf32 => 1,
            Fmt::Bf16 | Fmt::F16 => 2,
            Fmt::E4m3 | Fmt::E5m2 | Fmt::S8 | Fmt::U8 => 4,
        }
    }

    /// The K of `mma.sync.m16n8kK` with operands of this format.
    pub fn mma_k(self) -> i64 {
        8 * self.per_reg()
    }

    /// Whether `wgmma.mma_async` takes transpose operands for this format
    /// (16-bit floats: either operand may be MN-major); every other format
    /// reads both operands K-major.
    pub fn wgmma_transposes(self) -> bool {
        matches!(self, Fmt::Bf16 | Fmt::F16)
    }

    /// Whether this is one of the fp8 formats.
    pub fn is_fp8(self) -> bool {
        matches!(self, Fmt::E4m3 | Fmt::E5m2)
    }

    /// Whether this is an integer format (products summed exactly in s32).
    pub fn is_int(self) -> bool {
        matches!(self, Fmt::S8 | Fmt::U8)
    }

    /// The accumulator type of `mma` with operands of this format.
    pub fn acc(self) -> Ty {
        if self.is_int() {
            Ty::S32
        } else {
            Ty::F32
        }
    }
}

tessera_core::entity!(
    /// A virtual register: an index into [`Function::regs`].
    Reg,
    "%r"
);

tessera_core::entity!(
    /// A branch target.
    Label
);

/// A state space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Device memory.
    Global,
    /// The block's shared memory.
    Shared,
    /// The thread's own memory (the `tsr_local` array).
    Local,
}

impl Space {
    /// The PTX name, without the dot.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local",
        }
    }
}

/// A special register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// `%tid.x`: the thread's index in its block.
    TidX,
    /// `%ctaid.x/y/z`: the block's index in the grid.
    Ctaid(u8),
    /// `%nctaid.x/y/z`: the grid's extent.
    Nctaid(u8),
}

/// An operand: a register or an immediate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// A register.
    Reg(Reg),
    /// An integer immediate.
    Int(i64),
    /// A float immediate, printed in the instruction's type.
    Float(f64),
}

impl From<Number> for Operand {
    fn from(n: Number) -> Operand {
        match n {
            Number::Int(i) => Operand::Int(i),
            Number::Float(f) => Operand::Float(f),
        }
    }
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Operand {
        Operand::Reg(r)
    }
}

/// The combination of an atomic reduction (`red`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedOp {
    /// `[a] + v`.
    Add,
    /// `max([a], v)`.
    Max,
    /// `min([a], v)`.
    Min,
}

impl RedOp {
    /// The PTX name.
    pub fn name(self) -> &'static str {
        match self {
            RedOp::Add => "add",
            RedOp::Max => "max",
            RedOp::Min => "min",
        }
    }
}

/// Binary arithmetic and logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `add` (`.rn` for floats).
    Add,
    /// `sub`.
    Sub,
    /// `mul` (`.lo` for integers, `.rn` for floats).
    Mul,
    /// `div` (`.rn` for floats: IEEE division).
    Div,
    /// `rem` (integers, sign of the dividend).
    Rem,
    /// `max` (`.NaN` for floats).
    Max,
    /// `min` (`.NaN` for floats).
    Min,
    /// `and`.
    And,
    /// `or`.
    Or,
    /// `xor`.
    Xor,
    /// `shl`.
    Shl,
    /// `shr` (arithmetic for signed types).
    Shr,
    /// `div.full.f32`: division within 2 ulp, exact on zeros, infinities
    /// and NaN (the special cases of the correctly rounded division).
    DivFull,
    /// `mul.hi`: the upper half of the full product (integers).
    MulHi,
}

impl BinOp {
    /// The PTX opcode.
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::Max => "max",
            BinOp::Min => "min",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
            BinOp::MulHi => "mul",
            BinOp::DivFull => "div",
        }
    }
}

/// Unary arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `neg`.
    Neg,
    /// `abs`.
    Abs,
    /// `not` (predicates and integers).
    Not,
    /// `sqrt.rn`: correctly rounded.
    Sqrt,
    /// `rcp.rn`: correctly rounded reciprocal.
    Rcp,
    /// `ex2.approx`: 2^x (about 2 ulp in f32).
    Ex2,
    /// `lg2.approx`: log2 x (about 2 ulp in f32).
    Lg2,
    /// `tanh.approx` (sm_75+; about 2^-11 relative).
    Tanh,
    /// `rcp.approx.ftz`: a reciprocal to about 1 ulp in f32; in f64 from
    /// the high word only (about 2^-20 relative), a Newton step's seed.
    RcpApprox,
    /// `rsqrt.approx.ftz` (f64: about 2^-20 relative, a seed).
    RsqrtApprox,
    /// `sqrt.approx` (f32: exact on zeros, infinities, negatives and NaN).
    SqrtApprox,
}

impl UnOp {
    /// The PTX opcode with its rounding or approximation modifier for
    /// operands of type `ty`.
    pub fn name(self, ty: Ty) -> &'static str {
        match (self, ty) {
            (UnOp::Neg, _) => "neg",
            (UnOp::Abs, _) => "abs",
            (UnOp::Not, _) => "not",
            (UnOp::Sqrt, _) => "sqrt.rn",
            (UnOp::Rcp, _) => "rcp.rn",
            (UnOp::Ex2, _) => "ex2.approx",
            (UnOp::Lg2, _) => "lg2.approx",
            (UnOp::Tanh, _) => "tanh.approx",
            (UnOp::RcpApprox, _) => "rcp.approx.ftz",
            (UnOp::RsqrtApprox, _) => "rsqrt.approx.ftz",
            (UnOp::SqrtApprox, _) => "sqrt.approx",
        }
    }
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl Cmp {
    /// The PTX comparison name for operands of type `ty` (floats compare
    /// ordered, except `!=` which is true for NaN, as in IEEE).
    pub fn name(self, ty: Ty) -> &'static str {
        let unsigned = matches!(ty, Ty::U32 | Ty::U64 | Ty::B16 | Ty::B32 | Ty::B64);
        match (self, unsigned, ty.is_float()) {
            (Cmp::Eq, _, _) => "eq",
            (Cmp::Ne, _, true) => "neu",
            (Cmp::Ne, _, false) => "ne",
            (Cmp::Lt, true, _) => "lo",
            (Cmp::Le, true, _) => "ls",
            (Cmp::Gt, true, _) => "hi",
            (Cmp::Ge, true, _) => "hs",
            (Cmp::Lt, false, _) => "lt",
            (Cmp::Le, false, _) => "le",
            (Cmp::Gt, false, _) => "gt",
            (Cmp::Ge, false, _) => "ge",
        }
    }
}

/// A guard: the instruction runs where the predicate is `true` (or `false`
/// when negated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    /// The predicate register.
    pub pred: Reg,
    /// Whether the condition is negated (`@!p`).
    pub negated: bool,
}

/// A memory operand: a register (64-bit for global memory, a 32-bit
/// shared-window address for shared memory) plus a byte offset, or a
/// constant offset into the dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Addr {
    /// `[reg + offset]`.
    Reg(Reg, i64),
    /// `[tsr_smem + offset]`.
    Shared(i64),
}

/// How `shfl.sync` picks the lane it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    /// Lane `lane - b`.
    Up,
    /// Lane `lane + b`.
    Down,
    /// Lane `lane ^ b`.
    Bfly,
    /// Lane `b`.
    Idx,
}

impl ShflMode {
    /// The PTX mode name.
    pub fn name(self) -> &'static str {
        match self {
            ShflMode::Up => "up",
            ShflMode::Down => "down",
            ShflMode::Bfly => "bfly",
            ShflMode::Idx => "idx",
        }
    }
}

/// A type conversion's rounding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Round {
    /// No modifier (exact conversions, or integer widening).
    None,
    /// Round to nearest even (`.rn`), float results.
    Nearest,
    /// Round toward zero (`.rzi`), float to integer, or to an integral
    /// float (`cvt.rzi.f32.f32`).
    TowardZero,
    /// Round to the nearest integer, ties to even (`.rni`).
    NearestInt,
    /// Round down to an integer (`.rmi`).
    Floor,
    /// Round up to an integer (`.rpi`).
    Ceil,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// `dst = src`.
    Mov {
        /// Destination.
        dst: Reg,
        /// Source.
        src: Operand,
    },
    /// `dst = %special`.
    Special {
        /// Destination (u32).
        dst: Reg,
        /// The special register.
        reg: Special,
    },
    /// `dst = a op b` in type `ty`.
    Bin {
        /// The operation.
        op: BinOp,
        /// Operand type.
        ty: Ty,
        /// Destination.
        dst: Reg,
        /// Left operand.
        a: Operand,
        /// Right operand.
        b: Operand,
    },
    /// `dst = op a` in type `ty`.
    Un {
        /// The operation.
        op: UnOp,
        /// Operand type.
        ty: Ty,
        /// Destination.
        dst: Reg,
        /// Operand.
        a: Operand,
    },
    /// `dst = a * b + c`, rounded once (`fma.rn`), or integer `mad.lo`.
    Fma {
        /// Operand type.
        ty: Ty,
        /// Destination.
        dst: Reg,
        /// Factor.
        a: Operand,
        /// Factor.
        b: Operand,
        /// Addend.
        c: Operand,
    },
    /// `dst = a cmp b` into a predicate.
    Setp {
        /// The comparison.
        cmp: Cmp,
        /// Operand type.
        ty: Ty,
        /// Destination predicate.
        dst: Reg,
        /// Left operand.
        a: Operand,
        /// Right operand.
        b: Operand,
    },
    /// `dst = pred ? a : b`.
    Selp {
        /// Operand type.
        ty: Ty,
        /// Destination.
        dst: Reg,
        /// Taken when the predicate holds.
        a: Operand,
        /// Taken otherwise.
        b: Operand,
        /// The predicate.
        pred: Reg,
    },
    /// Logical operation on predicates: `and`, `or`, `xor` (`op`) or `not`.
    PredOp {
        /// `And`, `Or` or `Xor`; `None` for `not a`.
        op: Option<BinOp>,
        /// Destination predicate.
        dst: Reg,
        /// Operand.
        a: Reg,
        /// Second operand (ignored for `not`).
        b: Reg,
    },
    /// `dst = cvt(src)` from `from` to `to`.
    Cvt {
        /// Destination type.
        to: Ty,
        /// Source type.
        from: Ty,
        /// Rounding.
        round: Round,
        /// Destination.
        dst: Reg,
        /// Source.
        src: Reg,
    },
    /// A float to bf16/fp16 conversion into 16 bits (`cvt.rn.bf16.f32`), or
    /// back (`cvt.f32.bf16`), for `half` = bf16 (`true`) or fp16.
    CvtHalf {
        /// Whether the 16-bit format is bf16 (else fp16).
        bf16: bool,
        /// Whether this widens to f32 (else narrows from f32).
        widen: bool,
        /// Destination.
        dst: Reg,
        /// Source.
        src: Reg,
    },
    /// `dst = [addr]` in `space`, as `ty`.
    Ld {
        /// State space.
        space: Space,
        /// Memory type.
        ty: Ty,
        /// Destination.
        dst: Reg,
        /// Address.
        addr: Addr,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `[addr] = src` in `space`, as `ty`.
    St {
        /// State space.
        space: Space,
        /// Memory type.
        ty: Ty,
        /// Address.
        addr: Addr,
        /// Value.
        src: Operand,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `[addr] = op([addr], src)` in global memory, atomically, with no
    /// result (`red.global.add.f32`).
    Red {
        /// The combination.
        op: RedOp,
        /// Operation type: `.s32`, `.u32`, `.s64`, `.u64`, `.f32` or
        /// `.f64`.
        ty: Ty,
        /// Address.
        addr: Addr,
        /// Value.
        src: Reg,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `dst = param` (a kernel parameter, by index).
    LdParam {
        /// Destination.
        dst: Reg,
        /// Index into [`Function::params`].
        param: usize,
    },
    /// `dst = the address of the dynamic shared memory` (32-bit window).
    SharedBase {
        /// Destination (u32).
        dst: Reg,
    },
    /// `dst = the address of the thread's local array` ([`LOCAL_SYMBOL`]).
    LocalBase {
        /// Destination (u64).
        dst: Reg,
    },
    /// `ld.SPACE.vN.TY {dst...}, [addr]`: `dst.len()` (2 or 4) consecutive
    /// values, the access aligned to its whole size.
    LdV {
        /// State space.
        space: Space,
        /// Element type.
        ty: Ty,
        /// Destinations, lowest address first.
        dst: Vec<Reg>,
        /// Address.
        addr: Addr,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `st.SPACE.vN.TY [addr], {src...}`.
    StV {
        /// State space.
        space: Space,
        /// Element type.
        ty: Ty,
        /// Address.
        addr: Addr,
        /// Values, lowest address first.
        src: Vec<Reg>,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `cvt.rn.bf16x2.f32` (`f16x2`; `cvt.rn.satfinite.e4m3x2.f32`,
    /// `e5m2x2`): two f32 values rounded and packed into 32 bits (16 for
    /// the fp8 formats), `hi` in the upper half.
    CvtPack {
        /// The format (not [`Fmt::Tf32`]).
        fmt: Fmt,
        /// Destination (b32; b16 for fp8).
        dst: Reg,
        /// The upper half's value.
        hi: Reg,
        /// The lower half's value.
        lo: Reg,
    },
    /// `cvt.rn.f16x2.e4m3x2` (or `e5m2x2`): the two fp8 values of a 16-bit
    /// register widened (exactly) to two fp16 values, the low byte's in
    /// the low half.
    CvtF8Widen {
        /// The fp8 format ([`Fmt::E4m3`] or [`Fmt::E5m2`]).
        fmt: Fmt,
        /// Destination (u32 bits of an f16x2).
        dst: Reg,
        /// Source (b16).
        src: Reg,
    },
    /// `cvt.rna.tf32.f32` (ties away from zero, sm_80) or
    /// `cvt.rn.tf32.f32` (ties to even, sm_90): an f32 rounded to tf32, the
    /// bits of an f32 with the low 13 mantissa bits zero.
    CvtTf32 {
        /// Whether ties round away from zero (else to even).
        rna: bool,
        /// Destination (b32).
        dst: Reg,
        /// Source (f32).
        src: Reg,
    },
    /// `mov.b32 dst, {lo, hi}`: two 16-bit registers joined into 32 bits.
    Join {
        /// Destination (b32).
        dst: Reg,
        /// The lower half (16 bits).
        lo: Reg,
        /// The upper half (16 bits).
        hi: Reg,
    },
    /// `mma.sync.aligned.m16n8kK.row.col.f32.A.B.f32 d, a, b, c`: one
    /// warp's 16×8 tile of `a·b + c` with f32 accumulators, operands in
    /// formats `fmt` (K = 8 × [`Fmt::per_reg`]), in the fragment layouts
    /// of the PTX ISA. With 8-bit integer operands the accumulators are
    /// s32 (`.s32.s8.s8.s32`) and the sums wrap.
    Mma {
        /// The formats of A and of B (the same but for the two fp8 ones
        /// and the two integer ones).
        fmt: [Fmt; 2],
        /// Result fragment (f32, or s32: [`Fmt::acc`]).
        d: [Reg; 4],
        /// A fragment (b32, [`Fmt::per_reg`] elements each).
        a: [Reg; 4],
        /// B fragment (b32).
        b: [Reg; 2],
        /// Accumulator fragment (as `d`).
        c: [Reg; 4],
    },
    /// `cp.async.cg.shared.global [dst], [src], 16`: an asynchronous
    /// 16-byte copy from global to shared memory (both 16-byte aligned).
    CpAsync {
        /// Shared address (a 32-bit register plus offset).
        dst: Addr,
        /// Global address (64-bit register).
        src: Reg,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `shfl.sync.MODE.b32 dst, src, b, clamp, 0xffffffff`: `src` of
    /// another lane of the warp, chosen by `mode` and `b` (a lane outside
    /// the clamp reads its own `src`). All 32 lanes take part.
    Shfl {
        /// Which lane to read.
        mode: ShflMode,
        /// Destination (32 bits).
        dst: Reg,
        /// The value read (32 bits).
        src: Reg,
        /// Lane offset, mask or index.
        b: Operand,
        /// The clamp and segment mask (`c` in the PTX ISA).
        clamp: u32,
    },
    /// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 {dst}, [addr]`:
    /// `dst.len()` (1, 2 or 4) 8×8 matrices of 16-bit elements, whose rows
    /// lanes `8q..8q+7` address for matrix `q`; lane `l` receives row `l/4`,
    /// elements `2(l%4)` and the next (column `l/4`, rows `2(l%4)` and the
    /// next, when transposed), the first in the low half. All 32 lanes take
    /// part.
    Ldmatrix {
        /// Whether each matrix is transposed on the way.
        trans: bool,
        /// One b32 register per matrix.
        dst: Vec<Reg>,
        /// This lane's row address (shared window, 16-byte aligned).
        addr: Addr,
    },
    /// `wgmma.mma_async.sync.aligned.m64nNkK.f32.A.B {d}, adesc, bdesc,
    /// scale-d, 1, 1, trans-a, trans-b`: a warpgroup's (four consecutive
    /// warps') 64×N tile of `a·b (+ d)` with both operands in shared
    /// memory, described by 64-bit matrix descriptors (start address,
    /// leading and stride byte offsets, swizzle mode: see the PTX ISA's
    /// canonical layouts). Asynchronous: `d` holds the result only after a
    /// `wgmma.commit_group` and the `wgmma.wait_group` that retires it,
    /// and nothing may touch `d` in between. Warp `w % 4` of the group
    /// holds rows `16(w % 4) ..` in the layout of `mma.sync`'s C fragment,
    /// one 4-register block per 8 columns (sm_90a).
    Wgmma {
        /// The formats of A and B (K = [`Fmt::mma_k`]).
        fmt: [Fmt; 2],
        /// The accumulators (N/2 f32 registers), read when `accumulate`
        /// and written, in place.
        d: Vec<Reg>,
        /// A: a descriptor or registers.
        a: WgmmaA,
        /// B's descriptor (b64).
        b: Reg,
        /// `scale-d`: D = A·B + D (else D = A·B).
        accumulate: bool,
        /// A is stored M-major (its M elements contiguous) rather than
        /// K-major (for A in shared memory only).
        trans_a: bool,
        /// B is stored N-major rather than K-major.
        trans_b: bool,
    },
    /// `wgmma.fence.sync.aligned`: orders the warp's earlier register
    /// accesses before the `wgmma.mma_async` that follow.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`: the warpgroup's uncommitted
    /// `wgmma.mma_async` become one group.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned n`: at most `n` groups still in
    /// flight.
    WgmmaWait(u32),
    /// `elect.sync _|dst, -1`: `dst` is true in exactly one lane of the
    /// warp (all 32 take part; sm_90).
    Elect {
        /// The result (pred).
        dst: Reg,
    },
    /// `fence.proxy.async.shared::cta`: the thread's earlier shared-memory
    /// writes are ordered before later reads by the async proxy
    /// (`wgmma`, TMA).
    FenceProxyAsync,
    /// `mbarrier.init.shared::cta.b64 [addr], count`: a barrier object (8
    /// shared bytes) expecting `count` arrivals per phase, in phase 0.
    MbarInit {
        /// The barrier (8-byte aligned).
        addr: Addr,
        /// Arrivals that complete a phase.
        count: u32,
    },
    /// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [addr], bytes`: the
    /// current phase also waits for `bytes` of asynchronous copies, and
    /// this thread arrives.
    MbarExpectTx {
        /// The barrier.
        addr: Addr,
        /// Transaction bytes.
        bytes: u32,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `mbarrier.arrive.shared::cta.b64 _, [addr]`: this thread arrives.
    MbarArrive {
        /// The barrier.
        addr: Addr,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `mbarrier.try_wait.parity.shared::cta.b64 dst, [addr], parity`:
    /// whether the phase of parity `parity` (0 or 1) has completed (the
    /// current phase, or the one before it); may suspend a while first.
    MbarTryWait {
        /// The result (pred).
        dst: Reg,
        /// The barrier.
        addr: Addr,
        /// The phase parity waited for (u32).
        parity: Operand,
    },
    /// `cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes
    /// [dst], [map, {coords}], [mbar]`: the Tensor Memory Accelerator copies
    /// the box of the tensor map `map` at element coordinates `coords`
    /// (innermost first; outside the tensor it fills zeros) to shared
    /// memory, swizzled as the map says, and completes its bytes on the
    /// barrier `mbar`.
    TmaLoad {
        /// Shared destination (128-byte aligned; 1024 with a 128-byte
        /// swizzle).
        dst: Addr,
        /// The tensor map's generic address (u64, 64-byte aligned).
        map: Reg,
        /// Coordinates (s32), one per dimension of the map.
        coords: Vec<Reg>,
        /// The barrier that counts the bytes.
        mbar: Addr,
        /// Runs only where the guard holds.
        guard: Option<Guard>,
    },
    /// `fence.proxy.tensormap::generic.acquire.gpu [map], 128`: the tensor
    /// map at `map`, written to global memory by the host, is what the
    /// Tensor Memory Accelerator reads.
    FenceTensorMap {
        /// The tensor map's address (u64).
        map: Reg,
    },
    /// `cp.async.commit_group`.
    CpAsyncCommit,
    /// `cp.async.wait_group n`: at most `n` groups still in flight.
    CpAsyncWait(u32),
    /// `bar.sync 0`: all threads of the block.
    Barrier,
    /// `bar.sync id, threads`: the first `threads` threads to arrive at
    /// barrier `id` (a multiple of 32; whole warps arrive). A warp-
    /// specialised kernel's consumer warps meet on one while its producer
    /// warps do not take part.
    NamedBarrier {
        /// Barrier number, 1 to 15 (0 is the block's).
        id: u32,
        /// Threads the barrier waits for.
        threads: u32,
    },
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs`: a warpgroup releases
    /// registers to the SM's pool (`dec`) or claims them (`inc`, waiting
    /// until they are free). Every warp of the warpgroup executes it, with
    /// the same count: 24 to 256, a multiple of 8.
    SetMaxNReg {
        /// Claims (`true`) or releases.
        inc: bool,
        /// Registers per thread afterwards.
        regs: u32,
    },
    /// `@p trap;`: the kernel stops with an error where `guard` holds (a
    /// check the language defines). By construction a negated guard
    /// (`@!p trap`) is a failed Tile IR `assert` (an index out of range in
    /// `gather`, `take`, an embedding) and a plain one an integer division
    /// by zero: the simulator names the cause from that.
    Trap {
        /// Where the kernel stops.
        guard: Guard,
    },
    /// A branch target.
    Label(Label),
    /// A branch, taken where the guard holds (always when `None`).
    Bra {
        /// Target.
        target: Label,
        /// Condition.
        guard: Option<Guard>,
    },
    /// Return from the kernel.
    Ret,
    /// A comment line in the PTX (provenance: which Tile IR op this is).
    Comment(String),
    /// The instructions that follow compute this source expression: the
    /// lowering's record of where code comes from, which
    /// [`locate`](crate::locate) turns into a `.loc` (an empty span: the
    /// kernel's own) and the printer otherwise skips.
    Source(tessera_tile::Span),
    /// `.loc file line column`: the instructions that follow come from this
    /// source position (`file` indexes [`Module::files`] from 1).
    Loc {
        /// The `.file` number.
        file: u32,
        /// Line, from 1.
        line: u32,
        /// Column, from 1.
        column: u32,
    },
}

/// Where a `wgmma.mma_async`'s A operand comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaA {
    /// Shared memory, through a matrix descriptor (b64).
    Desc(Reg),
    /// Registers: each warp's 16 rows of the 64 × K tile in `mma.sync`'s A
    /// fragment layout (four b32 of 16-bit pairs).
    Regs([Reg; 4]),
}

/// A tensor map a kernel's TMA loads read: which tensor parameter it
/// describes, its box and swizzle. The kernel receives the map's global
/// address in a `u64` parameter whose name says all this
/// ([`TensorMapDecl::param_name`]), so that PTX read back (from the
/// compile cache, by the simulator) still tells the launcher which map to
/// build: the tensor's extents and strides come from the tensor at launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapDecl {
    /// The kernel parameter of the tensor.
    pub tensor: usize,
    /// Box extents in elements, innermost (contiguous) dimension first,
    /// one per dimension of the tensor.
    pub boxes: Vec<u32>,
    /// Swizzle width in bytes: 0, 32, 64 or 128.
    pub swizzle: u32,
}

impl TensorMapDecl {
    /// The parameter name of map number `i` of kernel `kernel`:
    /// `KERNEL_tmapI_tT_bB0xB1..._sS`.
    pub fn param_name(&self, kernel: &str, i: usize) -> String {
        let boxes: Vec<String> = self.boxes.iter().map(u32::to_string).collect();
        format!(
            "{kernel}_tmap{i}_t{}_b{}_s{}",
            self.tensor,
            boxes.join("x"),
            self.swizzle
        )
    }

    /// The map a parameter named by [`TensorMapDecl::param_name`] takes,
    /// or `None` for any other parameter.
    pub fn from_param_name(name: &str) -> Option<TensorMapDecl> {
        let at = name.rfind("_tmap")?;
        let mut parts = name[at + 5..].split('_');
        parts.next()?.parse::<usize>().ok()?;
        let tensor = parts.next()?.strip_prefix('t')?.parse().ok()?;
        let boxes = parts
            .next()?
            .strip_prefix('b')?
            .split('x')
            .map(|b| b.parse().ok())
            .collect::<Option<Vec<u32>>>()?;
        let swizzle = parts.next()?.strip_prefix('s')?.parse().ok()?;
        if parts.next().is_some() || boxes.is_empty() || boxes.len() > 5 {
            return None;
        }
        Some(TensorMapDecl {
            tensor,
            boxes,
            swizzle,
        })
    }
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Name in the PTX.
    pub name: String,
    /// Type (`u64` for buffers).
    pub ty: Ty,
}

/// A shared-memory buffer: a region of the kernel's dynamic shared memory
/// (the module's one `.extern .shared` array, [`SHARED_SYMBOL`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SharedDecl {
    /// Name, for comments.
    pub name: String,
    /// Byte offset in the dynamic shared memory (16-byte aligned).
    pub offset: u64,
    /// Size.
    pub bytes: u64,
}

/// The PTX symbol of the dynamic shared memory.
pub const SHARED_SYMBOL: &str = "tsr_smem";

/// The PTX symbol of a kernel's per-thread local array.
pub const LOCAL_SYMBOL: &str = "tsr_local";

/// One kernel: what each thread of a block runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// Entry name.
    pub name: String,
    /// Parameters, in launch order.
    pub params: Vec<Param>,
    /// Threads per block (`.maxntid`).
    pub threads: u32,
    /// Blocks per SM the code must allow (`.minnctapersm`, which caps the
    /// registers per thread accordingly); 1: one block's worth.
    pub min_blocks: u32,
    /// Shared-memory buffers.
    pub shared: Vec<SharedDecl>,
    /// Bytes of dynamic shared memory a launch must provide.
    pub shared_bytes: u64,
    /// Bytes of each thread's local array (`tsr_local`; 0: none).
    pub local_bytes: u64,
    /// A persistent kernel: its blocks loop over this many programs (the
    /// kernel's grid, row-major), block `b` taking programs `b`, `b +
    /// nctaid.x`, ...; the launcher starts as many blocks as the SMs hold
    /// at once (`min_blocks` per SM), in a one-dimensional grid. Printed as a `// persistent over N programs`
    /// line at the top of the body. `None`: one block per program.
    pub persistent: Option<u64>,
    /// The type of every register.
    pub regs: Vec<Ty>,
    /// The body.
    pub body: Vec<Inst>,
}

/// Registers per thread (`.maxnreg`) that let `blocks` blocks of
/// `threads` threads share an SM's 64K registers (at most 255, a multiple
/// of 8).
pub fn max_regs(threads: u32, blocks: u32) -> u32 {
    ((65536 / (threads.max(1) * blocks.max(1))).min(255) & !7).max(8)
}

/// The fewest registers per thread ([`max_regs`]) a kernel may have for
/// values to be held across its loops rather than recomputed on every
/// trip (loop-invariant code, tensor-core operands' fragments): below it
/// (an occupancy bound of two programs of 8 warps gives 128), attention's
/// loop already fills the registers and what is held spills.
pub const HOIST_REGS_FLOOR: u32 = 192;

/// A PTX module: every kernel of a program for one architecture.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// The target (`sm_80`, `sm_90`, ...).
    pub arch: String,
    /// PTX ISA version.
    pub version: (u32, u32),
    /// Source files named by `.loc` (`.file 1 "..."` is the first).
    pub files: Vec<String>,
    /// Kernels.
    pub functions: Vec<Function>,
}

#[cfg(test)]
mod tests {
    use super::TensorMapDecl;

    #[test]
    fn tensor_map_parameters_name_their_map() {
        let d = TensorMapDecl {
            tensor: 2,
            boxes: vec![64, 128, 1],
            swizzle: 128,
        };
        let name = d.param_name("k0_matmul", 1);
        assert_eq!(name, "k0_matmul_tmap1_t2_b64x128x1_s128");
        assert_eq!(TensorMapDecl::from_param_name(&name), Some(d));
        for other in [
            "k0_matmul_a",
            "x_tmap",
            "k_tmap0_t1_b_s128",
            "k_tmap0_t1_b64_s1_z",
        ] {
            assert_eq!(TensorMapDecl::from_param_name(other), None, "{other}");
        }
    }
}
