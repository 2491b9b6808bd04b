//! The Tile IR data structures: one block program per kernel.
//!
//! A kernel is run as a grid of *programs* (thread blocks on a GPU). Each
//! program executes the kernel's body once, on tiles: values of compile-time
//! rank whose extents are [`Size`] expressions (constants, or specialisation
//! sizes such as `pow2(D)` fixed at launch). A scalar is a tile of rank 0.
//!
//! Values are SSA, numbered per kernel; control flow is structured (`for`
//! with loop-carried values, `if` with results), as in MLIR's `scf`.
//! Global tensors are reached only through `load` and `store` on the
//! kernel's parameters, with one integer index tile per dimension; index
//! tiles, the mask and the stored value broadcast together (numpy rules), and
//! out-of-bounds elements are never touched (loads yield `other`).

use tessera_graph::{BinaryOp, UnaryOp};
use tessera_schedule::Size;
use tessera_sema::Policy;
use tessera_syntax::ast::Dtype;

tessera_core::entity!(
    /// An SSA value of a kernel: an index into [`Kernel::values`].
    Value,
    "%"
);

/// The type of a value: a tile shape and an element dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileTy {
    /// Extents, outermost first; empty for a scalar.
    pub shape: Vec<Size>,
    /// Element type. Integer index math uses `int32`/`int64`, masks `bool`.
    pub dtype: Dtype,
}

impl TileTy {
    /// A scalar of `dtype`.
    pub fn scalar(dtype: Dtype) -> TileTy {
        TileTy {
            shape: Vec::new(),
            dtype,
        }
    }

    /// A tile of constant extents.
    pub fn consts(shape: &[i64], dtype: Dtype) -> TileTy {
        TileTy {
            shape: shape.iter().map(|n| Size::Const(*n)).collect(),
            dtype,
        }
    }
}

/// Whether a kernel parameter is read, written, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only loaded from.
    In,
    /// Only stored to.
    Out,
    /// Loaded from and stored to.
    InOut,
}

/// A global tensor the kernel receives.
#[derive(Clone, Debug, PartialEq)]
pub struct KParam {
    /// Name in the text form.
    pub name: String,
    /// Element (storage) type.
    pub dtype: Dtype,
    /// Extents, as sizes over the kernel's dimensions.
    pub dims: Vec<Size>,
    /// How the kernel uses it.
    pub access: Access,
    /// What an output holds when the kernel starts.
    pub init: Start,
}

/// What a kernel parameter holds when the kernel starts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Start {
    /// Whatever its buffer holds: an input, an output every element of
    /// which the kernel stores, or an `inout` tensor (the launch's copy of
    /// the argument, or the argument's own buffer). An atomic store's
    /// target starts as zeros instead, set before each launch.
    #[default]
    Held,
    /// Every element set to this value before each launch (`out m:
    /// tensor<N, fp32> = -inf`), as `as` converts it to `dtype`.
    Value(f64),
    /// The contents the caller passes (an `inout` tensor): never set.
    Kept,
}

/// A shared-memory buffer of one program (per pipeline stage).
#[derive(Clone, Debug, PartialEq)]
pub struct Shared {
    /// Name in the text form.
    pub name: String,
    /// Tile extents of one stage.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: Dtype,
    /// Pipeline stages (copies).
    pub stages: u32,
    /// Elements of padding added to each row to avoid bank conflicts.
    pub padding: u32,
}

impl Shared {
    /// Bytes of shared memory, all stages and padding included.
    pub fn bytes(&self) -> u64 {
        let mut rows: u64 = 1;
        let (last, outer) = self.shape.split_last().unwrap_or((&1, &[]));
        for d in outer {
            rows *= *d as u64;
        }
        let row = (*last as u64) + self.padding as u64;
        rows * row * self.dtype.size_bytes() as u64 * self.stages as u64
    }
}

/// A reduction combiner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// Sum, in the order of the kernel's policy.
    Sum,
    /// Maximum (NaN-propagating).
    Max,
    /// Minimum (NaN-propagating).
    Min,
    /// Product, in an order the backend chooses (not a store combiner).
    Prod,
}

impl Combine {
    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            Combine::Sum => "sum",
            Combine::Max => "max",
            Combine::Min => "min",
            Combine::Prod => "prod",
        }
    }
}

/// What an `assert` checks: the reason a run fails where it does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// An index read from a tensor (`gather`, `take`, a scatter's) lies
    /// inside the tensor it selects from or adds into.
    Index,
    /// A loop's step known only at run time is positive (so that the loop
    /// ends).
    Step,
}

impl Check {
    /// Why the run fails where the check does not hold.
    pub fn failure(self) -> &'static str {
        match self {
            Check::Index => {
                "an index read from a tensor is out of range of the tensor it selects \
                 from or adds into (gather, take, embedding, scatter_add, index_add or \
                 bincount)"
            }
            Check::Step => "a loop's step is not positive (it is known only at run time)",
        }
    }
}

/// An operation. Result types are in [`Kernel::values`]; operations whose
/// meaning depends on the result type (casts, broadcasts, reshapes,
/// constants) read it from there.
#[derive(Clone, Debug, PartialEq)]
pub enum TOp {
    /// This program's index along grid axis 0, 1 or 2 (an `int32` scalar).
    ProgramId(u8),
    /// The grid's extent along an axis.
    NumPrograms(u8),
    /// A size evaluated at launch (an `int64` scalar).
    Size(Size),
    /// A constant, splatted to the result shape.
    Const(f64),
    /// `[start, start + 1, ...]`, as long as the result's single extent.
    Arange(i64),
    /// Elementwise unary math.
    Unary(UnaryOp, Value),
    /// Elementwise binary math, operands broadcast together.
    Binary(BinaryOp, Value, Value),
    /// Uniform fp32 values in [0, 1): Philox-4x32-10 of each element of the
    /// integer `counter` tile under key `seed`, as the runtime's
    /// `uniform_f32`.
    Rand {
        /// The key.
        seed: Seed,
        /// The counters, one per result element.
        counter: Value,
    },
    /// `cond ? a : b`, broadcast.
    Select(Value, Value, Value),
    /// Conversion to the result dtype (rounding to nearest even for floats,
    /// truncation toward zero for float to int).
    Cast(Value),
    /// Broadcast to the result shape (numpy rules).
    Broadcast(Value),
    /// Same elements, the result shape (row-major order is kept).
    Reshape(Value),
    /// Axes reordered: result axis `i` is operand axis `perm[i]`.
    Permute(Value, Vec<usize>),
    /// Gathers from parameter `param`: one index tile per dimension.
    Load {
        /// Index into [`Kernel::params`].
        param: usize,
        /// One integer tile per dimension of the parameter.
        index: Vec<Value>,
        /// Elements where this is false read `other`.
        mask: Option<Value>,
        /// The value of masked and out-of-bounds elements.
        other: f64,
    },
    /// Scatters `value` into parameter `param` (no result).
    Store {
        /// Index into [`Kernel::params`].
        param: usize,
        /// One integer tile per dimension of the parameter.
        index: Vec<Value>,
        /// The tile to write, rounded to the parameter's dtype.
        value: Value,
        /// Elements where this is false are not written.
        mask: Option<Value>,
        /// `Some(c)`: an atomic read-modify-write, `dst = c(dst, value)`
        /// element by element (`atomic_add`, `atomic_max`, `atomic_min`),
        /// so that programs and lanes hitting one element all count.
        atomic: Option<Combine>,
    },
    /// `acc + a @ b` over the last two axes of 2-d tiles, products summed in
    /// the accumulator's dtype (`tf32` rounds the operands first).
    Dot {
        /// Left operand `[m, k]`.
        a: Value,
        /// Right operand `[k, n]`.
        b: Value,
        /// Accumulator `[m, n]`.
        acc: Value,
        /// Whether fp32 operands are rounded to tf32.
        tf32: bool,
        /// Whether the fp32 sum is rounded to bf16 next (one k-tile of a
        /// bf16 accumulator): tensor cores may then sum with fewer bits
        /// than fp32 (fp8 wgmma's 14), which an fp32 accumulator forbids.
        bf16_acc: bool,
    },
    /// Reduces `axis` away, in the order `policy` prescribes.
    Reduce {
        /// What to combine.
        combine: Combine,
        /// The reduced operand.
        value: Value,
        /// The axis removed.
        axis: usize,
        /// Summation order.
        policy: Policy,
    },
    /// Sorts every line of a tile along its last axis: results `(values,
    /// indices)`, the values in order (ascending, or descending) and the
    /// int32 position along the axis each came from. NaN counts as the
    /// largest value, -0 equals +0, and equal values keep the order of
    /// their positions (a stable sort), so the order is a total one and
    /// every backend gives the same permutation.
    Sort {
        /// The tile sorted.
        value: Value,
        /// Largest first.
        descending: bool,
    },
    /// Compensated accumulation: results `(sum', comp')` of adding `x` to
    /// the running `sum` with compensation `comp` (Kahan), elementwise.
    KahanAdd {
        /// The running sum.
        sum: Value,
        /// The running compensation.
        comp: Value,
        /// The addend.
        x: Value,
    },
    /// Stages a loaded tile through shared buffer `shared` (a copy into
    /// shared memory, asynchronous where the schedule says so).
    Stage {
        /// Index into [`Kernel::shared`].
        shared: usize,
        /// The tile.
        value: Value,
    },
    /// A barrier among the threads of the program.
    Barrier,
    /// The program fails where the `bool` tile is false, for the reason
    /// the [`Check`] names. No result; every backend reports it as an
    /// error of the run (the GPU traps). The values after the check are
    /// what a failure message may name: for [`Check::Index`], the index
    /// tile and the extent it must lie below (text `assert %c index %i
    /// below %n`).
    Assert(Value, Check, Vec<Value>),
    /// `for iv in lo..hi step step`, carrying values. The body's arguments
    /// are the induction variable and the carried values; it ends in
    /// `Yield`. The results are the carried values after the last trip.
    For {
        /// First value of the induction variable.
        lo: Value,
        /// Exclusive bound.
        hi: Value,
        /// Positive step.
        step: Value,
        /// Initial carried values.
        init: Vec<Value>,
        /// The body.
        body: Block,
    },
    /// Structured conditional; both arms end in `Yield` with the results.
    If {
        /// A boolean scalar.
        cond: Value,
        /// Taken when true.
        then: Block,
        /// Taken when false.
        els: Block,
    },
    /// The end of a loop body or an `if` arm.
    Yield(Vec<Value>),
}

/// The key of a [`TOp::Rand`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seed {
    /// Known when the kernel is compiled: an attribute, all 64 bits of it
    /// (which a constant operand, an f64, could not hold).
    Const(u64),
    /// Known when the kernel runs: a 0-d integer tile (a scalar parameter,
    /// `program_id`, a loop variable), sign-extended to the 64-bit key.
    Value(Value),
}

impl std::fmt::Display for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seed::Const(k) => write!(f, "{k}"),
            Seed::Value(v) => write!(f, "{v}"),
        }
    }
}

/// The operand places of `$op` (a `&TOp` or a `&mut TOp`), the vectors'
/// elements reached through `$iter` (`iter` or `iter_mut`).
macro_rules! operand_places {
    ($op:expr, $iter:ident) => {
        match $op {
            TOp::ProgramId(_)
            | TOp::NumPrograms(_)
            | TOp::Size(_)
            | TOp::Const(_)
            | TOp::Arange(_)
            | TOp::Barrier => Vec::new(),
            TOp::Unary(_, a)
            | TOp::Cast(a)
            | TOp::Broadcast(a)
            | TOp::Reshape(a)
            | TOp::Permute(a, _)
            | TOp::Reduce { value: a, .. }
            | TOp::Sort { value: a, .. }
            | TOp::Stage { value: a, .. }
            | TOp::Rand {
                counter: a,
                seed: Seed::Const(_),
            } => vec![a],
            TOp::Assert(a, _, about) => std::iter::once(a).chain(about.$iter()).collect(),
            TOp::Rand {
                counter: a,
                seed: Seed::Value(k),
            } => vec![a, k],
            TOp::Binary(_, a, b) => vec![a, b],
            TOp::Select(c, a, b) => vec![c, a, b],
            TOp::Load { index, mask, .. } => index.$iter().chain(mask.$iter()).collect(),
            TOp::Store {
                index, value, mask, ..
            } => index
                .$iter()
                .chain(mask.$iter())
                .chain(std::iter::once(value))
                .collect(),
            TOp::Dot { a, b, acc, .. } => vec![a, b, acc],
            TOp::KahanAdd { sum, comp, x } => vec![sum, comp, x],
            TOp::Yield(vs) => vs.$iter().collect(),
            TOp::For {
                lo, hi, step, init, ..
            } => [lo, hi, step].into_iter().chain(init.$iter()).collect(),
            TOp::If { cond, .. } => vec![cond],
        }
    };
}

impl TOp {
    /// The values the operation reads (not those of nested blocks), in
    /// order.
    pub fn operands(&self) -> Vec<Value> {
        let places: Vec<&Value> = operand_places!(self, iter);
        places.into_iter().copied().collect()
    }

    /// The values the operation reads, to rewrite in place (not those of
    /// nested blocks).
    pub fn operands_mut(&mut self) -> Vec<&mut Value> {
        operand_places!(self, iter_mut)
    }
}

/// One operation with its results.
#[derive(Clone, Debug)]
pub struct Inst {
    /// Defined values (none for stores and barriers).
    pub results: Vec<Value>,
    /// The operation.
    pub op: TOp,
    /// The source expression it computes (empty when none: code the
    /// compiler made up, or a kernel read back from text). Debug
    /// information, as a `.loc` is in PTX: run-time errors point at it and
    /// the PTX names it, but it is not part of what the instruction means
    /// (equality ignores it) nor of the text form.
    pub span: tessera_diagnostics::Span,
}

impl Inst {
    /// An instruction with no source position.
    pub fn new(results: Vec<Value>, op: TOp) -> Inst {
        Inst {
            results,
            op,
            span: Default::default(),
        }
    }
}

impl PartialEq for Inst {
    fn eq(&self, other: &Inst) -> bool {
        self.results == other.results && self.op == other.op
    }
}

/// A sequence of instructions with arguments (loop bodies take the
/// induction variable and the carried values).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Block {
    /// Values bound on entry.
    pub args: Vec<Value>,
    /// Instructions in order.
    pub insts: Vec<Inst>,
}

/// A block program.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Name, unique in its program.
    pub name: String,
    /// Global tensors, in launch order.
    pub params: Vec<KParam>,
    /// Programs along each grid axis.
    pub grid: [Size; 3],
    /// Threads per program on a GPU (warps × 32); the CPU ignores it.
    pub threads: u32,
    /// Elements per vector memory access the schedule allows (its
    /// `vectorize`); 1 keeps every global access scalar.
    pub vectorize: u32,
    /// Programs resident per SM the schedule asks for, at least and at
    /// most (its `occupancy` in warps, divided by the program's warps);
    /// `None`: whatever fits.
    pub blocks_per_sm: Option<(u32, u32)>,
    /// Whether the GPU backend may warp-specialise the kernel where it
    /// qualifies (the schedule's `warp_specialize`).
    pub warp_specialize: bool,
    /// Whether its products may run on tensor cores (the schedule's
    /// `tensor_cores`); off, every `dot` runs on the CUDA cores.
    pub tensor_cores: bool,
    /// Whether the GPU backend may compute fp32 `exp(x - y)` as
    /// `2^(x·log2 e - y·log2 e)` in one fma without the remainder of
    /// `y·log2 e` (one instruction less an element; a relative error near
    /// half an ulp of `y·log2 e`, large once |y| passes 1e3): the
    /// attention kernels, as FlashAttention and Triton do. Text: `fast_exp`.
    pub fast_exp: bool,
    /// Shared-memory buffers.
    pub shared: Vec<Shared>,
    /// The type of every value.
    pub values: Vec<TileTy>,
    /// The body, run once per program.
    pub body: Block,
    /// The source the kernel was built from (the op expression it is built
    /// around, or the user kernel): where `.loc` points.
    pub span: tessera_diagnostics::Span,
}

impl Kernel {
    /// The type of `v`.
    pub fn ty(&self, v: Value) -> &TileTy {
        &self.values[v.index()]
    }

    /// The source positions of its instructions, nested blocks included,
    /// in order, each once (a compile cache keys on where `.loc` points).
    pub fn spans(&self) -> Vec<tessera_diagnostics::Span> {
        let mut seen = std::collections::HashSet::new();
        let all = self.body.all().into_iter().map(|i| i.span);
        all.filter(|s| *s != Default::default() && seen.insert(*s))
            .collect()
    }

    /// The source positions of its instructions that may trap on a GPU:
    /// integer divisions and remainders, and `assert`s.
    pub fn trapping_spans(&self) -> Vec<tessera_diagnostics::Span> {
        let traps = |i: &Inst| match &i.op {
            TOp::Binary(BinaryOp::Div | BinaryOp::Rem, _, y) => !self.ty(*y).dtype.is_float(),
            TOp::Assert(..) => true,
            _ => false,
        };
        let all = self.body.all().into_iter();
        all.filter(|i| traps(i) && i.span != Default::default())
            .map(|i| i.span)
            .collect()
    }

    /// The parameters a runner sets before every launch, in order, each
    /// once, with the value each starts as: those with a start value
    /// ([`KParam::init`]) and those an atomic store combines into, which
    /// start as zeros (also when a timed or tuned program runs again),
    /// unless they keep what the caller passes ([`Start::Kept`]).
    pub fn starts(&self) -> Vec<(usize, f64)> {
        let mut out: Vec<(usize, f64)> = (self.params.iter().enumerate())
            .filter_map(|(i, p)| match p.init {
                Start::Value(v) => Some((i, v)),
                Start::Held | Start::Kept => None,
            })
            .collect();
        for i in self.body.all() {
            if let TOp::Store {
                param,
                atomic: Some(_),
                ..
            } = &i.op
            {
                let kept = self.params.get(*param).map(|p| p.init) == Some(Start::Kept);
                if !kept && !out.iter().any(|(p, _)| p == param) {
                    out.push((*param, 0.0));
                }
            }
        }
        out.sort_unstable_by_key(|(p, _)| *p);
        out
    }
}

impl Block {
    /// Every instruction of the block, with those of the loops and
    /// branches inside it, in program order.
    pub fn all(&self) -> Vec<&Inst> {
        fn visit<'a>(b: &'a Block, out: &mut Vec<&'a Inst>) {
            for i in &b.insts {
                out.push(i);
                match &i.op {
                    TOp::For { body, .. } => visit(body, out),
                    TOp::If { then, els, .. } => {
                        visit(then, out);
                        visit(els, out);
                    }
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        visit(self, &mut out);
        out
    }
}

/// Where a launch argument comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferId {
    /// The program's `i`th input.
    Input(usize),
    /// Temporary `i` of the program.
    Temp(usize),
    /// The program's `i`th output.
    Output(usize),
}

/// A global tensor of a program (a graph parameter, temporary or result).
#[derive(Clone, Debug, PartialEq)]
pub struct BufferDecl {
    /// Name in the text form.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Extents.
    pub dims: Vec<Size>,
}

/// One step of a program.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Runs kernel `kernel` on the grid with these buffers as parameters.
    Launch {
        /// Index into [`TileProgram::kernels`].
        kernel: usize,
        /// One buffer per kernel parameter.
        args: Vec<BufferId>,
    },
    /// Copies a buffer into another of the same size (an output that is an
    /// input or another output).
    Copy {
        /// Source.
        src: BufferId,
        /// Destination.
        dst: BufferId,
    },
    /// A collective over a mesh axis, run by the runtime rather than a block
    /// program (communication, not computation).
    Collective {
        /// The graph's description of it.
        kind: tessera_graph::CollectiveKind,
        /// The mesh axis name.
        axis: String,
        /// The axis size (devices).
        devices: u64,
        /// Its operand.
        src: BufferId,
        /// Its result.
        dst: BufferId,
    },
}

/// The Tile IR of one op: buffers, kernels and the steps that run them.
#[derive(Clone, Debug, PartialEq)]
pub struct TileProgram {
    /// The op's name.
    pub name: String,
    /// Dimension symbols the inputs bind, in first-seen order.
    pub dims: Vec<String>,
    /// The op's inputs.
    pub inputs: Vec<BufferDecl>,
    /// Intermediate tensors in global memory.
    pub temps: Vec<BufferDecl>,
    /// The op's results.
    pub outputs: Vec<BufferDecl>,
    /// Block programs.
    pub kernels: Vec<Kernel>,
    /// What runs, in order.
    pub steps: Vec<Step>,
}
