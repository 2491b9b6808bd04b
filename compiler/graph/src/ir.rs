//! The Graph IR data structures: a graph of SSA nodes, each an op applied to
//! earlier nodes, with a type (shape, dtype, shard spec) on every value.

use std::fmt;
use tessera_diagnostics::Span;
use tessera_sema::{AxisRef, Dim, NumericsConfig, Policy, TensorTy};
use tessera_syntax::ast::Dtype;

/// A value of a graph: the index of the node that defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The node index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A host scalar's kind. Scalars are weakly typed: combined with a tensor,
/// they take the tensor's dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// An integer (dimension sizes, counts).
    Int,
    /// A float.
    Float,
    /// A boolean.
    Bool,
}

impl ScalarKind {
    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ScalarKind::Int => "int",
            ScalarKind::Float => "float",
            ScalarKind::Bool => "bool",
        }
    }
}

/// The type of a value: a tensor (of any rank, 0 included) or a scalar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A tensor.
    Tensor(TensorTy),
    /// A host scalar.
    Scalar(ScalarKind),
}

impl Type {
    /// The tensor type, if this is a tensor.
    pub fn tensor(&self) -> Option<&TensorTy> {
        match self {
            Type::Tensor(t) => Some(t),
            Type::Scalar(_) => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(t) if t.dims.is_empty() => {
                // Rank 0: written `tensor<dtype>` so it reads apart from scalars.
                write!(f, "tensor<{}>", t.dtype)?;
                if let Some(s) = t.shard.as_ref().filter(|s| !s.is_replicated()) {
                    write!(f, " @ {s}")?;
                }
                Ok(())
            }
            Type::Tensor(t) => write!(f, "{t}"),
            Type::Scalar(k) => f.write_str(k.name()),
        }
    }
}

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `!x` on booleans.
    Not,
    /// e^x.
    Exp,
    /// ln x.
    Log,
    /// √x.
    Sqrt,
    /// 1/√x.
    Rsqrt,
    /// tanh x.
    Tanh,
    /// The error function.
    Erf,
    /// |x|.
    Abs,
}

impl UnaryOp {
    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Erf => "erf",
            UnaryOp::Abs => "abs",
        }
    }

    /// Whether the result is a float even for integer operands.
    pub fn is_transcendental(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs)
    }

    /// The function on an f64 (booleans are 0/1).
    pub fn eval(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Not => f64::from(x == 0.0),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Erf => crate::math::erf(x),
            UnaryOp::Abs => x.abs(),
        }
    }
}

/// Elementwise functions of two operands, with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b.
    Add,
    /// a - b.
    Sub,
    /// a * b.
    Mul,
    /// a / b.
    Div,
    /// The remainder, with the sign of a (truncated division).
    Rem,
    /// a to the power b.
    Pow,
    /// The larger.
    Max,
    /// The smaller.
    Min,
    /// a == b.
    Eq,
    /// a != b.
    Ne,
    /// a < b.
    Lt,
    /// a <= b.
    Le,
    /// a > b.
    Gt,
    /// a >= b.
    Ge,
    /// Logical and.
    And,
    /// Logical or.
    Or,
}

impl BinaryOp {
    /// The elementwise op of a source operator; `None` for `@`.
    pub fn from_ast(op: tessera_syntax::ast::BinOp) -> Option<BinaryOp> {
        use tessera_syntax::ast::BinOp as B;
        Some(match op {
            B::Add => BinaryOp::Add,
            B::Sub => BinaryOp::Sub,
            B::Mul => BinaryOp::Mul,
            B::Div => BinaryOp::Div,
            B::Rem => BinaryOp::Rem,
            B::Eq => BinaryOp::Eq,
            B::Ne => BinaryOp::Ne,
            B::Lt => BinaryOp::Lt,
            B::Le => BinaryOp::Le,
            B::Gt => BinaryOp::Gt,
            B::Ge => BinaryOp::Ge,
            B::And => BinaryOp::And,
            B::Or => BinaryOp::Or,
            B::MatMul => return None,
        })
    }

    /// The op of a compound assignment (`+=` ...); `None` for `=`.
    pub fn from_assign(op: tessera_syntax::ast::AssignOp) -> Option<BinaryOp> {
        use tessera_syntax::ast::AssignOp as A;
        Some(match op {
            A::Set => return None,
            A::Add => BinaryOp::Add,
            A::Sub => BinaryOp::Sub,
            A::Mul => BinaryOp::Mul,
            A::Div => BinaryOp::Div,
        })
    }

    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
        }
    }

    /// Whether the result is boolean.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// Whether `a op b == b op a`.
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Max
                | BinaryOp::Min
                | BinaryOp::Eq
                | BinaryOp::Ne
                | BinaryOp::And
                | BinaryOp::Or
        )
    }

    /// The function on f64s (booleans are 0/1).
    pub fn eval(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Rem => a % b,
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Max => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
            BinaryOp::Min => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }
            BinaryOp::Eq => f64::from(a == b),
            BinaryOp::Ne => f64::from(a != b),
            BinaryOp::Lt => f64::from(a < b),
            BinaryOp::Le => f64::from(a <= b),
            BinaryOp::Gt => f64::from(a > b),
            BinaryOp::Ge => f64::from(a >= b),
            BinaryOp::And => f64::from(a != 0.0 && b != 0.0),
            BinaryOp::Or => f64::from(a != 0.0 || b != 0.0),
        }
    }
}

/// Reductions along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// Σ.
    Sum,
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
    /// Σ / n.
    Mean,
}

impl ReduceKind {
    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
            ReduceKind::Mean => "mean",
        }
    }
}

/// Collectives over a mesh axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveKind {
    /// Sum of partial values; everyone gets the total.
    AllReduce,
    /// Concatenation of the shards of the dimension split over the axis.
    AllGather,
    /// Sum of partial values, each device keeping one slice of `dim`.
    ReduceScatter {
        /// The dimension scattered.
        dim: usize,
    },
    /// `concat_dim` becomes whole and `split_dim` split.
    AllToAll {
        /// Becomes split over the axis.
        split_dim: usize,
        /// Becomes whole.
        concat_dim: usize,
    },
    /// Cyclic shift of whole tensors along the axis.
    Send {
        /// Steps along the axis.
        offset: i64,
    },
    /// The receiving side of `Send`.
    Recv {
        /// Steps along the axis.
        offset: i64,
    },
}

impl CollectiveKind {
    /// The name in the text form.
    pub fn name(&self) -> String {
        match self {
            CollectiveKind::AllReduce => "all_reduce".to_owned(),
            CollectiveKind::AllGather => "all_gather".to_owned(),
            CollectiveKind::ReduceScatter { dim } => format!("reduce_scatter {{dim = {dim}}}"),
            CollectiveKind::AllToAll {
                split_dim,
                concat_dim,
            } => format!("all_to_all {{split = {split_dim}, concat = {concat_dim}}}"),
            CollectiveKind::Send { offset } => format!("send {{offset = {offset}}}"),
            CollectiveKind::Recv { offset } => format!("recv {{offset = {offset}}}"),
        }
    }
}

/// One axis of a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SliceAxis {
    /// A single index: the axis is dropped.
    Index(u64),
    /// `lo..hi`: the axis keeps `hi - lo` entries.
    Range(u64, u64),
    /// The whole axis.
    Full,
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The graph's parameter number `n`.
    Param(usize),
    /// A scalar constant (the type says which kind).
    Const(f64),
    /// The size of a (possibly symbolic) dimension, as an int scalar.
    DimSize(Dim),
    /// An elementwise function of one operand.
    Unary(UnaryOp),
    /// An elementwise function of two operands, broadcast.
    Binary(BinaryOp),
    /// `cond ? a : b`, elementwise, broadcast.
    Select,
    /// An explicit or promoting conversion (round to nearest even).
    Cast(Dtype),
    /// A reduction along `axis`.
    Reduce {
        /// Which reduction.
        kind: ReduceKind,
        /// The axis reduced.
        axis: usize,
        /// Whether the reduced axis stays with size 1.
        keepdims: bool,
        /// The order and compensation of additions.
        policy: Policy,
        /// The accumulation dtype.
        acc: Dtype,
    },
    /// Batched matrix product over the last two dimensions.
    MatMul {
        /// The accumulation dtype.
        acc: Dtype,
        /// Whether fp32 inputs may be rounded to tf32.
        tf32: bool,
    },
    /// Swaps the last two dimensions.
    Transpose,
    /// The same elements in the node's shape.
    Reshape,
    /// A sub-tensor.
    Slice(Vec<SliceAxis>),
    /// 2-D convolution, NCHW.
    Conv2d {
        /// Stride in both directions.
        stride: u64,
        /// Zero padding on every side.
        padding: u64,
        /// The accumulation dtype.
        acc: Dtype,
    },
    /// A collective over a mesh axis.
    Collective {
        /// Which.
        kind: CollectiveKind,
        /// The axis.
        axis: AxisRef,
    },
    /// A call of a user kernel (its inputs as operands; the result is its
    /// single output).
    Kernel {
        /// The kernel's name.
        name: String,
        /// The values of its compile-time constants.
        consts: Vec<(String, i64)>,
    },
    /// softmax(q @ kᵀ · scale) @ v with online softmax (FlashAttention);
    /// operands q, k, v, scale. Made by the attention rewrite.
    Attention {
        /// The accumulation dtype.
        acc: Dtype,
    },
}

impl Op {
    /// Whether the op is elementwise (fusable into producers and consumers).
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast(_)
        )
    }
}

/// One SSA value and how it is computed.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The computation.
    pub op: Op,
    /// Operands: earlier nodes.
    pub args: Vec<ValueId>,
    /// The result type.
    pub ty: Type,
    /// The source expression it came from.
    pub span: Span,
}

/// A graph parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Its name in the source.
    pub name: String,
    /// Its type.
    pub ty: Type,
}

/// One op, with everything it calls inlined: SSA nodes in topological order
/// (every operand precedes its user).
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// The op's name.
    pub name: String,
    /// Parameters, in declaration order.
    pub params: Vec<Param>,
    /// The nodes.
    pub nodes: Vec<Node>,
    /// The results.
    pub outputs: Vec<ValueId>,
    /// The numerics of the op (inlined callees may carry their own, on the
    /// nodes that need them).
    pub numerics: NumericsConfig,
}

impl Graph {
    /// The node defining `v`.
    pub fn node(&self, v: ValueId) -> &Node {
        &self.nodes[v.index()]
    }

    /// The type of `v`.
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.nodes[v.index()].ty
    }

    /// The tensor type of `v`, if it is a tensor.
    pub fn tensor_ty(&self, v: ValueId) -> Option<&TensorTy> {
        self.ty(v).tensor()
    }

    /// Appends a node and returns its value.
    pub fn push(&mut self, node: Node) -> ValueId {
        self.nodes.push(node);
        ValueId(self.nodes.len() as u32 - 1)
    }

    /// How many times each value is used (by nodes and outputs).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut uses = vec![0; self.nodes.len()];
        for n in &self.nodes {
            for a in &n.args {
                uses[a.index()] += 1;
            }
        }
        for o in &self.outputs {
            uses[o.index()] += 1;
        }
        uses
    }
}
