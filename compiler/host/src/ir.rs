//! The Host IR: functions of typed values and mutable variables in basic
//! blocks, with every tensor operation a call into the runtime at a *site*.
//!
//! Values are scalars (`int`, `float`, `bool`) or *handles*: reference-counted
//! runtime objects (tensors, lists, strings). Every instruction that produces
//! a handle produces an owned reference; [`Inst::Release`] gives one up and
//! [`Inst::Retain`] makes another. Runtime calls and host fn calls may fail:
//! the code generator checks the runtime's failure flag after each.

use tessera_diagnostics::Span;
use tessera_graph::{BinaryOp, UnaryOp};
use tessera_syntax::ast::Dtype;

/// The kind of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A 64-bit signed integer.
    Int,
    /// A 64-bit float.
    Float,
    /// A boolean.
    Bool,
    /// A reference-counted runtime object; 0 is the unit value.
    Handle,
}

impl Kind {
    /// The kind in words, for diagnostics.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Int => "an int",
            Kind::Float => "a float",
            Kind::Bool => "a bool",
            Kind::Handle => "a tensor, list or string",
        }
    }

    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Bool => "bool",
            Kind::Handle => "handle",
        }
    }
}

tessera_core::entity!(
    /// A value, defined once.
    Value,
    "%"
);
tessera_core::entity!(
    /// A mutable variable of a function.
    Var,
    "$"
);
tessera_core::entity!(
    /// A basic block.
    BlockId,
    "bb"
);
tessera_core::entity!(
    /// A host function of the module.
    FuncId,
    "fn"
);
tessera_core::entity!(
    /// A runtime call site.
    SiteId,
    "s"
);

/// Checked integer arithmetic: overflow and division by zero fail at the
/// instruction's site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    /// a + b.
    Add,
    /// a - b.
    Sub,
    /// a * b.
    Mul,
    /// a / b, rounded toward zero.
    Div,
    /// The remainder of [`IntOp::Div`], with the sign of a.
    Rem,
    /// a & b (never fails).
    And,
    /// a | b (never fails).
    Or,
    /// a ^ b (never fails).
    Xor,
    /// a << b: 0 for a count outside 0..64 (never fails).
    Shl,
    /// a >> b, the sign copied in: 0 or -1 for a count outside 0..64
    /// (never fails).
    Shr,
}

/// Comparisons (of two ints, or of two floats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// ==
    Eq,
    /// !=
    Ne,
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
}

/// Float arithmetic, IEEE double precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatOp {
    /// a + b.
    Add,
    /// a - b.
    Sub,
    /// a * b.
    Mul,
    /// a / b.
    Div,
    /// The remainder with the sign of a (C's `fmod`).
    Rem,
    /// a to the power b.
    Pow,
    /// The larger; NaN if either is.
    Max,
    /// The smaller; NaN if either is.
    Min,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// An integer constant.
    IConst(i64),
    /// A float constant.
    FConst(f64),
    /// A boolean constant.
    BConst(bool),
    /// Checked integer arithmetic.
    Int(IntOp, Value, Value, SiteId),
    /// Float arithmetic.
    Float(FloatOp, Value, Value),
    /// Integer comparison.
    ICmp(Cmp, Value, Value),
    /// Float comparison (false when either is NaN, except `!=`).
    FCmp(Cmp, Value, Value),
    /// Boolean and.
    And(Value, Value),
    /// Boolean or.
    Or(Value, Value),
    /// Boolean not.
    Not(Value),
    /// Float negation.
    FNeg(Value),
    /// Integer to float.
    IToF(Value),
    /// Boolean to integer (0 or 1).
    BToI(Value),
    /// The variable's current value.
    Get(Var),
    /// Sets the variable.
    Set(Var, Value),
    /// Calls a host function; handle arguments are borrowed.
    Call(FuncId, Vec<Value>, SiteId),
    /// Calls the runtime at a site; handle arguments are borrowed.
    Runtime(SiteId, Vec<Value>),
    /// Takes another reference to a handle.
    Retain(Value),
    /// Gives up a reference to a handle.
    Release(Value),
}

/// An instruction and the value it defines, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct InstData {
    /// The defined value.
    pub result: Option<Value>,
    /// The instruction.
    pub inst: Inst,
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// Continue at a block.
    Jump(BlockId),
    /// Continue at the first block if the boolean is true, else the second.
    Branch(Value, BlockId, BlockId),
    /// Return from the function, with a value unless it returns unit.
    Return(Option<Value>),
}

/// A basic block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Instructions, in order.
    pub insts: Vec<InstData>,
    /// The terminator.
    pub term: Term,
}

/// A variable: a `let`, a parameter or a loop counter.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    /// The source name.
    pub name: String,
    /// Its kind.
    pub kind: Kind,
}

/// A host function. Its parameters are its first variables; the entry block
/// is block 0.
#[derive(Clone, Debug, PartialEq)]
pub struct HostFn {
    /// The source name.
    pub name: String,
    /// Parameter count (the first variables).
    pub params: usize,
    /// The result kind; `None` for unit.
    pub ret: Option<Kind>,
    /// Variables.
    pub vars: Vec<VarDecl>,
    /// The kind of each value.
    pub values: Vec<Kind>,
    /// Blocks; block 0 is the entry.
    pub blocks: Vec<Block>,
    /// Where the function is defined.
    pub span: Span,
}

impl HostFn {
    /// The kind of a value.
    pub fn kind(&self, v: Value) -> Kind {
        self.values[v.index()]
    }
}

/// One element of an index expression `t[i, lo:hi, :]`, with where it is
/// written (for out-of-bounds errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexPart {
    /// A single index (one argument).
    Index(Span),
    /// A slice; each present bound is one argument.
    Slice {
        /// Whether `lo` is written.
        lo: bool,
        /// Whether `hi` is written.
        hi: bool,
        /// Whether a step is written (`lo:hi:step`).
        step: bool,
        /// The slice.
        span: Span,
    },
    /// `None`: a new axis of extent 1 (no argument).
    NewAxis,
    /// `...`: full slices of the axes the other parts leave (no argument).
    Ellipsis(Span),
}

/// What the runtime does at a site.
#[derive(Clone, Debug, PartialEq)]
pub enum SiteKind {
    /// A call of a user or stdlib op; one argument per parameter, in
    /// order, each possibly absent.
    Op(String),
    /// A launch of a user kernel; one argument per parameter. A kernel
    /// with several outputs gives them as a list.
    Kernel(String),
    /// [`SiteKind::Op`] bound by `let (...)` with this many names
    /// (`split`, `chunk`, `topk`): the parts as a list.
    OpParts(String, usize),
    /// Part `i` of a list of results (one argument, the list, borrowed).
    Part(usize),
    /// A host builtin of `std.host` (`randn<bf16>`, `print`); one argument
    /// per parameter.
    Builtin(String, Dtype),
    /// An elementwise operator with a tensor operand.
    Binary(BinaryOp),
    /// An elementwise unary operator on a tensor.
    Unary(UnaryOp),
    /// Indexing: the base, then the parts' arguments.
    Index(Vec<IndexPart>),
    /// `.T`.
    Transpose,
    /// `x as dtype`, on a tensor or a scalar.
    Cast(Dtype),
    /// A list literal of its arguments.
    List,
    /// A string constant.
    Str(String),
    /// Integer arithmetic that may overflow or divide by zero.
    Arith,
    /// A host function call (the depth limit).
    Call(String),
}

/// An argument of a site known when compiling: what lets `tsrc build`
/// compile the site's kernels ahead of time.
#[derive(Clone, Debug, PartialEq)]
pub enum Fixed {
    /// An optional argument left out.
    Absent,
    /// A tensor of this shape and dtype (its values do not matter).
    Tensor(Vec<u64>, Dtype),
    /// A constant integer.
    Int(i64),
    /// A constant float.
    Float(f64),
    /// A constant boolean.
    Bool(bool),
}

/// A runtime call site: what happens there and where in the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// What the runtime does.
    pub kind: SiteKind,
    /// The kinds of the arguments; `None` where an optional argument is
    /// absent.
    pub args: Vec<Option<Kind>>,
    /// The result's kind; `None` for unit.
    pub result: Option<Kind>,
    /// The source expression, for errors.
    pub span: Span,
    /// Every argument, when all are known at compile time (tensor shapes
    /// and scalar constants) and the site runs kernels.
    pub fixed: Option<Vec<Fixed>>,
}

/// The host code of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct HostModule {
    /// Functions; `main` first.
    pub functions: Vec<HostFn>,
    /// Runtime call sites.
    pub sites: Vec<Site>,
}

impl HostModule {
    /// A site.
    pub fn site(&self, s: SiteId) -> &Site {
        &self.sites[s.index()]
    }
}
