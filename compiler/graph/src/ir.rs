//! The Graph IR data structures: a graph of SSA nodes, each an op applied to
//! earlier nodes, with a type (shape, dtype, shard spec) on every value.

use std::fmt;
pub use tessera_core::{BinaryOp, CollectiveKind, ReduceKind, ScanKind, UnaryOp};
use tessera_diagnostics::Span;
use tessera_sema::{AxisRef, Const, Dim, NumericsConfig, Policy, TensorTy};
use tessera_syntax::ast::Dtype;

tessera_core::entity!(
    /// A value of a graph: the index of the node that defines it.
    ValueId,
    "%"
);

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

/// The geometry of a convolution over an input's last two axes (height,
/// width): output position `p` of an axis reads input positions `p ·
/// stride + k · dilation - padding` for kernel positions `k`, zero outside
/// the input; with `groups` G, output channel `o` reads the input channels
/// of its group, `o / (O / G)`, the weights holding `C / G` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeom {
    /// Step between output positions, per axis (at least 1).
    pub stride: [u64; 2],
    /// Zeros added before and after the input, per axis.
    pub padding: [u64; 2],
    /// Step between kernel taps, per axis (at least 1).
    pub dilation: [u64; 2],
    /// Channel groups (at least 1; dividing the input and output channels).
    pub groups: u64,
}

impl ConvGeom {
    /// Output extent along axis `a` (0: height, 1: width) of an input of
    /// extent `n` and a kernel of extent `k`; `None` when the kernel's
    /// span exceeds the padded input.
    pub fn out(&self, a: usize, n: u64, k: u64) -> Option<u64> {
        let span = self.dilation[a]
            .checked_mul(k.checked_sub(1)?)?
            .checked_add(1)?;
        let padded = n.checked_add(self.padding[a].checked_mul(2)?)?;
        (padded >= span && self.stride[a] > 0).then(|| (padded - span) / self.stride[a] + 1)
    }
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
    /// The integers `start, start + 1, ...` along the node's single
    /// axis (int32). Like a view it is never stored: a kernel computes
    /// each element from its index.
    Arange {
        /// The first value.
        start: i64,
    },
    /// Uniform fp32 values in [0, 1) of Philox-4x32-10: element `i` (row
    /// major) is `uniform_f32(seed, offset + i)` of the runtime's generator,
    /// on every backend. Generated like [`Op::Arange`]: never stored.
    Rand {
        /// The key.
        seed: u64,
        /// The counter of element 0.
        offset: u64,
    },
    /// Swaps the last two dimensions.
    Transpose,
    /// Axes reordered: result axis `i` is operand axis `perm[i]`.
    Permute(Vec<usize>),
    /// An inclusive scan along `axis` (the same shape and dtype): running
    /// sums (in fp32 for floats, int32 or int64 for integers), products,
    /// maxima, minima or log-sum-exps.
    ///
    /// With a `segment` other than 0, the lines are cut into segments of
    /// that many elements (the last may be shorter), each scanned on its
    /// own; the builder joins them (a long line's scan, in parallel).
    Scan {
        /// Which scan.
        kind: ScanKind,
        /// The axis scanned along.
        axis: usize,
        /// Elements per segment scanned on its own; 0 for whole lines.
        segment: u64,
    },
    /// The positions (int32) that sort the operand along `axis`: element
    /// `p` of a line is the position of the element placed `p`th,
    /// ascending or descending, NaN as the largest value, ties in the
    /// order of their positions (stable). `sort`'s values are a `gather`
    /// of them.
    ///
    /// With a `segment` other than 0, the lines are cut into segments of
    /// that many elements (the last may be shorter), each sorted on its
    /// own: element `s·segment + p` is the position (in the line) of the
    /// element placed `p`th in segment `s`. [`Op::Merge`] joins them.
    Argsort {
        /// The axis sorted along.
        axis: usize,
        /// Largest first.
        descending: bool,
        /// Elements per segment sorted on its own; 0 for whole lines.
        segment: u64,
    },
    /// The positions that sort operand x along `axis`, as [`Op::Argsort`]
    /// of x gives them, from operand p: x's lines already sorted in
    /// segments of `segment` elements (a segmented argsort of x, the same
    /// way). Each element's place is the number of elements of every
    /// segment that go before it, found by a binary search per segment.
    Merge {
        /// The axis sorted along.
        axis: usize,
        /// Largest first.
        descending: bool,
        /// Elements per sorted segment.
        segment: u64,
    },
    /// The operands (one dtype and rank) joined along `axis`.
    Concat {
        /// The axis joined along.
        axis: usize,
    },
    /// torch.gather: operands x and an integer index of x's rank; the
    /// result has the index's shape, `out[.., i, ..] = x[.., index[.., i,
    /// ..], ..]` at `axis`. An index outside x's extent is a run-time error.
    Gather {
        /// The axis indexed.
        axis: usize,
    },
    /// numpy.take: operands x and an integer index of any shape; x's shape
    /// with `axis` replaced by the index's shape. An index outside x's
    /// extent is a run-time error.
    Take {
        /// The axis indexed.
        axis: usize,
    },
    /// Operand `src` written at the positions an integer `index` names
    /// along `axis` (operands: index, src), into zeros of the node's
    /// shape; elsewhere the node's coordinates are src's. With `vector`
    /// the index is one 1-d tensor over src's `axis` (torch.index_add,
    /// index_copy); else it has src's rank and names a position per
    /// element (torch.scatter_add, scatter; over the index's shape). With
    /// `add` the elements named more than once sum (integers wrap; floats
    /// in any order, atomics on the GPU), else one of them is kept. An
    /// index outside the node's extent is a run-time error.
    Scatter {
        /// The axis indexed.
        axis: usize,
        /// Whether the index is one vector along `axis`.
        vector: bool,
        /// Whether values named at one place add (else one is kept).
        add: bool,
    },
    /// The same elements in the node's shape.
    Reshape,
    /// A sub-tensor.
    Slice(Vec<SliceAxis>),
    /// 2-D convolution, NCHW (a 1-D one is one of height 1).
    Conv2d {
        /// Strides, padding, dilation and groups.
        geom: ConvGeom,
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
    /// A call of a user kernel (its inputs as operands). The result is its
    /// first `out` parameter; the others are [`Op::KernelOut`] nodes of
    /// this one.
    Kernel {
        /// The kernel's name.
        name: String,
        /// The values of its compile-time constants (integers, floats,
        /// booleans).
        consts: Vec<(String, Const)>,
    },
    /// Output `i` (`i >= 1`, in the order of the kernel's `out`
    /// parameters) of the [`Op::Kernel`] node that is its one operand,
    /// computed by that launch: a kernel with several outputs is one
    /// `Kernel` node and one `KernelOut` per further output. The type is
    /// the node's.
    KernelOut(usize),
    /// softmax(q @ kᵀ · scale) @ v with online softmax (FlashAttention);
    /// operands q `[..B, N, D]`, k `[..Bk, L, D]`, v `[..Bk, L, E]`, scale.
    /// Each batch dim of k and v equals q's or divides it: query head `h`
    /// reads key/value head `h / (Hq / Hk)` (grouped-query attention; MQA
    /// when Hk = 1). Made by the attention rewrite and `std.nn.attention`.
    Attention {
        /// The accumulation dtype.
        acc: Dtype,
        /// Query `i` sees keys `j <= i` only (top-left aligned, as
        /// `torch.nn.functional.scaled_dot_product_attention(is_causal=True)`).
        causal: bool,
        /// With `causal`: the diagonal ends at the last key, query `i`
        /// seeing keys `j <= i + L - N` (flash-attn's causal); a query that
        /// sees none gives 0.
        bottom_right: bool,
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

    /// Whether the op is read through rather than stored: a view of its
    /// operand (transpose, permute, reshape, slice) or a value computed
    /// from each index (`arange`, `rand`).
    pub fn is_read_through(&self) -> bool {
        matches!(
            self,
            Op::Transpose
                | Op::Permute(_)
                | Op::Reshape
                | Op::Slice(_)
                | Op::Arange { .. }
                | Op::Rand { .. }
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
