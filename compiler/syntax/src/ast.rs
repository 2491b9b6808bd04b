//! The abstract syntax tree of a `.tsr` file.
//!
//! The AST is what the parser builds and the checker reads: an owned tree,
//! one node per construct, each with the [`Span`] it was written at. Below the
//! AST (Graph IR and on) spans move to side tables.
//!
//! Invariants the parser guarantees:
//! - no [`Expr`] is nested deeper than [`crate::MAX_EXPR_DEPTH`], and no
//!   bracket deeper than [`crate::lexer::MAX_NESTING`], so recursive passes over
//!   the tree cannot exhaust the stack;
//! - every `Expr` has an [`ExprId`] unique within its file, numbered in the
//!   order the parser finished them;
//! - `Error` nodes stand where the parser recovered from a syntax error; a
//!   diagnostic was reported for each, so later passes stay silent on them.

pub use crate::lexer::Dtype;
use tessera_core::BinaryOp;
pub use tessera_diagnostics::Span;

use std::borrow::Cow;
use std::fmt;

/// A name as written, with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// The identifier.
    pub text: String,
    /// Where it was written.
    pub span: Span,
}

/// Identity of an expression within its file, for side tables such as the
/// checker's type of each expression. Displayed as `e12`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

impl fmt::Display for ExprId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// One parsed file.
#[derive(Clone, Debug, PartialEq)]
pub struct File {
    /// The top-level items in source order.
    pub items: Vec<Item>,
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `import std.nn;`
    Import(Import),
    /// `numerics standard;` at file level: the default for every op.
    Numerics(Numerics),
    /// `op name(...) -> T { ... }` or `extern op ...;`
    Op(OpDef),
    /// `kernel name<...>(...) grid(...) { ... }`
    Kernel(KernelDef),
    /// `fn name(...) { ... }` (host code) or `extern fn ...;`
    Fn(FnDef),
    /// `schedule target on sm_90 { knob; ... }`
    Schedule(ScheduleDef),
    /// `mesh name(axis = size, ...);`
    Mesh(MeshDef),
    /// Where the parser recovered from an error.
    Error(Span),
}

impl Item {
    /// The span of the whole item.
    pub fn span(&self) -> Span {
        match self {
            Item::Import(i) => i.span,
            Item::Numerics(n) => n.span,
            Item::Op(o) => o.span,
            Item::Kernel(k) => k.span,
            Item::Fn(f) => f.span,
            Item::Schedule(s) => s.span,
            Item::Mesh(m) => m.span,
            Item::Error(span) => *span,
        }
    }

    /// The doc comment lines of the item, if it can carry docs.
    pub fn docs_mut(&mut self) -> Option<&mut Vec<String>> {
        match self {
            Item::Op(o) => Some(&mut o.docs),
            Item::Kernel(k) => Some(&mut k.docs),
            Item::Fn(f) => Some(&mut f.docs),
            Item::Mesh(m) => Some(&mut m.docs),
            Item::Schedule(s) => Some(&mut s.docs),
            _ => None,
        }
    }
}

/// `import std.nn;`: brings every public item of a stdlib module into scope.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    /// The dotted path, e.g. `std`, `nn`.
    pub path: Vec<Name>,
    /// The whole item.
    pub span: Span,
}

/// `numerics standard;` or `numerics policy = kahan_sum, accumulate = fp32;`
#[derive(Clone, Debug, PartialEq)]
pub struct Numerics {
    /// The settings in order.
    pub settings: Vec<NumericsSetting>,
    /// The whole declaration.
    pub span: Span,
}

/// One numerics setting: `key = value`, or a bare `value` whose key is
/// implied by the name (`fast` is a policy, `standard` a precision mode).
#[derive(Clone, Debug, PartialEq)]
pub struct NumericsSetting {
    /// `policy`, `precision`, `storage`, `accumulate`, `matmul`; `None` when
    /// the key is implied.
    pub key: Option<Name>,
    /// The value, an identifier or a dtype keyword.
    pub value: Name,
    /// The whole setting.
    pub span: Span,
}

/// A generic parameter: `T: float` on an op, `BLOCK: int = 1024` on a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Generic {
    /// The parameter's name.
    pub name: Name,
    /// Its kind (`float`, `int`, a dtype...), if written.
    pub bound: Option<Type>,
    /// Its default value.
    pub default: Option<Expr>,
    /// The whole parameter.
    pub span: Span,
}

/// A value parameter of an op, kernel or fn.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// `out` marks a kernel output, allocated by the caller; `inout` one
    /// that starts as the argument passed for it (updated in place).
    pub mode: ParamMode,
    /// The name.
    pub name: Name,
    /// The declared type.
    pub ty: Type,
    /// The default value (attributes only).
    pub default: Option<Expr>,
    /// The whole parameter.
    pub span: Span,
}

/// How a kernel uses a parameter: as an input, an output, or both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ParamMode {
    /// An input (every parameter of an op or fn).
    #[default]
    In,
    /// `out`: an output, which starts as zeros or its start value.
    Out,
    /// `inout`: an argument the kernel reads and writes; the call's
    /// result is its contents after the launch.
    InOut,
}

impl ParamMode {
    /// The keyword that marks it (`""` for an input).
    pub fn name(self) -> &'static str {
        match self {
            ParamMode::In => "",
            ParamMode::Out => "out",
            ParamMode::InOut => "inout",
        }
    }

    /// The keyword with the space that separates it from the parameter's
    /// name, as a signature is written (`""` for an input).
    pub fn keyword(self) -> &'static str {
        match self {
            ParamMode::In => "",
            ParamMode::Out => "out ",
            ParamMode::InOut => "inout ",
        }
    }
}

impl Param {
    /// Whether a call passes it an argument (an input or `inout`).
    pub fn is_input(&self) -> bool {
        self.mode != ParamMode::Out
    }

    /// Whether it is a result of the kernel (`out` or `inout`).
    pub fn is_output(&self) -> bool {
        self.mode != ParamMode::In
    }
}

/// An op: a tensor function written algebraically, which the compiler fuses.
#[derive(Clone, Debug, PartialEq)]
pub struct OpDef {
    /// Doc comment lines.
    pub docs: Vec<String>,
    /// The op's name.
    pub name: Name,
    /// Dtype parameters (`<T: float>`).
    pub generics: Vec<Generic>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Declared result type, if any.
    pub ret: Option<Type>,
    /// The body; `None` for `extern op` (a compiler primitive).
    pub body: Option<Block>,
    /// The whole item.
    pub span: Span,
}

/// A kernel: tile-level code with explicit program ids, loads and stores.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelDef {
    /// Doc comment lines.
    pub docs: Vec<String>,
    /// The kernel's name.
    pub name: Name,
    /// Compile-time constants such as tile sizes (`<BLOCK: int = 1024>`).
    pub generics: Vec<Generic>,
    /// Parameters; `out` ones are results.
    pub params: Vec<Param>,
    /// The launch grid: one expression per grid axis.
    pub grid: Vec<Expr>,
    /// Where the grid clause was written (the name's span if absent).
    pub grid_span: Span,
    /// The body, run once per program.
    pub body: Block,
    /// The whole item.
    pub span: Span,
}

/// A host function, or an `extern fn` builtin of the stdlib.
#[derive(Clone, Debug, PartialEq)]
pub struct FnDef {
    /// Doc comment lines.
    pub docs: Vec<String>,
    /// The function's name.
    pub name: Name,
    /// Dtype parameters (`randn<T>`), for builtins.
    pub generics: Vec<Generic>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Declared result type, if any.
    pub ret: Option<Type>,
    /// The body; `None` for `extern fn`.
    pub body: Option<Block>,
    /// The whole item.
    pub span: Span,
}

/// A schedule: how to map one op or kernel onto the hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleDef {
    /// Doc comment lines.
    pub docs: Vec<String>,
    /// The op or kernel it applies to.
    pub target: Name,
    /// The architecture (`sm_90`), or `None` for every architecture.
    pub arch: Option<Name>,
    /// The knobs in order.
    pub knobs: Vec<Knob>,
    /// The whole item.
    pub span: Span,
}

/// One schedule knob: `tile(bm = 128, bn = 128, bk = 64);` or `async_copy;`.
#[derive(Clone, Debug, PartialEq)]
pub struct Knob {
    /// The knob's name.
    pub name: Name,
    /// Its arguments; `None` when written without parentheses.
    pub args: Option<Vec<Arg>>,
    /// The whole knob.
    pub span: Span,
}

/// `mesh node(tp = 4, dp = 2);`: a logical device mesh with named axes.
#[derive(Clone, Debug, PartialEq)]
pub struct MeshDef {
    /// Doc comment lines.
    pub docs: Vec<String>,
    /// The mesh's name.
    pub name: Name,
    /// Its axes, outermost first.
    pub axes: Vec<MeshAxis>,
    /// The whole item.
    pub span: Span,
}

/// One mesh axis and its size.
#[derive(Clone, Debug, PartialEq)]
pub struct MeshAxis {
    /// The axis name (`tp`).
    pub name: Name,
    /// Its size as written.
    pub size: Expr,
}

/// A type as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Type {
    /// What kind of type.
    pub kind: TypeKind,
    /// Where it was written.
    pub span: Span,
}

impl Type {
    /// Whether a parameter of this type is an attribute (a compile-time
    /// value of an op, not a tensor): `int`, `float`, `str`, or `bool`
    /// (written like a rank-0 tensor of `bool`, without a shard spec).
    pub fn is_attribute(&self) -> bool {
        match &self.kind {
            TypeKind::Int | TypeKind::Float | TypeKind::Str => true,
            TypeKind::Tensor { dims, elem, shard } => {
                dims.is_empty()
                    && shard.is_none()
                    && matches!(elem, ElemType::Dtype(Dtype::Bool, _))
            }
            _ => false,
        }
    }
}

/// The kinds of written types.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    /// `tensor<d0, d1, ..., elem> @ shard(...)`; a bare dtype such as `fp32`
    /// is a rank-0 tensor and is stored here with no dims.
    Tensor {
        /// The dimensions, outermost first.
        dims: Vec<Dim>,
        /// The element type.
        elem: ElemType,
        /// The shard spec, if any.
        shard: Option<ShardSpec>,
    },
    /// `int`: a compile-time or host integer.
    Int,
    /// `float`: a compile-time or host float.
    Float,
    /// `str`: a host string.
    Str,
    /// `[int]`: a list, such as a shape.
    List(Box<Type>),
    /// `(tensor<...>, tensor<...>)`: an op's several results.
    Tuple(Vec<Type>),
    /// A name in type position: a dtype parameter such as `T`.
    Named(Name),
}

/// The element type of a tensor type.
#[derive(Clone, Debug, PartialEq)]
pub enum ElemType {
    /// A concrete dtype.
    Dtype(Dtype, Span),
    /// A dtype parameter of a generic op.
    Var(Name),
}

/// One dimension of a tensor type.
#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    /// What kind of dimension.
    pub kind: DimKind,
    /// Where it was written.
    pub span: Span,
}

impl Dim {
    /// A product dimension (`2 * H`, `H * D`) as the product of its known
    /// factors and its unknown symbols; `None` for anything else (a
    /// single symbol, a constant, a pack, a product with a sum or a
    /// quotient in it). `known` gives the sizes of the
    /// symbols bound so far.
    pub fn factors(&self, known: &dyn Fn(&str) -> Option<u64>) -> Option<(u64, Vec<String>)> {
        fn walk(
            d: &Dim,
            known: &dyn Fn(&str) -> Option<u64>,
            k: &mut u64,
            free: &mut Vec<String>,
        ) -> bool {
            match &d.kind {
                DimKind::Const(c) => *k = k.saturating_mul(*c),
                DimKind::Sym(s) => match known(s) {
                    Some(n) => *k = k.saturating_mul(n),
                    None => free.push(s.clone()),
                },
                DimKind::Mul(a, b) => return walk(a, known, k, free) && walk(b, known, k, free),
                DimKind::Pack(_)
                | DimKind::Add(..)
                | DimKind::Sub(..)
                | DimKind::Div(..)
                | DimKind::Quot { .. } => return false,
            }
            true
        }
        if !matches!(self.kind, DimKind::Mul(..)) {
            return None;
        }
        let (mut k, mut free) = (1u64, Vec::new());
        walk(self, known, &mut k, &mut free).then_some((k, free))
    }

    /// The dimensions this one is computed from (none for a literal, a
    /// symbol or a pack).
    pub fn operands(&self) -> Vec<&Dim> {
        match &self.kind {
            DimKind::Mul(a, b) | DimKind::Add(a, b) | DimKind::Sub(a, b) => vec![a, b],
            DimKind::Div(a, _) => vec![a],
            DimKind::Quot { dim, by, .. } => vec![dim, by],
            DimKind::Const(_) | DimKind::Sym(_) | DimKind::Pack(_) => Vec::new(),
        }
    }

    /// Whether this is an expression (`2 * H`, `S + T`, `D / 2`) rather
    /// than a literal, a symbol or a pack.
    pub fn is_compound(&self) -> bool {
        !self.operands().is_empty()
    }

    /// Every symbol written in this dimension (packs included), in order,
    /// with where it was written; a symbol written twice comes twice.
    pub fn symbols(&self) -> Vec<(&str, Span)> {
        let mut out = Vec::new();
        fn walk<'d>(d: &'d Dim, out: &mut Vec<(&'d str, Span)>) {
            match &d.kind {
                DimKind::Sym(s) | DimKind::Pack(s) => out.push((s, d.span)),
                _ => d.operands().into_iter().for_each(|o| walk(o, out)),
            }
        }
        walk(self, &mut out);
        out
    }

    /// The size of this dimension when `known` gives each of its symbols;
    /// `None` for a pack, an unknown symbol, an overflow or a negative
    /// difference.
    pub fn eval(&self, known: &dyn Fn(&str) -> Option<u64>) -> Option<u64> {
        match &self.kind {
            DimKind::Const(c) => Some(*c),
            DimKind::Sym(s) => known(s),
            DimKind::Pack(_) => None,
            DimKind::Mul(a, b) => a.eval(known)?.checked_mul(b.eval(known)?),
            DimKind::Add(a, b) => a.eval(known)?.checked_add(b.eval(known)?),
            DimKind::Sub(a, b) => a.eval(known)?.checked_sub(b.eval(known)?),
            DimKind::Div(a, k) => a.eval(known)?.checked_div(*k),
            DimKind::Quot { dim, by, ceil } => {
                let (a, k) = (dim.eval(known)?, by.eval(known)?);
                if *ceil {
                    a.checked_add(k.checked_sub(1)?)?.checked_div(k)
                } else {
                    a.checked_div(k)
                }
            }
        }
    }

    /// The one unknown symbol of a compound dimension and the size that
    /// makes it `actual`, when the symbol is written once and reached
    /// through sums, differences and products only (`S + T` with `S`
    /// known, `2 * H`); `None` where no size or several sizes fit
    /// (`D / 2` is 32 for D = 64 and 65), or where the dimension is not an
    /// expression.
    pub fn solve(&self, actual: u64, known: &dyn Fn(&str) -> Option<u64>) -> Option<(String, u64)> {
        fn invert(d: &Dim, to: u64, known: &dyn Fn(&str) -> Option<u64>) -> Option<(String, u64)> {
            match &d.kind {
                DimKind::Sym(s) => Some((s.clone(), to)),
                DimKind::Mul(a, b) => match (a.eval(known), b.eval(known)) {
                    (Some(k), None) => (k > 0 && to % k == 0).then(|| invert(b, to / k, known))?,
                    (None, Some(k)) => (k > 0 && to % k == 0).then(|| invert(a, to / k, known))?,
                    _ => None,
                },
                DimKind::Add(a, b) => match (a.eval(known), b.eval(known)) {
                    (Some(k), None) => invert(b, to.checked_sub(k)?, known),
                    (None, Some(k)) => invert(a, to.checked_sub(k)?, known),
                    _ => None,
                },
                DimKind::Sub(a, b) => match (a.eval(known), b.eval(known)) {
                    (Some(k), None) => invert(b, k.checked_sub(to)?, known),
                    (None, Some(k)) => invert(a, to.checked_add(k)?, known),
                    _ => None,
                },
                DimKind::Const(_) | DimKind::Pack(_) | DimKind::Div(..) | DimKind::Quot { .. } => {
                    None
                }
            }
        }
        if !self.solvable(known) {
            return None;
        }
        invert(self, actual, known)
    }

    /// Whether this is an expression with one unknown symbol, written once
    /// and reached through sums, differences and products only: then
    /// [`Dim::solve`] finds its size, or no size fits.
    pub fn solvable(&self, known: &dyn Fn(&str) -> Option<u64>) -> bool {
        fn path(d: &Dim, known: &dyn Fn(&str) -> Option<u64>) -> bool {
            match &d.kind {
                DimKind::Sym(s) => known(s).is_none(),
                DimKind::Mul(a, b) | DimKind::Add(a, b) | DimKind::Sub(a, b) => {
                    path(a, known) || path(b, known)
                }
                _ => false,
            }
        }
        let free = self
            .symbols()
            .iter()
            .filter(|(s, _)| known(s).is_none())
            .count();
        self.is_compound() && free == 1 && path(self, known)
    }
}

/// The kinds of dimensions.
#[derive(Clone, Debug, PartialEq)]
pub enum DimKind {
    /// A literal size.
    Const(u64),
    /// A symbolic size, bound when the op is called (`M`).
    Sym(String),
    /// `..S`: any number of leading dimensions (stdlib generics).
    Pack(String),
    /// A product of two dimensions (`H * D`).
    Mul(Box<Dim>, Box<Dim>),
    /// A sum (`S + T`: the length of a concatenation).
    Add(Box<Dim>, Box<Dim>),
    /// A difference (`N - K + 1`), which must not be negative.
    Sub(Box<Dim>, Box<Dim>),
    /// A quotient by a positive literal, rounded down (`D / 2`).
    Div(Box<Dim>, u64),
    /// A quotient by another dimension, rounded down (`N / BLOCK`) or up
    /// (`cdiv(N, BLOCK)`). The divisor must come to a literal: a kernel
    /// constant, which the driver puts in place of its name (see
    /// [`Dim::resolve_consts`]), or a literal (`cdiv(N, 64)`).
    Quot {
        /// The dividend.
        dim: Box<Dim>,
        /// The divisor.
        by: Box<Dim>,
        /// Rounded up (`cdiv`) rather than down.
        ceil: bool,
    },
}

/// `@ shard(dp, _)`: how a tensor is split over mesh axes.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardSpec {
    /// One entry per tensor dimension.
    pub entries: Vec<ShardEntry>,
    /// Where it was written.
    pub span: Span,
}

/// One dimension of a shard spec.
#[derive(Clone, Debug, PartialEq)]
pub enum ShardEntry {
    /// `_`: the dimension is not split.
    Replicated(Span),
    /// `dp` or `node.dp`: split along that mesh axis.
    Axis(Vec<Name>),
}

/// A `{ ... }` block of statements.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The statements in order.
    pub stmts: Vec<Stmt>,
    /// From `{` to `}`.
    pub span: Span,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What kind.
    pub kind: StmtKind,
    /// Where.
    pub span: Span,
}

/// The kinds of statements.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `let [mut] name[: ty] = value;`
    Let {
        /// Whether it may be assigned again.
        mutable: bool,
        /// The bound name.
        name: Name,
        /// The declared type, if any.
        ty: Option<Type>,
        /// The value.
        value: Expr,
    },
    /// `let (a, b, ...) = value;`: the parts of a call with several
    /// results (`split`, `chunk`, `topk`), one name each; `_` drops one.
    LetTuple {
        /// The bound names, in order (`_` for a part that is dropped).
        names: Vec<Name>,
        /// The value.
        value: Expr,
    },
    /// `name = value;` or `name += value;`
    Assign {
        /// The assigned variable.
        target: Name,
        /// `=` or a compound operator.
        op: AssignOp,
        /// The value.
        value: Expr,
    },
    /// `return [value];`
    Return(Option<Expr>),
    /// `break;`: leaves the innermost loop (host code).
    Break,
    /// `continue;`: goes on with the innermost loop's next iteration
    /// (host code).
    Continue,
    /// An expression evaluated for its effect (`print(x);`, `store(...)`).
    Expr(Expr),
    /// `if c { } else if d { } else { }`, kept flat.
    If {
        /// Each condition with its block.
        branches: Vec<(Expr, Block)>,
        /// The final `else` block.
        otherwise: Option<Block>,
    },
    /// `for i in start..end { }`
    For {
        /// The loop variable.
        var: Name,
        /// First value.
        start: Expr,
        /// One past the last value.
        end: Expr,
        /// The stride (`step S`, a positive constant), 1 if absent.
        step: Option<Expr>,
        /// The body.
        body: Block,
    },
    /// `while cond { }` (host code).
    While {
        /// Tested before each iteration.
        cond: Expr,
        /// The body.
        body: Block,
    },
    /// A `numerics ...;` setting inside an op body.
    Numerics(Numerics),
    /// A lone `;`.
    Empty,
    /// Where the parser recovered from an error.
    Error,
}

/// `=`, `+=`, `-=`, `*=`, `/=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignOp {
    Set,
    Add,
    Sub,
    Mul,
    Div,
}

impl AssignOp {
    /// The elementwise op of a compound assignment (`+=` ...); `None` for `=`.
    pub fn elementwise(self) -> Option<BinaryOp> {
        Some(match self {
            AssignOp::Set => return None,
            AssignOp::Add => BinaryOp::Add,
            AssignOp::Sub => BinaryOp::Sub,
            AssignOp::Mul => BinaryOp::Mul,
            AssignOp::Div => BinaryOp::Div,
        })
    }
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Identity for side tables.
    pub id: ExprId,
    /// What kind.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
    /// Height of the tree under this node (a leaf is 1).
    pub depth: u32,
}

/// The kinds of expressions.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// An integer literal.
    Int(u64),
    /// A float literal.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string literal (escapes processed).
    Str(String),
    /// A name: a local, parameter, dimension symbol, constant or mesh axis.
    Name(String),
    /// A binary operation.
    Binary {
        /// The operator.
        op: BinOp,
        /// The left operand.
        lhs: Box<Expr>,
        /// The right operand.
        rhs: Box<Expr>,
    },
    /// A prefix operation.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// `callee<dtypes>(args)`.
    Call {
        /// The called op, kernel, fn or builtin.
        callee: Name,
        /// Explicit dtype arguments (`zeros<fp32>`).
        dtype_args: Vec<(Dtype, Span)>,
        /// The arguments.
        args: Vec<Arg>,
    },
    /// `base[i, a:b, :]`.
    Index {
        /// The indexed value.
        base: Box<Expr>,
        /// One entry per indexed dimension.
        indices: Vec<IndexArg>,
    },
    /// `base.field`; only `.T` (transpose) has a meaning today.
    Field {
        /// The value.
        base: Box<Expr>,
        /// The field.
        field: Name,
    },
    /// `[a, b, c]`: a list, used for shapes and index tiles.
    List(Vec<Expr>),
    /// `(a, b)`: an op's several results, returned together.
    Tuple(Vec<Expr>),
    /// `value as dtype`.
    Cast {
        /// The converted value.
        value: Box<Expr>,
        /// The target dtype.
        dtype: Dtype,
    },
    /// Where the parser recovered from an error.
    Error,
}

/// The parts of a call expression: callee, dtype arguments, arguments.
pub type CallParts<'e> = (&'e Name, &'e [(Dtype, Span)], &'e [Arg]);

impl Block {
    /// Every call expression in the block, nested blocks and
    /// sub-expressions included, in source order.
    pub fn calls(&self) -> Vec<&Expr> {
        self.exprs_where(&|e| matches!(e.kind, ExprKind::Call { .. }))
    }

    /// Every expression in the block for which `pred` holds, nested blocks
    /// and sub-expressions included, in source order.
    pub fn exprs_where(&self, pred: &dyn Fn(&Expr) -> bool) -> Vec<&Expr> {
        let mut out = Vec::new();
        block_exprs(self, pred, &mut out);
        out
    }
}

fn block_exprs<'a>(b: &'a Block, pred: &dyn Fn(&Expr) -> bool, out: &mut Vec<&'a Expr>) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { value, .. }
            | StmtKind::LetTuple { value, .. }
            | StmtKind::Assign { value, .. }
            | StmtKind::Return(Some(value))
            | StmtKind::Expr(value) => expr_where(value, pred, out),
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (c, b) in branches {
                    expr_where(c, pred, out);
                    block_exprs(b, pred, out);
                }
                if let Some(b) = otherwise {
                    block_exprs(b, pred, out);
                }
            }
            StmtKind::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                expr_where(start, pred, out);
                expr_where(end, pred, out);
                if let Some(step) = step {
                    expr_where(step, pred, out);
                }
                block_exprs(body, pred, out);
            }
            StmtKind::While { cond, body } => {
                expr_where(cond, pred, out);
                block_exprs(body, pred, out);
            }
            StmtKind::Return(None)
            | StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Numerics(_)
            | StmtKind::Empty
            | StmtKind::Error => {}
        }
    }
}

fn expr_where<'a>(e: &'a Expr, pred: &dyn Fn(&Expr) -> bool, out: &mut Vec<&'a Expr>) {
    if pred(e) {
        out.push(e);
    }
    for c in e.kind.children() {
        expr_where(c, pred, out);
    }
}

impl ExprKind {
    /// The number a literal stands for: an integer or float literal, `inf`,
    /// `true`/`false` (1 and 0), each possibly negated; `None` for any
    /// other expression.
    pub fn literal_number(&self) -> Option<f64> {
        match self {
            ExprKind::Int(v) => Some(*v as f64),
            ExprKind::Float(v) => Some(*v),
            ExprKind::Bool(b) => Some(f64::from(u8::from(*b))),
            ExprKind::Unary {
                op: UnOp::Neg,
                operand,
            } => operand.kind.literal_number().map(|v| -v),
            _ => None,
        }
    }

    /// The callee, dtype arguments and arguments of a call; `None` for
    /// any other expression.
    pub fn as_call(&self) -> Option<CallParts<'_>> {
        match self {
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => Some((callee, dtype_args, args)),
            _ => None,
        }
    }

    /// Whether this is a call written in method syntax (`x.sum()`: the
    /// receiver, its first argument, stands before the callee).
    pub fn is_method_call(&self) -> bool {
        self.as_call().is_some_and(|(callee, _, args)| {
            args.first()
                .is_some_and(|a| a.value.span.lo < callee.span.lo)
        })
    }

    /// The direct sub-expressions, in source order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            ExprKind::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            ExprKind::Unary { operand, .. } => vec![operand],
            ExprKind::Call { args, .. } => args.iter().map(|a| &a.value).collect(),
            ExprKind::Index { base, indices } => {
                let mut out = vec![&**base];
                for index in indices {
                    match index {
                        IndexArg::Expr(e) => out.push(e),
                        IndexArg::Slice { lo, hi, step, .. } => {
                            out.extend(lo.iter().chain(hi.iter()).chain(step.as_deref()))
                        }
                        IndexArg::NewAxis(_) | IndexArg::Ellipsis(_) => {}
                    }
                }
                out
            }
            ExprKind::Field { base, .. } => vec![base],
            ExprKind::List(items) | ExprKind::Tuple(items) => items.iter().collect(),
            ExprKind::Cast { value, .. } => vec![value],
            _ => Vec::new(),
        }
    }
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    /// `@`: matrix multiplication.
    MatMul,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    /// `&`: bitwise and of integers, logical and of booleans.
    BitAnd,
    /// `|`: bitwise or of integers, logical or of booleans.
    BitOr,
    /// `^`: bitwise exclusive or of integers, `!=` of booleans.
    BitXor,
    /// `<<`: an integer shifted left.
    Shl,
    /// `>>`: an integer shifted right, the sign copied in.
    Shr,
}

impl BinOp {
    /// The elementwise op this operator applies; `None` for `@`.
    pub fn elementwise(self) -> Option<BinaryOp> {
        Some(match self {
            BinOp::Add => BinaryOp::Add,
            BinOp::Sub => BinaryOp::Sub,
            BinOp::Mul => BinaryOp::Mul,
            BinOp::Div => BinaryOp::Div,
            BinOp::Rem => BinaryOp::Rem,
            BinOp::Eq => BinaryOp::Eq,
            BinOp::Ne => BinaryOp::Ne,
            BinOp::Lt => BinaryOp::Lt,
            BinOp::Le => BinaryOp::Le,
            BinOp::Gt => BinaryOp::Gt,
            BinOp::Ge => BinaryOp::Ge,
            BinOp::And => BinaryOp::And,
            BinOp::Or => BinaryOp::Or,
            BinOp::BitAnd => BinaryOp::BitAnd,
            BinOp::BitOr => BinaryOp::BitOr,
            BinOp::BitXor => BinaryOp::BitXor,
            BinOp::Shl => BinaryOp::Shl,
            BinOp::Shr => BinaryOp::Shr,
            BinOp::MatMul => return None,
        })
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::MatMul => "@",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }

    /// Whether the result is a boolean comparison.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    /// Whether this is `&`, `|`, `^`, `<<` or `>>`.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
        )
    }
}

/// Prefix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-x`
    Neg,
    /// `!x`
    Not,
    /// `~x`: the bits of an integer inverted (`-x - 1`), a boolean negated.
    BitNot,
}

/// The parameter each argument of a call binds, in source order:
/// positional arguments take the parameters in turn, named ones the
/// parameter of that name; `None` where no parameter fits.
pub fn arg_slots(params: &[&Param], args: &[Arg]) -> Vec<Option<usize>> {
    let mut next = 0;
    args.iter()
        .map(|a| {
            let slot = match &a.kind {
                ArgKind::Positional => {
                    next += 1;
                    next - 1
                }
                ArgKind::Named(n) | ArgKind::In(n) => {
                    params.iter().position(|p| p.name.text == n.text)?
                }
            };
            (slot < params.len()).then_some(slot)
        })
        .collect()
}

/// The parameters a call binds, as indices into `params`: every one,
/// except for a kernel (`kernel` true) called with its inputs only (fewer
/// positional arguments than parameters), which binds its non-`out`
/// parameters. [`arg_slots`] of these gives each argument's place.
pub fn call_params(params: &[Param], kernel: bool, args: &[Arg]) -> Vec<usize> {
    let positional = args
        .iter()
        .filter(|a| a.kind == ArgKind::Positional)
        .count();
    (0..params.len())
        .filter(|i| !kernel || positional == params.len() || params[*i].is_input())
        .collect()
}

/// A call or knob argument.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// Positional, `name = value`, or `name in [values]` (autotune).
    pub kind: ArgKind,
    /// The argument's value.
    pub value: Expr,
    /// The whole argument.
    pub span: Span,
}

/// How an argument was passed.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgKind {
    /// `value`
    Positional,
    /// `name = value`
    Named(Name),
    /// `name in [values]`: an autotune search space.
    In(Name),
}

/// One entry of an index expression.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexArg {
    /// A single index.
    Expr(Expr),
    /// `lo:hi` or `lo:hi:step`, each part optional.
    Slice {
        /// The first index, default 0.
        lo: Option<Expr>,
        /// One past the last, default the dimension's size.
        hi: Option<Expr>,
        /// Every `step`-th element (numpy's `x[0::2]`), default 1.
        step: Option<Box<Expr>>,
        /// Where it was written.
        span: Span,
    },
    /// `None`: a new axis of extent 1 (numpy's `np.newaxis`).
    NewAxis(Span),
    /// `...`: as many full `:` slices as the axes the other entries leave
    /// (numpy's `x[..., 0]`, the last axis whatever the rank).
    Ellipsis(Span),
}

impl OpDef {
    /// The calls in the body that pass the parameter `param` on, as one of
    /// their arguments (`_reduce_loss(l, reduction)`): callee and arguments.
    pub fn calls_passing(&self, param: &str) -> Vec<(&Name, &[Arg])> {
        let calls = self.body.iter().flat_map(|b| b.calls());
        calls
            .filter_map(|e| e.kind.as_call().map(|(callee, _, args)| (callee, args)))
            .filter(|(_, args)| {
                (args.iter()).any(|a| matches!(&a.value.kind, ExprKind::Name(n) if n == param))
            })
            .collect()
    }

    /// The values `param`, a `str` attribute, may take: its default and
    /// each string literal the body compares it with (`mode == "reflect"`),
    /// in that order, once each. One or none: any string. (Those of an
    /// attribute it is passed on to count too: see [`Self::calls_passing`].)
    pub fn string_choices(&self, param: &Param) -> Vec<String> {
        fn compared(e: &Expr, param: &str, out: &mut Vec<String>) {
            if let ExprKind::Binary {
                op: BinOp::Eq | BinOp::Ne,
                lhs,
                rhs,
            } = &e.kind
            {
                for (a, b) in [(lhs, rhs), (rhs, lhs)] {
                    if let (ExprKind::Name(n), ExprKind::Str(s)) = (&a.kind, &b.kind) {
                        if n == param && !out.contains(s) {
                            out.push(s.clone());
                        }
                    }
                }
            }
            for c in e.kind.children() {
                compared(c, param, out);
            }
        }
        let mut out: Vec<String> = match param.default.as_ref().map(|d| &d.kind) {
            Some(ExprKind::Str(s)) => vec![s.clone()],
            _ => Vec::new(),
        };
        for s in self.body.iter().flat_map(|b| &b.stmts) {
            if let StmtKind::Let { value, .. }
            | StmtKind::LetTuple { value, .. }
            | StmtKind::Expr(value)
            | StmtKind::Return(Some(value)) = &s.kind
            {
                compared(value, &param.name.text, &mut out);
            }
        }
        out
    }
}

impl IndexArg {
    /// Whether this entry selects along an existing axis (a `None` makes
    /// a new one instead).
    pub fn consumes_axis(&self) -> bool {
        !matches!(self, IndexArg::NewAxis(_) | IndexArg::Ellipsis(_))
    }

    /// `indices` with its `...` replaced by the full `:` slices that make
    /// the entries selecting an axis number `rank` (none where they are
    /// that many or more already). Only the first `...` is expanded; a
    /// second is dropped, and the checker reports it.
    pub fn expand_ellipsis(indices: &[IndexArg], rank: usize) -> Cow<'_, [IndexArg]> {
        let Some(at) = indices
            .iter()
            .position(|i| matches!(i, IndexArg::Ellipsis(_)))
        else {
            return Cow::Borrowed(indices);
        };
        let IndexArg::Ellipsis(span) = indices[at] else {
            unreachable!("found above")
        };
        let taken = indices.iter().filter(|i| i.consumes_axis()).count();
        let full = IndexArg::Slice {
            lo: None,
            hi: None,
            step: None,
            span,
        };
        let mut out = indices[..at].to_vec();
        out.extend(std::iter::repeat_n(full, rank.saturating_sub(taken)));
        out.extend(
            (indices[at + 1..].iter())
                .filter(|i| !matches!(i, IndexArg::Ellipsis(_)))
                .cloned(),
        );
        Cow::Owned(out)
    }

    /// The one expression of `indices` and its axis when every other entry
    /// is a full `:` (`x[ids]`, `x[:, ids]`: an index tensor's form).
    pub fn sole_expr(indices: &[IndexArg]) -> Option<(usize, &Expr)> {
        match Self::exprs_and_full(indices)?.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Two or more expressions among the indices, every other a full `:`
    /// (`x[rows, cols]`, `x[:, i, j]`), with their axes: the form numpy
    /// indexes with paired (advanced) indices where one is an array.
    pub fn paired_exprs(indices: &[IndexArg]) -> Option<Vec<(usize, &Expr)>> {
        Self::exprs_and_full(indices).filter(|e| e.len() >= 2)
    }

    /// The expressions among `indices` with their axes, if there is one
    /// at least and every other index is a full `:`.
    fn exprs_and_full(indices: &[IndexArg]) -> Option<Vec<(usize, &Expr)>> {
        let full = |i: &IndexArg| {
            matches!(
                i,
                IndexArg::Expr(_)
                    | IndexArg::Slice {
                        lo: None,
                        hi: None,
                        step: None,
                        ..
                    }
            )
        };
        let exprs: Vec<(usize, &Expr)> = (indices.iter().enumerate())
            .filter_map(|(k, i)| match i {
                IndexArg::Expr(e) => Some((k, e)),
                _ => None,
            })
            .collect();
        (!exprs.is_empty() && indices.iter().all(full)).then_some(exprs)
    }
}
