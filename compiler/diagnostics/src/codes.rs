//! The registry of diagnostic codes: every code the compiler can emit, with
//! a one-line title and the explanation that `tsrc explain CODE` prints.
//!
//! Codes are stable: once released, a code keeps its meaning. Ranges:
//! E00xx lexing and parsing, E01xx names and calls, E02xx types and shapes,
//! E03xx schedules, E04xx meshes and sharding, E05xx numerics, E06xx kernels
//! and host code, E07xx lowering and running, E08xx code generation.
//! Warnings use the same space (`W` prefix).

use std::fmt;

/// A stable diagnostic code such as `E0201`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Code(pub &'static str);

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// What `tsrc explain` knows about one code.
#[derive(Clone, Copy, Debug)]
pub struct CodeInfo {
    /// The code.
    pub code: Code,
    /// A one-line title.
    pub title: &'static str,
    /// A paragraph or two: what it means and how to fix it.
    pub explanation: &'static str,
}

macro_rules! codes {
    ($( $name:ident: $title:literal => $explain:literal; )*) => {
        $(
            #[doc = $title]
            pub const $name: Code = Code(stringify!($name));
        )*
        /// Every code, in numeric order.
        pub const ALL: &[CodeInfo] = &[
            $( CodeInfo { code: $name, title: $title, explanation: $explain }, )*
        ];
    };
}

/// Looks up a code by its spelling (case-insensitive, `E201` = `E0201`).
pub fn lookup(code: &str) -> Option<&'static CodeInfo> {
    let code = code.trim().to_ascii_uppercase();
    let normalized = match code.split_at_checked(1) {
        Some((prefix, digits))
            if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) =>
        {
            format!("{prefix}{:0>4}", digits)
        }
        _ => code,
    };
    ALL.iter().find(|info| info.code.0 == normalized)
}

codes! {
    E0001: "file is not valid UTF-8" =>
"A .tsr file must be UTF-8 text. The byte at the marked position does not
start a valid UTF-8 sequence. Re-save the file as UTF-8, or remove the
binary data.";

    E0002: "unexpected character" =>
"The marked characters cannot start any token: they are not part of an
identifier, number, string, operator or comment. Remove them. Tessera
identifiers are ASCII letters, digits and `_`; non-ASCII text may appear in
comments and strings only.";

    E0003: "unterminated string literal" =>
"A string literal opened with `\"` has no closing `\"` on the same line.
Strings cannot span lines; use `\\n` for a newline.";

    E0004: "unterminated block comment" =>
"A `/*` comment has no matching `*/` before the end of the file. Block
comments nest, so every `/*` inside one needs its own `*/`.";

    E0005: "integer literal is too large" =>
"Integer literals must fit in 64 bits (at most 18446744073709551615).";

    E0006: "float literal is out of range" =>
"A float literal must be a finite 64-bit float; `1e999` is not.";

    E0007: "unknown escape in string literal" =>
"Strings accept the escapes \\n, \\t, \\r, \\0, \\\\ and \\\". Any other
backslash sequence is an error.";

    E0008: "nesting too deep" =>
"Brackets nested more than 256 levels, or one expression more than 512
operations deep, are rejected so that the compiler cannot run out of stack.
Break the expression into several `let` bindings.";

    E0009: "file too large" =>
"Source files are limited to 256 MiB.";

    E0010: "unexpected token" =>
"The parser found a token where the grammar does not allow one. The message
lists what would have been accepted at that point. A missing `;` or a missing
closing bracket on the line before is a common cause.";

    E0011: "unexpected end of file" =>
"The file ended in the middle of an item: usually an unclosed `{`, `(` or
`[`, or a missing `;`.";

    E0100: "unresolved name" =>
"The name is not a local variable, parameter, dimension, constant, mesh axis,
op, kernel or function in scope. Check the spelling. Standard ops outside
the prelude need an import: `import std.nn;` brings softmax, layernorm, gelu
and the other neural-network ops, `import std.dist;` the collectives.";

    E0101: "duplicate definition" =>
"Two items, two parameters, or two mesh axes have the same name in one scope.
Rename one of them.";

    E0102: "unknown module" =>
"`import` names a module that does not exist. The standard library has the
modules `std.core` (always imported), `std.nn`, `std.dist`, `std.tile` and
`std.host`.";

    E0103: "not callable" =>
"The called name is not an op, kernel, fn or builtin: it is a variable,
dimension or mesh. Only functions can be called.";

    E0104: "wrong number of arguments" =>
"The call passes more positional arguments than the callee has parameters,
or leaves a parameter without a default unpassed. The help shows the
callee's signature. A kernel is called with its inputs only and returns
its `out` parameters (`let c = vec_add(a, b);`): passing them too, to be
written into as in Triton, is this error.";

    E0105: "unknown named argument" =>
"A `name = value` argument does not match any parameter of the callee.";

    E0106: "argument given twice" =>
"A parameter was passed both positionally and by name, or twice by name.";

    E0107: "recursive op" =>
"Ops and kernels cannot call themselves, directly or through others: ops
are inlined into a dataflow graph, which must be finite, and kernels are
launched by their callers. (Host functions may recurse, up to a depth
limit checked when they run.)";

    E0108: "assignment to an immutable variable" =>
"Variables are immutable unless declared with `let mut`. Ops are pure and
cannot assign at all; bind a new name with `let` instead.";

    E0109: "misplaced item or statement" =>
"The construct is not allowed where it was written: for example `out` or
`inout` parameters outside kernels, an `inout` scalar (only a tensor is
updated in place), `return` with a value in a kernel, a `numerics`
setting after other statements of an op, a generic parameter with a
default on an op, or a default on a kernel's input or `inout` tensor (the
caller passes it; an `out` tensor may declare its start value, `out m:
tensor<N, fp32> = -inf`). Loops and branches have their places too: ops
neither loop nor branch (tensor operations and `where` say it), `break`
and `continue` belong to loops of host code, and `while` is for host
code (a kernel's loops have trip counts known at launch: loop `for i in
0..LIMIT` and guard the body with `if`).";

    E0110: "missing return" =>
"An op or a function with a declared result type must end with a `return`
of that value on every path.";

    E0111: "dtype arguments not accepted" =>
"Only builtins that create tensors (`zeros<fp32>`, `randn<bf16>`, ...) take a
dtype argument in angle brackets.";

    E0200: "dtype mismatch" =>
"The operands have different element types and the numerics policy declares
no promotion between them. Tessera never converts implicitly, except from
a storage dtype to the accumulation dtype of the active precision mode
(bf16/fp16 to fp32 under `standard`). Convert explicitly with `x as fp32`.";

    E0201: "shape mismatch" =>
"Two dimensions that must be equal are not: the inner dimensions of a matmul,
the dimensions of an elementwise operation, or an argument and the
parameter it binds. Symbolic dimensions (`M`, `K`) are bound on first use and
must agree afterwards. A size of an op's result or a kernel's output that no
input binds is an error too: each size comes from the arguments.";

    E0202: "rank mismatch" =>
"The tensor has a different number of dimensions than required.";

    E0203: "shapes cannot be broadcast" =>
"Elementwise operators broadcast like NumPy: shapes are aligned at the
trailing dimension and each pair must be equal, or one of them 1 or absent.";

    E0204: "result type mismatch" =>
"The value returned does not have the declared result type (dtype, shape
or shard spec). A shape the checker can write is compared at check time
(`x[:, 0:D/2]` is `tensor<T, D/2>`); one it cannot (`x[:, D/2:D]`) is
compared at the sizes of each call, before anything runs. An op with
several results returns them together, one per declared type: `return
(a, b);` for `-> (T, U)`.";

    E0205: "expected a tensor" =>
"The operation needs a tensor operand, but got a scalar attribute, a
string, a mesh axis or nothing at all.";

    E0206: "axis out of range" =>
"An `axis` argument must lie in -rank..rank for the tensor it applies to;
`permute`'s `dims` must name each axis once; a list of axes
(`sum(x, axis = [0, 1])`) must name distinct axes, in ops and host code (a
kernel nests its reductions); `topk`'s `k` must be at least 1 and not
exceed the axis' extent.";

    E0207: "tensor too large" =>
"A tensor's element count must fit in 2^48 and every dimension must be at
least 1. Absurd shapes are rejected before any memory is planned. A
dimension expression must be a size: no quotient by 0 (`D / 0`), no
difference that is negative (`3 - 4`), no pack inside it (`..S + 1`), and
a divisor that is a literal, a constant of the kernel (`N / BLOCK`,
`cdiv(N, BLOCK)`) or an op's `int` attribute (`H / p`), not a size bound at
the call (`N / M`). A reshape infers at most one size (`-1`); its other
sizes are positive.";

    E0208: "expected a compile-time constant" =>
"Attributes (`int`, `float` and `bool` parameters of ops, such as `axis` or
`eps`), kernel constants, tile sizes and mesh sizes must be known at compile
time: literals, dimensions, constants, or arithmetic on them. So must the
length of `arange` in an op, and a reduction's `keepdims`, which decides its
result's rank (an op's `bool` attribute is known only at each call, so it may
be passed on as `causal` or `largest`, not as `keepdims`). (An `if` in a
kernel may test a run-time scalar: a program id, a scalar parameter, a
loaded or reduced value.) A host loop's `step` is a compile-time integer; a
kernel loop's may be an integer known only at run time (`step
num_programs(0)`), which the run checks is positive, but not a float. The
default of a kernel's scalar parameter (`s: fp32 = 1.0`) and the start
value of an `out` tensor (`= -inf`) are literals.";

    E0209: "invalid cast" =>
"`as` converts between numeric dtypes; the operand must be a tensor or a
number.";

    E0210: "invalid index" =>
"An index expression has more indices than the tensor has dimensions, an
index out of bounds of a known dimension, an index that is not an integer
(an index tensor must hold integers: `table[ids]`), or a slice step that is
not a positive integer constant (`x[:, 0::2]`).";

    E0211: "type mismatch" =>
"The value has the wrong kind of type for this place: a boolean condition,
an integer bound, a string, a list of integers for a shape. A call with
several results (`split`, `chunk`, an op declared `-> (T, U)`) is
written only as the value of
`let (a, b, ...) = ...`, with one name per part (`_` drops one), and that
`let` takes only such a call (or `topk` or `sort`, whose parts are their
values and indices). In a kernel, `rand(seed, offsets)` takes one integer seed
(a constant, a scalar parameter, `program_id`) and a tile of integer
counters. `(a, b)` is only returned, by an op with several results.";

    E0212: "unknown field" =>
"Only `.T` (transpose of the last two dimensions) is a field of tensors.";

    E0213: "unknown type" =>
"A name in type position must be a dtype (`fp32`, `bf16`, ...), `tensor<...>`,
`int`, `float`, `str`, or a dtype parameter of the enclosing generic op.
Several results `(T, U)` are an op's result type only, not a parameter's
type or a fn's result.";

    E0214: "operator not defined for these operands" =>
"Arithmetic needs numeric operands, `&&`/`||`/`!` need booleans, and `@`
needs tensors of rank at least 1. `&`, `|` and `^` take two integers or two
booleans, `<<` and `>>` two integers, `~` an integer or a boolean (`^` is
exclusive or: a power is
`pow(x, 2.0)`). (`%` takes integers and floats alike: on floats it is C's
`fmod`.)";

    E0215: "assertion failed" =>
"An `assert(cond, \"message\")` in an op is checked when the op compiles,
at the sizes and attributes of each call: the message says what the call
got wrong (the stdlib's ops assert what PyTorch checks: `max_pool1d`'s
window must fit the padded input, `pixel_shuffle`'s channels must split
into r² groups). Its condition is made of sizes, attributes and
constants; a condition on a tensor's values is E0211 in an op (check it
in host code, where `assert` runs when the program does and fails the
run with E0701).";

    E0300: "schedule for an unknown op" =>
"A `schedule` block must name an op or kernel defined in the same file.";

    E0301: "unknown schedule knob" =>
"The knobs are: tile, warps, pipeline_stages, async_copy, use_shared_memory,
vectorize, tensor_cores, occupancy and autotune (plus the seed spellings
use_tensor_cores and occupancy_target). `tsrc explain E0301` lists this;
hover on a knob in the editor shows its documentation.";

    E0302: "schedule value out of range" =>
"A knob's value is outside what the hardware supports: warps must be 1, 2,
4, 8, 16 or 32; pipeline_stages 1 to 8; vectorize 1, 2, 4, 8 or 16; tile
dimensions 1 to 512; occupancy warps 1 to the architecture's warps per SM.";

    E0303: "tile not aligned to tensor cores" =>
"With tensor cores enabled, bm, bn and bk must be multiples of 16: the MMA
instructions work on 16x8x16 fragments. Round the tile up, or disable tensor
cores with `tensor_cores(false)`.";

    E0304: "shared memory exceeds the architecture's limit" =>
"The schedule's shared-memory footprint (pipeline stages x (bm x bk + bk x bn)
elements, plus padding) exceeds what one thread block may use on the target
architecture (sm_80: 163 KiB, sm_86/sm_89: 99 KiB, sm_90: 227 KiB). Reduce
the tile or the number of pipeline stages.";

    E0305: "unknown architecture" =>
"Architectures are written `sm_70`, `sm_75`, `sm_80`, `sm_86`, `sm_89`,
`sm_90`, `sm_90a`, `sm_100`, `sm_120`.";

    E0306: "duplicate schedule" =>
"An op has two schedules for the same architecture (or two without `on`).";

    E0307: "malformed knob arguments" =>
"The knob takes different arguments: for example `tile(bm = 128, bn = 128,
bk = 64)` or `tile(128, 128, 64)`, `async_copy` or `async_copy(true)`,
`autotune(bm in [64, 128])`.";

    E0308: "invalid autotune space" =>
"Autotune spaces are lists of candidate values for tunable knobs: bm, bn,
bk, warps, stages, vectorize, warp_specialize (1 or 0). Each candidate must
be legal on its own.";

    E0309: "contradictory occupancy bounds" =>
"`occupancy(min_warps = a, max_warps = b)` needs a <= b, and the block's warps
must fit between them.";

    E0310: "too many registers per thread" =>
"The estimated registers per thread of a kernel (the accumulator tile spread
over the block's threads, the operand fragments and addressing) exceed the
255 a thread may hold, so the kernel would spill to local memory. Spread the
tile over more warps (`warps(8)`) or shrink it (`tile(bm = 64, ...)`).";

    W0010: "`//` comment inside an expression" =>
"A `//` comment starts in the middle of an expression that goes on after the
line: the rest of the line is skipped, so `(slot // 4` then `+ 100)` on the
next line is `slot + 100`. Python's floor division `//` is not an operator
in Tessera: integer `/` truncates toward zero. Move the comment, or write
the division with `/`.";

    W0211: "a method-style reduction without an axis reduces the last axis" =>
"`x.sum()`, `x.mean()`, `x.max()` and the other reductions written as
methods without an axis reduce the last axis only (`axis: int = -1`, as in
the function form `sum(x)`), while torch's and numpy's reduce every
element. On a tensor of rank 2 or more that is rarely what ported code
means: write the axes (`x.sum(axis = [0, 1])` for the total, or
`x.sum(axis = -1)` to keep the last-axis reduction and silence this).";

    W0301: "shared memory above the recommended budget" =>
"The schedule fits the hardware but uses more shared memory per block than
the performance guide recommends (96 KiB on Hopper, per table A.2), which
limits the number of resident blocks and so the occupancy.";

    W0302: "low estimated occupancy" =>
"The estimated occupancy of this schedule is under 50% of the warps an SM can
hold. That is fine for kernels with high arithmetic intensity; otherwise
shrink the tile or the pipeline.";

    W0303: "the kernel spills registers (ptxas)" =>
"ptxas, assembling the kernel (`tsrc build --emit ptx --ptxas`), reports that
it needs more registers than a thread may hold (or than the schedule's
`occupancy` leaves it) and keeps some values in local memory: every spill is
a slow memory access in the main loop. The scheduler's register estimate
did not foresee it. Shrink the tile (`tile(bm = 64, ...)`), use fewer
pipeline stages, spread the tile over more warps, relax `occupancy`, or let
`tsrc tune` find a configuration that does not spill.";

    W0305: "tensor cores asked for products that cannot take them" =>
"A schedule sets `tensor_cores` for an op none of whose kernels can run on
tensor cores: its matrix products have IEEE fp32 (or fp64) operands, which
no tensor-core instruction reads, so they run on the CUDA cores whatever
the schedule says (or the op has no matrix product at all). To use tensor
cores, round fp32 operands to tf32 with `numerics matmul = tf32;` (about 10
bits of mantissa), or compute the product in bf16/fp16 with fp32
accumulation; otherwise remove the knob.";

    W0304: "the knob has no effect on this architecture" =>
"`warp_specialize` chooses whether a kernel may get a producer warpgroup that
issues its TMA copies while the kernel's own warps compute; only sm_90a
kernels are built that way. In a schedule for an older target (or sm_100,
which takes the sm_90-compatible path) the knob would change nothing. Move
it to a schedule `on sm_90a` (or `on sm_90`, which applies to sm_90a too).";

    E0400: "unknown mesh axis" =>
"A shard spec or collective names an axis that no mesh declares.";

    E0401: "shard spec rank mismatch" =>
"A shard spec has one entry per tensor dimension: `_` for replicated, or a
mesh axis. Its length must equal the tensor's rank.";

    E0402: "mesh axis used twice" =>
"A mesh axis can split at most one dimension of a tensor.";

    E0403: "partial sum needs a collective" =>
"A matmul whose contracted dimension is sharded over a mesh axis leaves each
device with a partial sum. Before the value is returned (or used by a
non-linear op), it must be combined: `all_reduce(x, axis)` to replicate the
sum, or `reduce_scatter(x, axis, dim)` to shard it.";

    E0404: "conflicting shard specs" =>
"An elementwise operation combines tensors split differently along the same
dimension. Reshard one operand with `all_gather` or `all_to_all` first.";

    E0405: "contraction over a half-sharded dimension" =>
"In `a @ b`, the contracted dimension is sharded in one operand but not the
other (or over different axes). Gather the sharded operand first
(`all_gather(x, axis)`), or shard both the same way.";

    E0406: "non-linear op on a partial sum" =>
"Only linear operations may act on a partial sum. Apply the collective
(`all_reduce`) before the non-linear op.";

    E0407: "collective over an axis the tensor does not use" =>
"The collective names a mesh axis over which the tensor is neither partial
nor sharded, so it would do nothing or something unintended.";

    E0408: "invalid mesh" =>
"A mesh needs at least one axis, every axis a size of at least 1, and the
product of the sizes must stay below 2^20 devices.";

    E0409: "ambiguous mesh axis" =>
"Two meshes declare an axis of this name. Qualify it: `node.tp`.";

    E0410: "dimension not divisible by its mesh axis" =>
"A dimension split over a mesh axis is divided evenly among the axis's
devices, so its size must be a multiple of the axis size: a [3, 256]
tensor cannot be split over `dp = 2` along its first dimension. Pad the
tensor, choose another axis, or replicate the dimension (`_`). Sizes known
only when the program runs (an `--entry` input) are checked then, before
anything runs.";

    E0500: "unknown numerics setting" =>
"Numerics settings are policies (`fast`, `deterministic`, `kahan_sum`),
precision modes (`safe`, `standard`, `aggressive`, `deterministic`), or keyed
settings `policy = ...`, `precision = ...`, `storage = dtype`,
`accumulate = dtype`, `matmul = ieee|tf32`.";

    E0501: "precision mode does not allow this dtype" =>
"Each precision mode declares its storage dtypes (safe: fp32/fp64;
standard: bf16/fp16/fp32; aggressive: fp8/bf16/fp16/fp32; deterministic:
any). A tensor of another dtype needs a different mode.";

    E0502: "numerics policy does not apply" =>
"The policy cannot apply to these values: for example kahan_sum needs float
accumulation, and integer accumulation is always exact. A float
`atomic_add` in a kernel sums in an order that varies from run to run on a
GPU, so `deterministic` and `kahan_sum` reject it: accumulate integers, or
sum in an op.";

    E0503: "conflicting numerics settings" =>
"The same setting was given twice with different values, or settings
contradict each other (an accumulation dtype narrower than storage).";

    E0504: "misplaced numerics setting" =>
"Inside an op, `numerics ...;` must come before any other statement; it
applies to the whole op.";

    E0600: "tile-level operation outside a kernel" =>
"program_id, load, store, arange, dot and the other operations of
`std.tile` exist only inside `kernel` bodies.";

    E0601: "host operation outside host code" =>
"randn, print, load_npy and the other operations of `std.host` run on the
host, in `fn` bodies; ops and kernels are device code. (`zeros`, `ones`
and `full` of a shape known when the op compiles are allowed in ops, and
kernels have their own of tile shapes.)";

    E0602: "store to an input" =>
"Kernels may store only to parameters marked `out`.";

    E0603: "kernel without outputs" =>
"A kernel must have at least one `out` parameter, or it computes nothing.";

    E0604: "tile shape is not constant" =>
"Tile shapes inside kernels (arange sizes, zeros shapes) must be compile-time
constants, typically kernel constants such as `BLOCK`, and a tile holds at
most 65,536 elements (`arange(0, 131072)`, or `[512, 512]` from a broadcast,
is too large): every backend holds a program's tiles at once, the GPU in
registers. Use a smaller block and loop over the rest.";

    E0605: "invalid grid" =>
"A kernel's grid has one to three integer expressions, computed before the
launch from sizes alone: integers, the kernel's constants and its
dimensions, with `+`, `-`, `*`, `/`, `%`, `cdiv`, `min` and `max`, e.g.
`grid(cdiv(N, BLOCK))` or `grid(cdiv(L - K + 1, BL))`. A scalar parameter
or a program id is not a size.";

    E0606: "fn main takes parameters" =>
"The entry point `fn main` takes no parameters: nothing could pass them. A
program makes or reads its inputs inside `main` (`randn`, `load_npy`), and a
single op runs on `.npy` files with `tsrc run FILE --entry OP --input
NAME=PATH.npy`.";

    E0700: "cannot lower to a graph" =>
"An op is compiled to a dataflow graph: every call is inlined and its
attributes and sizes are evaluated when the op compiles, at the sizes of
the call (or of `--entry`'s inputs). What a graph cannot express is
rejected: values that must be known when the op compiles but are not
(the length of `arange`, `reshape`'s sizes, a slice's step or bounds, an
index, a `rand` shape or seed, the number of `histc` bins, a dropout
probability), a reshape whose element counts agree only at some sizes,
an empty slice used as a tensor (only `concat` takes one), a kernel
tile that a call's sizes make larger than 65,536 elements, and ops that
call each other more deeply than the inliner goes. Where the size
decides, run at concrete sizes (`fn main`, `--entry`, `--dim`); where the
data decides, write a `kernel` (run-time loops and indices) or host
code. A message saying the checker accepted the expression is a compiler
bug: please report it.";

    E0701: "error while running" =>
"The program compiled, but running it failed: an index or slice outside a
tensor, integer overflow or division by zero in host code (or integer
division by zero in a kernel), an input of the
wrong shape, or an operation the selected backend cannot run. The message
names the value and the expected shape or range.";
    E0702: "host code cannot be compiled" =>
"Host code (`fn main` and the fns it calls) is compiled to machine code
with Cranelift. Every value must have one kind for its whole life: a
variable that holds an int cannot later hold a tensor, host fn parameters
need declared types (tensor, int, float, bool, str or a list), and mesh
axes have no value outside ops. The message names the construct.";
    E0800: "not supported by the PTX backend" =>
"The kernel compiled to Tile IR, but the NVIDIA backend cannot generate
code for one of its operations (for example a transcendental function in
fp64), or not for this architecture (fp8 tensors need sm_89 or newer: the
conversions are Ada and Hopper instructions), or the lowered kernel needs
more shared memory than the architecture gives a block (its staged tiles
plus the values its threads pass to each other, which the schedule's
estimate does not count; a kernel is first retried without its software
pipeline): use a smaller tile. The message names the kernel and the
operation. The CPU backend runs every program: use `--backend cpu`.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_sorted_within_their_prefix() {
        let mut seen = std::collections::HashSet::new();
        for info in ALL {
            assert!(seen.insert(info.code.0), "duplicate {}", info.code);
            assert_eq!(info.code.0.len(), 5);
        }
    }

    #[test]
    fn lookup_normalizes() {
        assert_eq!(lookup("e201").unwrap().code, E0201);
        assert_eq!(lookup("E0201").unwrap().code, E0201);
        assert!(lookup("E9999").is_none());
        assert!(lookup("").is_none());
    }
}
