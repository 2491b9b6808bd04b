//! Lowering Tile IR to Target IR: from one block program on tiles to the
//! code each thread runs.
//!
//! Every tile extent is fixed at this point: a kernel is specialised for
//! the sizes its dimensions bind (as a JIT does), so that a tile is a fixed
//! set of registers. A tile value is one of:
//!
//! - **uniform**: a scalar every thread holds in one register (program ids,
//!   sizes, loop counters);
//! - **lazy**: a pure function of coordinates (index arithmetic, masks,
//!   constants, loads of read-only parameters and elementwise math on
//!   those), evaluated where it is used, at the coordinates needed, so that
//!   broadcasting costs nothing;
//! - **distributed**: materialised in registers, element `e` of the
//!   row-major tile held by thread `e % threads` in slot `e / threads`;
//! - **shared**: stored in shared memory, readable at any coordinate (staged
//!   tiles, and distributed tiles read at other threads' coordinates).
//!
//! Reductions and `dot` read their operands at arbitrary coordinates (from
//! shared memory or lazily) and write distributed results; every result
//! element is combined in a fixed order, so results are bitwise
//! reproducible.

pub(crate) mod builder;
mod elem;
mod math64;
mod mma;
mod ops;
mod pipeline;
mod reduce;
mod smem;
mod sort;
mod stage;
mod tma;
mod vector;
mod warpspec;
mod wgmma;

use crate::ir::*;
use builder::FnBuilder;
use rustc_hash::FxHashMap as HashMap;
use tessera_core::Dtype;
use tessera_core::{Arch, Bindings};
use tessera_tile::facts::Facts;
use tessera_tile::{Access, Inst as TInst, Kernel, TOp, TileProgram, Value};

/// Why a kernel could not be lowered.
#[derive(Clone, Debug, PartialEq)]
pub struct LowerError {
    /// The kernel.
    pub kernel: String,
    /// What is missing or wrong.
    pub message: String,
    /// The source expression of the Tile IR instruction that failed (empty
    /// when the kernel as a whole failed, or the instruction has none).
    pub span: tessera_tile::Span,
}

/// A kernel's lowering failure: the message and the source expression of
/// the innermost instruction that failed (see [`LowerError`]).
struct Failure {
    message: String,
    span: tessera_tile::Span,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            span: Default::default(),
        }
    }
}

type R<T> = Result<T, String>;
use mma::LdmKey;

/// How a tile value is held (see the module docs).
#[derive(Clone, Debug)]
enum Val {
    /// One register, the same in every thread.
    Uniform(Reg),
    /// Recomputed from its defining operation where used.
    Lazy,
    /// Registers per slot, in a layout.
    Dist(Vec<Reg>, Layout),
    /// In shared memory at this byte offset, in the value's register
    /// type: row-major without padding, or for staged tiles as their
    /// [`smem::Stored`] layout says.
    Shared(u64),
}

/// How a distributed tile's elements map to threads and slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Layout {
    /// Element `e` (row-major) in thread `e % threads`, slot `e / threads`.
    Flat,
    /// The accumulator fragments of `mma.m16n8`: a 2-d `[M, N]` tile split
    /// over a `wm × wn` grid of warps, each warp holding `M/wm × N/wn` as
    /// 16×8 pieces of four registers (see [`Lower::slot_coords`]).
    Mma {
        /// Warps along M.
        wm: i64,
        /// Warps along N.
        wn: i64,
    },
    /// The rows of an `Mma { wm, wn: 1 }` layout: a `[M]` or `[M, 1]` tile
    /// of per-row values of an `[M, N]` accumulator tile (its row maxima,
    /// say), each thread holding the rows its fragments cover: slot
    /// `2i + h` is row `16i + l/4 + 8h` of its warp's rows, the four lanes
    /// of a quad holding the same values (see [`Lower::row_slot`]).
    Rows {
        /// Warps along M.
        wm: i64,
    },
    /// `v` consecutive elements per thread: slot `s` of thread `t` is
    /// element `(s / v)·v·threads + t·v + s % v` (row-major), so that the
    /// `v` slots of a group are adjacent in a row (see `vector.rs`).
    Vec {
        /// Elements per thread and group.
        v: i64,
    },
}

/// A coordinate along one axis: a constant or an s64 register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum C {
    K(i64),
    R(Reg),
}

/// The register type of a tile dtype: narrow floats are held widened to
/// f32 (always exactly representable in their dtype).
pub(crate) fn reg_ty(d: Dtype) -> Ty {
    match d {
        Dtype::Fp64 => Ty::F64,
        Dtype::Fp32 | Dtype::Tf32 | Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => {
            Ty::F32
        }
        Dtype::Int64 => Ty::S64,
        Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Uint8 => Ty::S32,
        Dtype::Bool => Ty::Pred,
    }
}

/// The PTX format of an fp8 dtype.
pub(crate) fn f8_fmt(d: Dtype) -> Option<Fmt> {
    match d {
        Dtype::Fp8E4m3 => Some(Fmt::E4m3),
        Dtype::Fp8E5m2 => Some(Fmt::E5m2),
        _ => None,
    }
}

/// Points every kernel of `m` at its source: `spans[i]` is where function
/// `i` comes from (the Tile IR kernel's span), and `locate` turns a span
/// into a file name and a 1-based line and column. The files become the
/// module's `.file` entries; each kernel starts with a `.loc` at itself,
/// and each record of the code's source expression ([`Inst::Source`])
/// becomes a `.loc` where it moves to another position (an expression
/// `locate` cannot place counts as the kernel).
pub fn locate(
    m: &mut Module,
    spans: &[tessera_tile::Span],
    locate: &dyn Fn(tessera_tile::Span) -> Option<(String, u32, u32)>,
) {
    let files = &mut m.files;
    let mut loc = |span: tessera_tile::Span| {
        let (name, line, column) = locate(span)?;
        let file = match files.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                files.push(name);
                files.len() - 1
            }
        };
        Some(Inst::Loc {
            file: file as u32 + 1,
            line,
            column,
        })
    };
    for (f, span) in m.functions.iter_mut().zip(spans) {
        let own = loc(*span);
        let mut body = Vec::with_capacity(f.body.len() + 1);
        body.extend(own.clone());
        let mut last = own.clone();
        for i in std::mem::take(&mut f.body) {
            let Inst::Source(s) = i else {
                body.push(i);
                continue;
            };
            let at = if s == tessera_tile::Span::default() {
                own.clone()
            } else {
                loc(s).or_else(|| own.clone())
            };
            if at.is_some() && at != last {
                body.extend(at.clone());
                last = at;
            }
        }
        f.body = body;
    }
}

/// Lowers every kernel of `p` for `arch` with its dimensions bound by
/// `bindings`.
pub fn lower_program(
    p: &TileProgram,
    arch: &Arch,
    bindings: &Bindings,
) -> Result<Module, LowerError> {
    let functions = p
        .kernels
        .iter()
        .map(|k| {
            // Masks and guards the bound sizes decide fold away first.
            let (k, facts) = tessera_tile::specialise(k, bindings);
            lower_fitting(&k, &facts, bindings, arch).map_err(|e| LowerError {
                kernel: k.name.clone(),
                message: e.message,
                span: e.span,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // fp8 tensor-core instructions are PTX ISA 8.4, the tensor-map proxy
    // fence 8.3; everything else 8.0, or the oldest version that knows the
    // target.
    let uses = |p: &dyn Fn(&Inst) -> bool| functions.iter().flat_map(|f| &f.body).any(p);
    let isa = if uses(&|i| matches!(i, Inst::Mma { fmt, .. } if fmt[0].is_fp8())) {
        (8, 4)
    } else if uses(&|i| matches!(i, Inst::FenceTensorMap { .. })) {
        (8, 3)
    } else {
        (8, 0)
    };
    Ok(Module {
        arch: arch.name.to_owned(),
        version: isa.max(arch.ptx_isa),
        files: Vec::new(),
        functions,
    })
}

/// Lowers kernel `k` for `arch` within its shared memory per block: with
/// its software pipelines, or without them when only their extra buffers
/// overflow.
fn lower_fitting(
    k: &Kernel,
    facts: &Facts,
    bindings: &Bindings,
    arch: &Arch,
) -> Result<Function, Failure> {
    // Warp-specialised where the kernel qualifies and fits (see
    // `warpspec.rs`); otherwise as it is.
    if arch.has_wgmma && k.warp_specialize && warpspec::may_specialise(k) {
        if let Ok(f) = lower_kernel(k, facts, bindings, arch, Mode::Specialised) {
            if arch.fits_smem(f.shared_bytes) {
                return Ok(f);
            }
        }
    }
    let mut f = lower_kernel(k, facts, bindings, arch, Mode::Pipelined)?;
    if !arch.fits_smem(f.shared_bytes) {
        f = lower_kernel(k, facts, bindings, arch, Mode::Plain)?;
    }
    if !arch.fits_smem(f.shared_bytes) {
        return Err(format!(
            "needs {} KiB of shared memory ({} bytes: staged tiles and values passed \
             between threads), even without a software pipeline; {arch} allows {} KiB \
             per block: use a smaller tile",
            f.shared_bytes.div_ceil(1024),
            f.shared_bytes,
            arch.smem_per_block >> 10
        )
        .into());
    }
    Ok(f)
}

/// The lowering state of one kernel.
struct Lower<'k> {
    k: &'k Kernel,
    b: &'k Bindings,
    f: FnBuilder,
    /// Threads per block.
    threads: i64,
    /// `%tid.x` as s64.
    tid: Reg,
    /// The parameters' base addresses (u64).
    bases: Vec<Reg>,
    /// How each value is held.
    vals: Vec<Option<Val>>,
    /// The defining operation of each lazy value.
    defs: HashMap<Value, &'k TInst>,
    /// Constant extents of each value.
    shapes: Vec<Option<Vec<i64>>>,
    /// Shared memory in use at this point of the kernel (bytes).
    shared_top: u64,
    /// The most shared memory in use at any point (the kernel's need).
    shared_peak: u64,
    /// Shared regions.
    shared: Vec<SharedDecl>,
    /// Distributed values already copied to shared memory in this scope.
    spilled: HashMap<Value, u64>,
    /// The bytes of each region [`spilled`](Self::spilled) names.
    spill_bytes: HashMap<Value, u64>,
    /// Spill regions whose values are dead, `(offset, bytes)`: the next
    /// spill that fits takes one instead of growing shared memory (every
    /// spill writes between two barriers, so the old value's readers are
    /// done first).
    free_spills: Vec<(u64, u64)>,
    /// The layouts of staged tiles in shared memory (swizzled or padded,
    /// some held column by column: see [`smem`]).
    stored: HashMap<Value, smem::Stored>,
    /// Lazily evaluated elements of the current slot.
    memo: HashMap<(Value, Vec<C>), Reg>,
    /// Elements of loads brought in 16 bytes at a time for the group of
    /// slots being stored (see `vector.rs`).
    vec_loads: HashMap<(Value, Vec<C>), Reg>,
    /// The slot being computed: its tile shape, layout, coordinates and
    /// index.
    cur: Option<(Vec<i64>, Layout, Vec<C>, usize)>,
    /// Per-thread lane registers of `mma` layouts: (row base, column base)
    /// by layout and tile shape.
    frag_bases: HashMap<(Layout, i64, i64), (Reg, Reg)>,
    /// Per-thread `ldmatrix` lane addressing (see `mma.rs`): this lane's
    /// stored row's offset, byte in the row and swizzle, by the warp's
    /// first row or column, operand side and stored layout; computed once
    /// per kernel, in the prologue.
    ldm_lanes: HashMap<LdmKey, (Reg, Reg, Option<Reg>)>,
    /// Per-thread first row and column of the warp's fragments (row base
    /// less `l / 4`, column base less `2 (l % 4)`), by layout and shape.
    frag_firsts: HashMap<(Layout, i64, i64), (Reg, Reg)>,
    /// Per-thread swizzled byte of an `ldmatrix` lane's row at an element
    /// step (`(column + 2 step) ^ swizzle`), by column register, swizzle
    /// register and step: loop-invariant, computed in the prologue.
    ldm_bytes: HashMap<(Reg, Reg, i64), Reg>,
    /// Per-thread coordinate bases of the flat layout of a shape (see
    /// [`Lower::flat_bases`]), computed once per kernel.
    flat_bases: HashMap<Vec<i64>, Option<Vec<(C, i64)>>>,
    /// Registers known to hold another register plus a constant (the
    /// coordinates of flat slots), so that addresses can carry the
    /// constant as an immediate offset.
    offsets: HashMap<Reg, (Reg, i64)>,
    /// This lane's `l / 4` and `2 (l % 4)`, once computed.
    lane: Option<(Reg, Reg)>,
    /// Where the kernel's prologue (parameters, thread index, fragment
    /// bases) ends in the body.
    prologue_end: usize,
    /// The software pipeline of the loop being lowered, if it has one.
    pipe: Option<pipeline::Pipe<'k>>,
    /// The loops being lowered, innermost last (see [`LoopScope`]).
    loops: Vec<LoopScope>,
    /// The target architecture.
    arch: Arch,
    /// The tensor maps the kernel's TMA loads read, each with the register
    /// holding its address (kernel parameters after the tensors').
    tensor_maps: Vec<(TensorMapDecl, Reg)>,
    /// Whether loops may be software-pipelined (see `pipeline.rs`).
    pipelining: bool,
    /// The warp specialisation of the kernel, if it has one (see
    /// `warpspec.rs`).
    ws: Option<warpspec::WarpSpec<'k>>,
    /// In a persistent kernel's loop over its programs: the program being
    /// run (see `warpspec.rs`).
    persist: Option<warpspec::Persist>,
    /// How many operations read each value.
    uses: Vec<u32>,
    /// The source expression of the innermost instruction that failed to
    /// lower (see [`LowerError::span`]).
    failed_at: tessera_tile::Span,
    /// Ranges and alignments of the kernel's integer values under its
    /// bindings: indices proven inside their tensor take no bounds test,
    /// accesses proven aligned no alignment test.
    facts: &'k Facts,
}

/// A loop being lowered: where code hoisted out of it goes, and what it
/// may hoist. Tensor-core operands held in shared memory from before the
/// loop (attention's Q) are not written in it, so their `ldmatrix`
/// fragments are loaded once, before the loop, rather than on every trip.
struct LoopScope {
    /// The index in the body where the loop's preheader ends (just before
    /// its first test): hoisted code goes there.
    preheader: usize,
    /// Values held in shared memory, outside any ring, when the loop began.
    invariant: std::collections::HashSet<Value>,
    /// A-operand fragments loaded in the preheader, by operand and layout:
    /// `[k step][row block]`, flattened.
    frags: HashMap<(Value, Layout), Vec<[Reg; 4]>>,
}

/// How a kernel's loops are lowered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Without software pipelines.
    Plain,
    /// Software-pipelined where their schedule asks (see `pipeline.rs`).
    Pipelined,
    /// Pipelined, with a producer warpgroup issuing the copies (see
    /// `warpspec.rs`).
    Specialised,
}

/// Lowers kernel `k` for `arch`, its loops as `mode` says.
fn lower_kernel(
    k: &Kernel,
    facts: &Facts,
    b: &Bindings,
    arch: &Arch,
    mode: Mode,
) -> Result<Function, Failure> {
    if !(arch.has_cp_async && arch.has_mma_bf16) {
        return Err(format!(
            "{arch} is older than the NVIDIA backend's oldest target, sm_80 (the code it \
             generates uses cp.async, bf16 conversions and max.NaN, which ptxas accepts \
             only from sm_80 on): compile for sm_80 or newer"
        )
        .into());
    }
    if !arch.has_mma_fp8 {
        let dtypes = k.values.iter().map(|t| t.dtype);
        let mut dtypes = dtypes.chain(k.params.iter().map(|p| p.dtype));
        if let Some(d) = dtypes.find(|d| f8_fmt(*d).is_some()) {
            return Err(format!(
                "{d} values need sm_89 or newer (the fp8 conversions are Ada and Hopper \
                 instructions): compile for sm_90"
            )
            .into());
        }
    }
    let mut f = FnBuilder::new();
    let mut params = Vec::new();
    let mut bases = Vec::new();
    for (i, p) in k.params.iter().enumerate() {
        params.push(Param {
            name: format!("{}_{}", k.name, p.name),
            ty: Ty::U64,
        });
        let r = f.reg(Ty::U64);
        f.push(Inst::LdParam { dst: r, param: i });
        bases.push(r);
    }
    let t32 = f.reg(Ty::U32);
    f.push(Inst::Special {
        dst: t32,
        reg: Special::TidX,
    });
    let tid = f.cvt(Ty::S64, t32);
    let prologue_end = f.body.len();
    let mut l = Lower {
        k,
        b,
        f,
        threads: i64::from(k.threads.max(32)),
        tid,
        bases,
        vals: vec![None; k.values.len()],
        defs: HashMap::default(),
        shapes: vec![None; k.values.len()],
        shared_top: 0,
        shared_peak: 0,
        shared: Vec::new(),
        spilled: HashMap::default(),
        spill_bytes: HashMap::default(),
        free_spills: Vec::new(),
        stored: HashMap::default(),
        pipe: None,
        loops: Vec::new(),
        memo: HashMap::default(),
        vec_loads: HashMap::default(),
        cur: None,
        frag_bases: HashMap::default(),
        ldm_lanes: HashMap::default(),
        frag_firsts: HashMap::default(),
        ldm_bytes: HashMap::default(),
        flat_bases: HashMap::default(),
        offsets: HashMap::default(),
        lane: None,
        prologue_end,
        arch: *arch,
        tensor_maps: Vec::new(),
        pipelining: mode != Mode::Plain,
        ws: (mode == Mode::Specialised).then(|| warpspec::WarpSpec::new(k.threads)),
        persist: None,
        facts,
        uses: use_counts(k),
        failed_at: Default::default(),
    };
    for (i, ty) in k.values.iter().enumerate() {
        let dims = ty
            .shape
            .iter()
            .map(|s| s.eval(b))
            .collect::<Result<Vec<_>, _>>();
        l.shapes[i] = dims.ok();
    }
    // A specialised kernel is persistent: its blocks loop over the grid,
    // so that the producer loads a program's first tiles while the
    // consumers finish the previous one's epilogue.
    let programs = match mode {
        Mode::Specialised => warpspec::programs(k, b),
        _ => None,
    };
    let body = match programs {
        Some((grid, n)) => l.each_program(grid, n, true, |l| l.block(&k.body)),
        None => l.block(&k.body),
    };
    if let Err(message) = body {
        return Err(Failure {
            message,
            span: l.failed_at,
        });
    }
    l.f.push(Inst::Ret);
    let min_blocks = k.blocks_per_sm.map_or(1, |(least, _)| least.max(1));
    let mut threads = l.threads as u32;
    if let Some(ws) = l.ws.take() {
        threads += warpspec::PRODUCER_THREADS;
        l.finish_specialised(ws, max_regs(threads, min_blocks))?;
    }
    wgmma::fence_async_reads(&mut l.f.body);
    if let Some((_, most)) = k.blocks_per_sm {
        l.reserve_for_occupancy(most, threads);
    }
    for (i, (decl, _)) in l.tensor_maps.iter().enumerate() {
        params.push(Param {
            name: decl.param_name(&k.name, i),
            ty: Ty::U64,
        });
    }
    let mut f = Function {
        name: k.name.clone(),
        params,
        threads,
        min_blocks,
        shared_bytes: l.shared_peak,
        local_bytes: 0,
        persistent: programs.map(|(_, n)| n as u64),
        shared: l.shared,
        regs: l.f.regs,
        body: l.f.body,
    };
    crate::opt::optimize(&mut f);
    // After the clean-up: its branches would cut the basic blocks in which
    // the clean-up merges equal computations.
    crate::expand::expand(&mut f);
    Ok(f)
}

impl<'k> Lower<'k> {
    /// The constant extents of `v`.
    fn shape(&self, v: Value) -> R<Vec<i64>> {
        self.shapes[v.index()]
            .clone()
            .ok_or_else(|| format!("the extents of {v} are not bound"))
    }

    /// The number of elements of `v`.
    fn len(&self, v: Value) -> R<i64> {
        Ok(self.shape(v)?.iter().product())
    }

    /// The register type of `v`.
    fn rty(&self, v: Value) -> Ty {
        reg_ty(self.k.ty(v).dtype)
    }

    /// How `v` is held.
    fn val(&self, v: Value) -> R<Val> {
        self.vals[v.index()]
            .clone()
            .ok_or_else(|| format!("internal error: {v} used before it is lowered"))
    }

    /// Slots per thread of a tile of `n` elements in `layout`.
    fn slots(&self, n: i64, layout: Layout) -> i64 {
        match layout {
            Layout::Flat => (n + self.threads - 1) / self.threads,
            Layout::Mma { .. } => n / self.threads,
            Layout::Rows { wm } => n / wm / 8,
            Layout::Vec { v } => (n + v * self.threads - 1) / (v * self.threads) * v,
        }
    }

    /// Keeps at most `most` blocks of this kernel resident on an SM (the
    /// schedule's `occupancy(max_warps = ...)`): where more would fit, a
    /// block reserves enough shared memory that `most + 1` do not.
    fn reserve_for_occupancy(&mut self, most: u32, threads: u32) {
        let most = u64::from(most.max(1));
        let warps = u64::from(threads).div_ceil(32);
        let by_smem = self
            .arch
            .smem_per_sm
            .checked_div(self.shared_peak)
            .unwrap_or(u64::MAX);
        let fit = (self.arch.max_warps / warps.max(1))
            .min(self.arch.max_blocks)
            .min(by_smem);
        if fit <= most {
            return;
        }
        let need = (self.arch.smem_per_sm / (most + 1) + 1).div_ceil(16) * 16;
        self.shared_top = self.shared_peak;
        let top = self.shared_top.div_ceil(16) * 16;
        if need > top {
            self.alloc_shared("occupancy_reserve".into(), need - top);
        }
    }

    /// Allocates `bytes` of shared memory.
    fn alloc_shared(&mut self, name: String, bytes: u64) -> u64 {
        self.alloc_shared_aligned(name, bytes, 16)
    }

    /// Allocates `bytes` of shared memory at a multiple of `align`.
    fn alloc_shared_aligned(&mut self, name: String, bytes: u64, align: u64) -> u64 {
        let offset = self.shared_top.next_multiple_of(align.max(16));
        self.shared_top = offset + bytes;
        self.shared_peak = self.shared_peak.max(self.shared_top);
        self.shared.push(SharedDecl {
            name,
            offset,
            bytes,
        });
        offset
    }

    /// Lowers a block's instructions.
    /// Lowers the instructions of `block`. A value spilled to shared
    /// memory while lowering it frees its region after its last reader in
    /// the block (row kernels such as `topk`'s spill a mask per round).
    fn block(&mut self, block: &'k tessera_tile::Block) -> R<()> {
        let mut last = HashMap::default();
        for (i, inst) in block.insts.iter().enumerate() {
            reads(inst, &mut |v| {
                last.insert(v, i);
            });
        }
        let before: std::collections::HashSet<Value> = self.spilled.keys().copied().collect();
        for (i, inst) in block.insts.iter().enumerate() {
            self.inst(inst)?;
            let dead: Vec<Value> = self
                .spilled
                .keys()
                .filter(|v| !before.contains(v) && last.get(v).is_some_and(|&l| l <= i))
                .copied()
                .collect();
            for v in dead {
                // A value held in shared memory (`in_shared`, a stage's
                // result) keeps its region.
                let held = |off: u64| {
                    self.vals
                        .iter()
                        .any(|x| matches!(x, Some(Val::Shared(o)) if *o == off))
                };
                // Small spills (a row's scalars) stay: a lazy value read
                // later would spill them again, a store and two barriers.
                match (self.spilled.get(&v), self.spill_bytes.get(&v)) {
                    (Some(&off), Some(&bytes)) if bytes >= MIN_FREED_SPILL && !held(off) => {
                        self.spilled.remove(&v);
                        self.spill_bytes.remove(&v);
                        self.free_spills.push((off, bytes));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Lowers one instruction, its code recorded as computing the
    /// instruction's source expression (the enclosing one's when it has
    /// none).
    fn inst(&mut self, inst: &'k TInst) -> R<()> {
        if inst.span == tessera_tile::Span::default() {
            return self.inst_at(inst);
        }
        let outer = self.f.at(inst.span);
        let done = self.inst_at(inst);
        self.f.at(outer);
        if done.is_err() && self.failed_at == tessera_tile::Span::default() {
            self.failed_at = inst.span;
        }
        done
    }

    /// [`inst`](Self::inst), at the current source position.
    fn inst_at(&mut self, inst: &'k TInst) -> R<()> {
        let res = inst.results.first().copied();
        match &inst.op {
            TOp::ProgramId(a) if self.persist.is_some() => {
                let r = self.program_id(*a);
                self.uniform_result(res, r)
            }
            TOp::NumPrograms(a) if self.persist.is_some() => {
                let g = self.persist.map_or(1, |p| p.grid[usize::from(*a).min(2)]);
                let r = self.f.mov(Ty::U32, Operand::Int(g));
                self.uniform_result(res, r)
            }
            TOp::ProgramId(a) => {
                let r = self.f.reg(Ty::U32);
                self.f.push(Inst::Special {
                    dst: r,
                    reg: Special::Ctaid(*a),
                });
                self.uniform_result(res, r)
            }
            TOp::NumPrograms(a) => {
                let r = self.f.reg(Ty::U32);
                self.f.push(Inst::Special {
                    dst: r,
                    reg: Special::Nctaid(*a),
                });
                self.uniform_result(res, r)
            }
            TOp::Size(_)
            | TOp::Const(_)
            | TOp::Arange(_)
            | TOp::Broadcast(_)
            | TOp::Reshape(_)
            | TOp::Permute(..)
            | TOp::Unary(..)
            | TOp::Binary(..)
            | TOp::Rand { .. }
            | TOp::Select(..)
            | TOp::Cast(_) => self.elementwise(inst),
            TOp::Load { param, .. } => {
                if self.k.params[*param].access == Access::In && self.all_lazy(inst) {
                    let v = inst.results[0];
                    // A tile read by several consumers (a row kernel's
                    // passes over a row that fits) is read once.
                    if self.uses[v.index()] >= 2 && self.len(v)? >= self.threads {
                        return self.materialise_load(inst);
                    }
                    self.lazy(inst)
                } else {
                    self.materialise_op(inst)
                }
            }
            TOp::Store {
                param,
                index,
                value,
                mask,
                atomic: None,
            } => self.store(*param, index, *value, *mask),
            TOp::Store {
                param,
                index,
                value,
                mask,
                atomic: Some(c),
            } => self.atomic(*param, (index, *mask), *value, *c),
            TOp::Dot { a, b, acc, .. } => self.dot(inst, *a, *b, *acc),
            TOp::Reduce {
                combine,
                value,
                axis,
                ..
            } => self.reduce(inst, *combine, *value, *axis),
            TOp::KahanAdd { sum, comp, x } => self.kahan(inst, *sum, *comp, *x),
            TOp::Sort { value, descending } => self.sort(inst, *value, *descending),
            TOp::Stage { value, shared } => {
                let v = res.ok_or("a stage without a result")?;
                if let Some(off) = self.pipelined_stage(v)? {
                    self.vals[v.index()] = Some(Val::Shared(off));
                    return Ok(());
                }
                let off = match self.stage_async(*value, *shared)? {
                    Some((off, stored)) => {
                        self.stored.insert(v, stored);
                        off
                    }
                    None => self.to_shared(*value, None)?,
                };
                self.vals[v.index()] = Some(Val::Shared(off));
                Ok(())
            }
            TOp::Barrier => {
                let redundant = self.pipe.as_ref().is_some_and(|p| {
                    p.issued && p.redundant_barrier.is_some_and(|b| std::ptr::eq(b, inst))
                });
                if !redundant {
                    self.f.push(Inst::Barrier);
                }
                Ok(())
            }
            TOp::Assert(c, check, _) => self.assert(*c, *check),
            TOp::For {
                lo,
                hi,
                step,
                init,
                body,
            } => self.for_loop(inst, *lo, *hi, *step, init, body),
            TOp::If { cond, then, els } => self.if_else(inst, *cond, then, els),
            TOp::Yield(_) => Ok(()),
        }
    }

    fn uniform_result(&mut self, res: Option<Value>, r: Reg) -> R<()> {
        let v = res.ok_or("an operation without its result")?;
        let want = self.rty(v);
        let r = self.f.cvt(want, r);
        self.vals[v.index()] = Some(Val::Uniform(r));
        Ok(())
    }

    /// Whether every operand of `inst` is uniform or lazy.
    fn all_lazy(&self, inst: &TInst) -> bool {
        inst.op.operands().iter().all(|o| {
            matches!(
                self.vals[o.index()],
                Some(Val::Uniform(_)) | Some(Val::Lazy)
            )
        })
    }

    /// Records `inst` as lazy.
    fn lazy(&mut self, inst: &'k TInst) -> R<()> {
        let v = inst.results[0];
        self.defs.insert(v, inst);
        self.vals[v.index()] = Some(Val::Lazy);
        Ok(())
    }

    /// An elementwise (or index) operation: lazy when its operands are,
    /// otherwise materialised now.
    fn elementwise(&mut self, inst: &'k TInst) -> R<()> {
        let v = inst.results[0];
        if self.all_lazy(inst) {
            if self.len(v)? == 1 && self.shape(v)?.is_empty() {
                // A scalar: compute it once, uniformly.
                self.defs.insert(v, inst);
                self.vals[v.index()] = Some(Val::Lazy);
                self.memo.clear();
                let r = self.elem(v, &[])?;
                self.memo.clear();
                self.vals[v.index()] = Some(Val::Uniform(r));
                return Ok(());
            }
            return self.lazy(inst);
        }
        self.materialise_op(inst)
    }

    /// Computes `inst`'s result into registers now (slot by slot).
    fn materialise_op(&mut self, inst: &'k TInst) -> R<()> {
        let v = inst.results[0];
        self.defs.insert(v, inst);
        self.vals[v.index()] = Some(Val::Lazy);
        // Elementwise results keep the layout of a same-shaped operand, so
        // that fragments stay in their registers.
        let shape = self.shape(v)?;
        let mut layout = Layout::Flat;
        // Per-row values (`[M]`, `[M, 1]`) keep the `Rows` layout.
        let rows = |s: &[i64]| s.len() <= 2 && s.iter().skip(1).all(|n| *n == 1);
        for o in inst.op.operands() {
            if let (Some(Val::Dist(_, l)), Some(so)) =
                (&self.vals[o.index()], &self.shapes[o.index()])
            {
                let keeps = match l {
                    Layout::Rows { .. } => rows(so) && rows(&shape) && so.first() == shape.first(),
                    _ => *so == shape,
                };
                if keeps {
                    layout = *l;
                }
            }
        }
        let regs = self.slot_values(v, layout)?;
        self.vals[v.index()] = Some(Val::Dist(regs, layout));
        Ok(())
    }
}

/// Whether `op` is elementwise or index arithmetic: lazy when its operands
/// are (see [`Lower::elementwise`]).
fn elementwise_op(op: &TOp) -> bool {
    matches!(
        op,
        TOp::Size(_)
            | TOp::Const(_)
            | TOp::Arange(_)
            | TOp::Broadcast(_)
            | TOp::Reshape(_)
            | TOp::Permute(..)
            | TOp::Unary(..)
            | TOp::Binary(..)
            | TOp::Rand { .. }
            | TOp::Select(..)
            | TOp::Cast(_)
    )
}

/// How many operations of `k` (nested ones included) read each value.
fn use_counts(k: &Kernel) -> Vec<u32> {
    fn visit(b: &tessera_tile::Block, n: &mut [u32]) {
        for inst in &b.insts {
            for o in inst.op.operands() {
                n[o.index()] += 1;
            }
            match &inst.op {
                TOp::For { body, .. } => visit(body, n),
                TOp::If { then, els, .. } => {
                    visit(then, n);
                    visit(els, n);
                }
                _ => {}
            }
        }
    }
    let mut n = vec![0; k.values.len()];
    visit(&k.body, &mut n);
    n
}

/// The PTX of a program: every kernel lowered, verified and printed.
pub fn emit_ptx(p: &TileProgram, arch: &Arch, bindings: &Bindings) -> Result<String, LowerError> {
    let m = lower_program(p, arch, bindings)?;
    if let Err(e) = crate::verify::verify(&m) {
        return Err(LowerError {
            kernel: e.function,
            message: format!(
                "internal error: the Target IR does not verify: {}",
                e.message
            ),
            span: Default::default(),
        });
    }
    Ok(crate::print::print_module(&m))
}

/// The smallest spill whose region is given back after its last reader:
/// tiles, not the per-row values of a reduction.
const MIN_FREED_SPILL: u64 = 1024;

/// Calls `f` on every value `inst` reads, in its nested blocks too.
fn reads(inst: &TInst, f: &mut dyn FnMut(Value)) {
    for v in inst.op.operands() {
        f(v);
    }
    match &inst.op {
        TOp::For { body, .. } => body.insts.iter().for_each(|i| reads(i, f)),
        TOp::If { then, els, .. } => then
            .insts
            .iter()
            .chain(&els.insts)
            .for_each(|i| reads(i, f)),
        _ => {}
    }
}
