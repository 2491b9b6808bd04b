//! The elementwise, reduction and collective operations every IR shares, each with one
//! table from its name to the op ([`UnaryOp::from_name`],
//! [`BinaryOp::from_name`], [`ReduceKind::from_name`]) and its meaning on
//! `f64` for the reference evaluators.

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
    /// sin x (radians).
    Sin,
    /// cos x (radians).
    Cos,
    /// 2^x.
    Exp2,
    /// log2 x.
    Log2,
    /// The largest integer not above x.
    Floor,
    /// The smallest integer not below x.
    Ceil,
    /// The nearest integer, ties to even (numpy's and torch's `round`).
    Round,
    /// The integer part, toward zero.
    Trunc,
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
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log2 => "log2",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Trunc => "trunc",
        }
    }

    /// Every unary op.
    pub const ALL: [UnaryOp; 17] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Abs,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Exp2,
        UnaryOp::Log2,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Trunc,
    ];

    /// The op named `name` in the text form (the inverse of [`UnaryOp::name`]).
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|u| u.name() == name)
    }

    /// The op a call of the language's math function `name` (`exp`, `log`,
    /// `sqrt`, `rsqrt`, `tanh`, `erf`, `abs`, `sin`, `cos`, `exp2`, `log2`,
    /// `floor`, `ceil`, `round`, `trunc`) applies, in ops and kernels
    /// alike; `None` for any other name (operators `-` and `!` are not calls).
    pub fn from_function(name: &str) -> Option<UnaryOp> {
        UnaryOp::from_name(name).filter(|u| !matches!(u, UnaryOp::Neg | UnaryOp::Not))
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
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Round => x.round_ties_even(),
            UnaryOp::Trunc => x.trunc(),
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
    /// Bitwise and of integers (logical and of booleans).
    BitAnd,
    /// Bitwise or of integers (logical or of booleans).
    BitOr,
    /// Bitwise exclusive or of integers (`!=` of booleans).
    BitXor,
    /// a shifted left by b bits: 0 once b reaches the width of a's dtype
    /// (or is negative), as PTX's `shl` clamps its count.
    Shl,
    /// a shifted right by b bits, the sign copied in (logical for
    /// `uint8`): 0 or -1 once b reaches the width (or is negative).
    Shr,
}

impl BinaryOp {
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
            BinaryOp::BitAnd => "bitand",
            BinaryOp::BitOr => "bitor",
            BinaryOp::BitXor => "bitxor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
        }
    }

    /// Every binary op.
    pub const ALL: [BinaryOp; 21] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];

    /// The op named `name` in the text form (the inverse of [`BinaryOp::name`]).
    pub fn from_name(name: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether the result is boolean.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// Whether an integer operand outside the other's integer range is
    /// taken by its value (comparisons, maximum, minimum: computed in
    /// int64, as numpy and torch do), not wrapped into the range.
    pub fn by_value(self) -> bool {
        self.is_comparison() || matches!(self, BinaryOp::Max | BinaryOp::Min)
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
                | BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor
        )
    }

    /// Whether this is a bitwise op (`&`, `|`, `^`, `<<`, `>>`).
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::Shl | BinaryOp::Shr
        )
    }

    /// The bitwise ops on 64-bit integers; a shift count outside 0..64
    /// gives 0 (`<<`) or the sign (`>>`). Narrower dtypes wrap the result
    /// to their width, which gives the same bits as PTX's clamped shifts.
    pub fn eval_int(self, a: i64, b: i64) -> Option<i64> {
        let count = u32::try_from(b).ok().filter(|n| *n < 64);
        Some(match self {
            BinaryOp::BitAnd => a & b,
            BinaryOp::BitOr => a | b,
            BinaryOp::BitXor => a ^ b,
            BinaryOp::Shl => count.map_or(0, |n| a << n),
            BinaryOp::Shr => a >> count.unwrap_or(63),
            _ => return None,
        })
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
            // On the integers the f64s hold (exact below 2^53).
            BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor
            | BinaryOp::Shl
            | BinaryOp::Shr => self
                .eval_int(a as i64, b as i64)
                .map_or(f64::NAN, |v| v as f64),
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
    /// Π.
    Prod,
}

impl ReduceKind {
    /// Every reduction.
    pub const ALL: [ReduceKind; 5] = [
        ReduceKind::Sum,
        ReduceKind::Max,
        ReduceKind::Min,
        ReduceKind::Mean,
        ReduceKind::Prod,
    ];

    /// The reduction named `name` (`sum`, `max`, `min`, `mean`, `prod`: the text
    /// form and the language's reduction functions alike).
    pub fn from_name(name: &str) -> Option<ReduceKind> {
        ReduceKind::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
            ReduceKind::Mean => "mean",
            ReduceKind::Prod => "prod",
        }
    }
}

/// Inclusive scans along one axis: element `i` combines elements `0..=i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanKind {
    /// Running sums (`cumsum`).
    Sum,
    /// Running products (`cumprod`).
    Prod,
    /// Running maxima (`cummax`; NaN from the first NaN on).
    Max,
    /// Running minima (`cummin`).
    Min,
    /// Running log-sum-exp (`logcumsumexp`), each step `log(e^a + e^b)`
    /// shifted by the larger.
    LogSumExp,
}

impl ScanKind {
    /// Every scan.
    pub const ALL: [ScanKind; 5] = [
        ScanKind::Sum,
        ScanKind::Prod,
        ScanKind::Max,
        ScanKind::Min,
        ScanKind::LogSumExp,
    ];

    /// The scan a library function names (`cumsum`, `cumprod`, `cummax`,
    /// `cummin`, `logcumsumexp`: the text form uses the same names).
    pub fn from_name(name: &str) -> Option<ScanKind> {
        ScanKind::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The name in the text form and the library.
    pub fn name(self) -> &'static str {
        match self {
            ScanKind::Sum => "cumsum",
            ScanKind::Prod => "cumprod",
            ScanKind::Max => "cummax",
            ScanKind::Min => "cummin",
            ScanKind::LogSumExp => "logcumsumexp",
        }
    }

    /// The operation that combines two running values, where one is
    /// (`None` for log-sum-exp, a formula of several).
    pub fn binary(self) -> Option<BinaryOp> {
        match self {
            ScanKind::Sum => Some(BinaryOp::Add),
            ScanKind::Prod => Some(BinaryOp::Mul),
            ScanKind::Max => Some(BinaryOp::Max),
            ScanKind::Min => Some(BinaryOp::Min),
            ScanKind::LogSumExp => None,
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
