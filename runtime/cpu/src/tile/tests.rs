//! Tests of the Tile IR executor on hand-built kernels.

use super::run_program;
use crate::reduce::{sum, Accumulate};
use tessera_graph::{BinaryOp, CollectiveKind};
use tessera_schedule::Size;
use tessera_sema::Policy;
use tessera_tensor::{Data, Dtype, Tensor};
use tessera_tile::{
    Access, Block, BufferDecl, BufferId, Combine, Inst, KParam, Kernel, Step, TOp, TileProgram,
    TileTy, Value,
};

/// A kernel under construction.
struct Kb {
    values: Vec<TileTy>,
    blocks: Vec<Block>,
}

fn sym(s: &str) -> Size {
    Size::Sym(s.into())
}

fn c(n: i64) -> Size {
    Size::Const(n)
}

/// A tile type of the given extents.
fn ty(shape: &[Size], dtype: Dtype) -> TileTy {
    TileTy {
        shape: shape.to_vec(),
        dtype,
    }
}

fn i32s() -> TileTy {
    TileTy::scalar(Dtype::Int32)
}

impl Kb {
    fn new() -> Kb {
        Kb {
            values: Vec::new(),
            blocks: vec![Block::default()],
        }
    }

    fn fresh(&mut self, t: TileTy) -> Value {
        self.values.push(t);
        Value(self.values.len() as u32 - 1)
    }

    fn emit(&mut self, op: TOp, tys: Vec<TileTy>) -> Vec<Value> {
        let results: Vec<Value> = tys.into_iter().map(|t| self.fresh(t)).collect();
        self.blocks
            .last_mut()
            .expect("a block is open")
            .insts
            .push(Inst::new(results.clone(), op));
        results
    }

    fn op(&mut self, op: TOp, t: TileTy) -> Value {
        self.emit(op, vec![t])[0]
    }

    fn eff(&mut self, op: TOp) {
        self.emit(op, Vec::new());
    }

    fn bin(&mut self, op: BinaryOp, a: Value, b: Value, t: TileTy) -> Value {
        self.op(TOp::Binary(op, a, b), t)
    }

    fn konst(&mut self, x: f64, t: TileTy) -> Value {
        self.op(TOp::Const(x), t)
    }

    /// A `for` loop carrying `init`; `body` gets the induction variable and
    /// the carried values and returns the yielded ones.
    fn for_loop(
        &mut self,
        (lo, hi, step): (Value, Value, Value),
        init: &[Value],
        body: impl FnOnce(&mut Kb, Value, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let iv = self.fresh(i32s());
        let carried: Vec<Value> = init
            .iter()
            .map(|v| {
                let t = self.values[v.index()].clone();
                self.fresh(t)
            })
            .collect();
        let mut args = vec![iv];
        args.extend(&carried);
        self.blocks.push(Block {
            args,
            insts: Vec::new(),
        });
        let ys = body(self, iv, &carried);
        self.eff(TOp::Yield(ys));
        let body = self.blocks.pop().expect("the loop body is open");
        let tys = init
            .iter()
            .map(|v| self.values[v.index()].clone())
            .collect();
        self.emit(
            TOp::For {
                lo,
                hi,
                step,
                init: init.to_vec(),
                body,
            },
            tys,
        )
    }

    fn kernel(mut self, params: Vec<KParam>, grid: [Size; 3]) -> Kernel {
        Kernel {
            name: "k".into(),
            params,
            grid,
            threads: 128,
            vectorize: 1,
            blocks_per_sm: None,
            warp_specialize: true,
            tensor_cores: true,
            fast_exp: false,
            shared: Vec::new(),
            values: self.values,
            body: self.blocks.remove(0),
            span: Default::default(),
        }
    }
}

fn param(name: &str, dtype: Dtype, dims: &[Size], access: Access) -> KParam {
    KParam {
        name: name.into(),
        dtype,
        dims: dims.to_vec(),
        access,
        init: tessera_tile::ir::Start::Held,
    }
}

fn decl(p: &KParam) -> BufferDecl {
    BufferDecl {
        name: p.name.clone(),
        dtype: p.dtype,
        dims: p.dims.clone(),
    }
}

/// A program running one kernel whose `Out` parameters are the outputs and
/// whose other parameters are the inputs, in order.
fn program(k: Kernel) -> TileProgram {
    let (mut inputs, mut outputs, mut args) = (Vec::new(), Vec::new(), Vec::new());
    for p in &k.params {
        if p.access == Access::Out {
            args.push(BufferId::Output(outputs.len()));
            outputs.push(decl(p));
        } else {
            args.push(BufferId::Input(inputs.len()));
            inputs.push(decl(p));
        }
    }
    TileProgram {
        name: "op".into(),
        dims: Vec::new(),
        inputs,
        temps: Vec::new(),
        outputs,
        kernels: vec![k],
        steps: vec![Step::Launch { kernel: 0, args }],
    }
}

/// Deterministic values in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    match &t.data {
        Data::F32(v) => v.clone(),
        other => panic!("not f32 data: {other:?}"),
    }
}

/// `offs = pid * block + arange(block)` as int32, and `offs < size`.
fn block_offsets(kb: &mut Kb, block: i64, size: &str) -> (Value, Value) {
    let shape = [c(block)];
    let pid = kb.op(TOp::ProgramId(0), i32s());
    let bs = kb.konst(block as f64, i32s());
    let base = kb.bin(BinaryOp::Mul, pid, bs, i32s());
    let ar = kb.op(TOp::Arange(0), ty(&shape, Dtype::Int32));
    let offs = kb.bin(BinaryOp::Add, base, ar, ty(&shape, Dtype::Int32));
    let n = kb.op(TOp::Size(sym(size)), TileTy::scalar(Dtype::Int64));
    let n = kb.op(TOp::Cast(n), i32s());
    let mask = kb.bin(BinaryOp::Lt, offs, n, ty(&shape, Dtype::Bool));
    (offs, mask)
}

fn vec_add(block: i64) -> TileProgram {
    let mut kb = Kb::new();
    let (offs, mask) = block_offsets(&mut kb, block, "N");
    let shape = [c(block)];
    let load = |kb: &mut Kb, p| {
        kb.op(
            TOp::Load {
                param: p,
                index: vec![offs],
                mask: Some(mask),
                other: 0.0,
            },
            ty(&shape, Dtype::Fp32),
        )
    };
    let (x, y) = (load(&mut kb, 0), load(&mut kb, 1));
    let s = kb.bin(BinaryOp::Add, x, y, ty(&shape, Dtype::Fp32));
    kb.eff(TOp::Store {
        param: 2,
        index: vec![offs],
        value: s,
        mask: Some(mask),
        atomic: None,
    });
    let n = [sym("N")];
    program(kb.kernel(
        vec![
            param("x", Dtype::Fp32, &n, Access::In),
            param("y", Dtype::Fp32, &n, Access::In),
            param("out", Dtype::Fp32, &n, Access::Out),
        ],
        [sym("N").cdiv(c(block)), c(1), c(1)],
    ))
}

#[test]
fn vec_add_with_a_ragged_end() {
    let n = 10_000;
    let p = vec_add(1024);
    let x = Tensor::from_f64(Dtype::Fp32, &[n], &noise(n, 1)).unwrap();
    let y = Tensor::from_f64(Dtype::Fp32, &[n], &noise(n, 2)).unwrap();
    let want: Vec<f32> = f32s(&x).iter().zip(f32s(&y)).map(|(a, b)| a + b).collect();
    for threads in [1, 4] {
        let out = run_program(&p, &[x.clone(), y.clone()], threads).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].shape, vec![n]);
        assert_eq!(f32s(&out[0]), want, "threads = {threads}");
    }
}

/// A tiled matmul: `bm × bn` output tiles, a loop over `K` in steps of
/// `bk` carrying an fp32 accumulator.
fn matmul(bm: i64, bn: i64, bk: i64, input: Dtype, output: Dtype) -> TileProgram {
    let mut kb = Kb::new();
    let dim = |kb: &mut Kb, s: &str| {
        let v = kb.op(TOp::Size(sym(s)), TileTy::scalar(Dtype::Int64));
        kb.op(TOp::Cast(v), i32s())
    };
    let (m, n, k) = (dim(&mut kb, "M"), dim(&mut kb, "N"), dim(&mut kb, "K"));
    // Row indices [bm, 1] and column indices [1, bn] of the output tile.
    let range = |kb: &mut Kb, axis: u8, b: i64, shape: [Size; 2]| {
        let pid = kb.op(TOp::ProgramId(axis), i32s());
        let bs = kb.konst(b as f64, i32s());
        let base = kb.bin(BinaryOp::Mul, pid, bs, i32s());
        let ar = kb.op(TOp::Arange(0), ty(&[c(b)], Dtype::Int32));
        let r = kb.bin(BinaryOp::Add, base, ar, ty(&[c(b)], Dtype::Int32));
        kb.op(TOp::Reshape(r), ty(&shape, Dtype::Int32))
    };
    let rm = range(&mut kb, 0, bm, [c(bm), c(1)]);
    let rn = range(&mut kb, 1, bn, [c(1), c(bn)]);
    let acc_ty = ty(&[c(bm), c(bn)], Dtype::Fp32);
    let acc0 = kb.konst(0.0, acc_ty.clone());
    let lo = kb.konst(0.0, i32s());
    let step = kb.konst(bk as f64, i32s());
    let acc = kb.for_loop((lo, k, step), &[acc0], |kb, kv, carried| {
        let ar = kb.op(TOp::Arange(0), ty(&[c(bk)], Dtype::Int32));
        let rk = kb.bin(BinaryOp::Add, kv, ar, ty(&[c(bk)], Dtype::Int32));
        let rk_row = kb.op(TOp::Reshape(rk), ty(&[c(1), c(bk)], Dtype::Int32));
        let rk_col = kb.op(TOp::Reshape(rk), ty(&[c(bk), c(1)], Dtype::Int32));
        let bool_ty = |s: [Size; 2]| ty(&s, Dtype::Bool);
        let m_ok = kb.bin(BinaryOp::Lt, rm, m, bool_ty([c(bm), c(1)]));
        let k_row_ok = kb.bin(BinaryOp::Lt, rk_row, k, bool_ty([c(1), c(bk)]));
        let mask_a = kb.bin(BinaryOp::And, m_ok, k_row_ok, bool_ty([c(bm), c(bk)]));
        let a = kb.op(
            TOp::Load {
                param: 0,
                index: vec![rm, rk_row],
                mask: Some(mask_a),
                other: 0.0,
            },
            ty(&[c(bm), c(bk)], input),
        );
        let k_col_ok = kb.bin(BinaryOp::Lt, rk_col, k, bool_ty([c(bk), c(1)]));
        let n_ok = kb.bin(BinaryOp::Lt, rn, n, bool_ty([c(1), c(bn)]));
        let mask_b = kb.bin(BinaryOp::And, k_col_ok, n_ok, bool_ty([c(bk), c(bn)]));
        let b = kb.op(
            TOp::Load {
                param: 1,
                index: vec![rk_col, rn],
                mask: Some(mask_b),
                other: 0.0,
            },
            ty(&[c(bk), c(bn)], input),
        );
        let acc = carried[0];
        let next = kb.op(
            TOp::Dot {
                a,
                b,
                acc,
                tf32: false,
                bf16_acc: false,
            },
            ty(&[c(bm), c(bn)], Dtype::Fp32),
        );
        vec![next]
    })[0];
    let m_ok = kb.bin(BinaryOp::Lt, rm, m, ty(&[c(bm), c(1)], Dtype::Bool));
    let n_ok = kb.bin(BinaryOp::Lt, rn, n, ty(&[c(1), c(bn)], Dtype::Bool));
    let mask = kb.bin(BinaryOp::And, m_ok, n_ok, ty(&[c(bm), c(bn)], Dtype::Bool));
    let out = kb.op(TOp::Cast(acc), ty(&[c(bm), c(bn)], output));
    kb.eff(TOp::Store {
        param: 2,
        index: vec![rm, rn],
        value: out,
        mask: Some(mask),
        atomic: None,
    });
    program(kb.kernel(
        vec![
            param("a", input, &[sym("M"), sym("K")], Access::In),
            param("b", input, &[sym("K"), sym("N")], Access::In),
            param("c", output, &[sym("M"), sym("N")], Access::Out),
        ],
        [sym("M").cdiv(c(bm)), sym("N").cdiv(c(bn)), c(1)],
    ))
}

/// Runs a matmul program on random inputs; returns the largest error
/// relative to the largest reference element.
fn check_matmul(
    p: &TileProgram,
    (m, k, n): (usize, usize, usize),
    dtype: Dtype,
    threads: usize,
) -> f64 {
    let a = Tensor::from_f64(dtype, &[m, k], &noise(m * k, 3)).unwrap();
    let b = Tensor::from_f64(dtype, &[k, n], &noise(k * n, 4)).unwrap();
    let out = run_program(p, &[a.clone(), b.clone()], threads).unwrap();
    assert_eq!(out[0].shape, vec![m, n]);
    assert_eq!(out[0].dtype, dtype);
    let (av, bv, cv) = (a.to_f64_vec(), b.to_f64_vec(), out[0].to_f64_vec());
    let (mut err, mut scale) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let r: f64 = (0..k).map(|p| av[i * k + p] * bv[p * n + j]).sum();
            err = err.max((cv[i * n + j] - r).abs());
            scale = scale.max(r.abs());
        }
    }
    err / scale
}

#[test]
fn tiled_matmul_fp32_and_bf16() {
    let dims = (67, 45, 83);
    let p = matmul(32, 32, 16, Dtype::Fp32, Dtype::Fp32);
    let e = check_matmul(&p, dims, Dtype::Fp32, 3);
    assert!(e < 1e-5, "fp32 relative error {e}");
    let p = matmul(32, 32, 16, Dtype::Bf16, Dtype::Bf16);
    let e = check_matmul(&p, dims, Dtype::Bf16, 2);
    assert!(e < 1e-2, "bf16 relative error {e}");
}

#[test]
fn matmul_256_timing() {
    let p = matmul(64, 64, 32, Dtype::Fp32, Dtype::Fp32);
    let threads = super::default_threads();
    let a = Tensor::from_f64(Dtype::Fp32, &[256, 256], &noise(256 * 256, 5)).unwrap();
    let b = Tensor::from_f64(Dtype::Fp32, &[256, 256], &noise(256 * 256, 6)).unwrap();
    let start = std::time::Instant::now();
    let out = run_program(&p, &[a, b], threads).unwrap();
    let elapsed = start.elapsed();
    println!("256x256x256 fp32 matmul, 64x64 tiles, BK=32, {threads} threads: {elapsed:?}");
    assert_eq!(out[0].shape, vec![256, 256]);
}

/// Row sums of an `[R, C]` fp32 tensor: `BR` rows per program, the whole
/// row (padded to a power of two) in one tile, reduced under `policy`.
fn row_sum(br: i64, policy: Policy) -> TileProgram {
    let mut kb = Kb::new();
    let (rows, row_ok) = block_offsets(&mut kb, br, "R");
    let bc = sym("C").pow2();
    let ar = kb.op(TOp::Arange(0), ty(std::slice::from_ref(&bc), Dtype::Int32));
    let n = kb.op(TOp::Size(sym("C")), TileTy::scalar(Dtype::Int64));
    let n = kb.op(TOp::Cast(n), i32s());
    let col_ok = kb.bin(
        BinaryOp::Lt,
        ar,
        n,
        ty(std::slice::from_ref(&bc), Dtype::Bool),
    );
    let r2 = kb.op(TOp::Reshape(rows), ty(&[c(br), c(1)], Dtype::Int32));
    let ok2 = kb.op(TOp::Reshape(row_ok), ty(&[c(br), c(1)], Dtype::Bool));
    let mask = kb.bin(
        BinaryOp::And,
        ok2,
        col_ok,
        ty(&[c(br), bc.clone()], Dtype::Bool),
    );
    let x = kb.op(
        TOp::Load {
            param: 0,
            index: vec![r2, ar],
            mask: Some(mask),
            other: 0.0,
        },
        ty(&[c(br), bc], Dtype::Fp32),
    );
    let s = kb.op(
        TOp::Reduce {
            combine: Combine::Sum,
            value: x,
            axis: 1,
            policy,
        },
        ty(&[c(br)], Dtype::Fp32),
    );
    kb.eff(TOp::Store {
        param: 1,
        index: vec![rows],
        value: s,
        mask: Some(row_ok),
        atomic: None,
    });
    program(kb.kernel(
        vec![
            param("x", Dtype::Fp32, &[sym("R"), sym("C")], Access::In),
            param("y", Dtype::Fp32, &[sym("R")], Access::Out),
        ],
        [sym("R").cdiv(c(br)), c(1), c(1)],
    ))
}

#[test]
fn row_sums_follow_the_policy_for_any_thread_count() {
    let (r, cols) = (37, 1000);
    // Values of very different magnitudes, so that the orders differ.
    let vals: Vec<f64> = noise(r * cols, 7)
        .iter()
        .enumerate()
        .map(|(i, x)| if i % 97 == 0 { x * 1e4 } else { x * 1e-2 })
        .collect();
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &vals).unwrap();
    let xv = x.to_f64_vec();
    let padded = cols.next_power_of_two();
    let mut results = Vec::new();
    for policy in [Policy::Fast, Policy::Deterministic, Policy::KahanSum] {
        let p = row_sum(4, policy);
        let base = run_program(&p, std::slice::from_ref(&x), 1).unwrap();
        for threads in [2, 7] {
            let again = run_program(&p, std::slice::from_ref(&x), threads).unwrap();
            let bits = |t: &Tensor| f32s(t).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&base[0]),
                bits(&again[0]),
                "{policy:?}, {threads} threads"
            );
        }
        let got = f32s(&base[0]);
        for (i, g) in got.iter().enumerate() {
            // The order of the graph evaluator's summation, over the padded
            // row (masked elements load as zeros).
            let mut row = xv[i * cols..(i + 1) * cols].to_vec();
            row.resize(padded, 0.0);
            let want = sum(&row, Accumulate::F32(policy)) as f32;
            assert_eq!(g.to_bits(), want.to_bits(), "{policy:?}, row {i}");
            let exact: f64 = row.iter().sum();
            let scale: f64 = row.iter().map(|x| x.abs()).sum();
            assert!(
                (f64::from(*g) - exact).abs() < 1e-5 * scale,
                "{policy:?}, row {i}"
            );
        }
        results.push(got);
    }
    assert_ne!(
        results[0], results[1],
        "the policies should sum differently here"
    );
}

#[test]
fn a_wrong_input_shape_names_the_input() {
    let p = vec_add(128);
    let x = Tensor::zeros(Dtype::Fp32, &[100]).unwrap();
    let y = Tensor::zeros(Dtype::Fp32, &[200]).unwrap();
    let e = run_program(&p, &[x.clone(), y], 2).unwrap_err();
    assert!(
        e.message.contains("input `y`") && e.message.contains("[200]"),
        "{}",
        e.message
    );
    let y = Tensor::zeros(Dtype::Fp32, &[10, 10]).unwrap();
    let e = run_program(&p, &[x.clone(), y], 2).unwrap_err();
    assert!(e.message.contains("input `y`"), "{}", e.message);
    let e = run_program(&p, &[x], 2).unwrap_err();
    assert!(e.message.contains("2 inputs"), "{}", e.message);
}

#[test]
fn an_input_of_another_dtype_is_converted() {
    let p = vec_add(64);
    let x = Tensor::from_f64(Dtype::Fp64, &[3], &[1.0, 2.0, 1e-9]).unwrap();
    let y = Tensor::from_f64(Dtype::Fp32, &[3], &[0.5, 0.25, 1.0]).unwrap();
    let out = run_program(&p, &[x, y], 1).unwrap();
    assert_eq!(f32s(&out[0]), vec![1.5, 2.25, 1.0]);
}

/// A kernel storing `1 / arange(4)` in int32 over `programs` programs.
fn int_division(programs: i64) -> TileProgram {
    let mut kb = Kb::new();
    let ar = kb.op(TOp::Arange(0), ty(&[c(4)], Dtype::Int32));
    let one = kb.konst(1.0, i32s());
    let q = kb.bin(BinaryOp::Div, one, ar, ty(&[c(4)], Dtype::Int32));
    kb.eff(TOp::Store {
        param: 0,
        index: vec![ar],
        value: q,
        mask: None,
        atomic: None,
    });
    program(kb.kernel(
        vec![param("out", Dtype::Int32, &[c(4)], Access::Out)],
        [c(programs), c(1), c(1)],
    ))
}

#[test]
fn integer_division_by_zero_is_an_error() {
    for threads in [1, 3] {
        let e = run_program(&int_division(5), &[], threads).unwrap_err();
        assert!(e.message.contains("by zero"), "{}", e.message);
        assert!(e.message.contains("program (0, 0, 0)"), "{}", e.message);
    }
}

#[test]
fn stores_to_inputs_and_malformed_ir_are_errors() {
    let mut p = vec_add(64);
    p.kernels[0].params[2].access = Access::In;
    let x = Tensor::zeros(Dtype::Fp32, &[10]).unwrap();
    let e = run_program(&p, &[x.clone(), x.clone()], 1).unwrap_err();
    assert!(e.message.contains("input parameter `out`"), "{}", e.message);

    // An operand that is never defined.
    let mut p = vec_add(64);
    let bin = p.kernels[0]
        .body
        .insts
        .iter_mut()
        .find_map(|i| match &mut i.op {
            TOp::Binary(_, a, _) => Some(a),
            _ => None,
        });
    *bin.unwrap() = Value(999);
    let e = run_program(&p, &[x.clone(), x.clone()], 1).unwrap_err();
    assert!(e.message.contains("%999"), "{}", e.message);

    // A load whose result type does not match its indices.
    let mut p = vec_add(64);
    let load = p.kernels[0]
        .body
        .insts
        .iter()
        .find_map(|i| match i.op {
            TOp::Load { .. } => Some(i.results[0]),
            _ => None,
        })
        .unwrap();
    p.kernels[0].values[load.index()].shape = vec![c(3), c(5)];
    assert!(run_program(&p, &[x.clone(), x], 2).is_err());
}

#[test]
fn casts_wrap_and_stores_round() {
    // int8 wrap on a cast, bf16 rounding on a store.
    let mut kb = Kb::new();
    let ar = kb.op(TOp::Arange(0), ty(&[c(3)], Dtype::Int32));
    let big = kb.konst(200.0, i32s());
    let v = kb.bin(BinaryOp::Add, ar, big, ty(&[c(3)], Dtype::Int32));
    let w = kb.op(TOp::Cast(v), ty(&[c(3)], Dtype::Int8));
    kb.eff(TOp::Store {
        param: 0,
        index: vec![ar],
        value: w,
        mask: None,
        atomic: None,
    });
    let f = kb.konst(1.0 + 1.0 / 256.0 + 1.0 / 512.0, ty(&[c(3)], Dtype::Fp32));
    kb.eff(TOp::Store {
        param: 1,
        index: vec![ar],
        value: f,
        mask: None,
        atomic: None,
    });
    let p = program(kb.kernel(
        vec![
            param("i", Dtype::Int8, &[c(3)], Access::Out),
            param("h", Dtype::Bf16, &[c(3)], Access::Out),
        ],
        [c(1), c(1), c(1)],
    ));
    let out = run_program(&p, &[], 1).unwrap();
    assert_eq!(out[0].data, Data::I64(vec![-56, -55, -54]));
    assert_eq!(out[1].to_f64_vec(), vec![1.0 + 1.0 / 128.0; 3]);
}

#[test]
fn kahan_add_permute_and_if() {
    let mut kb = Kb::new();
    let t = |s: &[i64]| TileTy::consts(s, Dtype::Fp32);
    let zero = kb.konst(0.0, t(&[2, 3]));
    let big = kb.konst(1e8, t(&[2, 3]));
    let small = kb.konst(1.0, t(&[]));
    let r = kb.emit(
        TOp::KahanAdd {
            sum: big,
            comp: zero,
            x: small,
        },
        vec![t(&[2, 3]), t(&[2, 3])],
    );
    // 1e8 + 1 rounds to 1e8 in f32; the compensation keeps the lost 1.
    let comp = r[1];
    let perm = kb.op(TOp::Permute(comp, vec![1, 0]), t(&[3, 2]));
    let yes = kb.konst(1.0, TileTy::scalar(Dtype::Bool));
    let mut then = Block::default();
    let neg = kb.fresh(t(&[3, 2]));
    then.insts.push(Inst::new(
        vec![neg],
        TOp::Unary(tessera_graph::UnaryOp::Neg, perm),
    ));
    then.insts.push(Inst::new(vec![], TOp::Yield(vec![neg])));
    let els = Block {
        args: vec![],
        insts: vec![Inst::new(vec![], TOp::Yield(vec![perm]))],
    };
    let out = kb.op(
        TOp::If {
            cond: yes,
            then,
            els,
        },
        t(&[3, 2]),
    );
    let rows = kb.op(TOp::Arange(0), TileTy::consts(&[3], Dtype::Int32));
    let rows = kb.op(TOp::Reshape(rows), TileTy::consts(&[3, 1], Dtype::Int32));
    let cols = kb.op(TOp::Arange(0), TileTy::consts(&[2], Dtype::Int32));
    kb.eff(TOp::Store {
        param: 0,
        index: vec![rows, cols],
        value: out,
        mask: None,
        atomic: None,
    });
    let p = program(kb.kernel(
        vec![param("o", Dtype::Fp32, &[c(3), c(2)], Access::Out)],
        [c(1), c(1), c(1)],
    ));
    let out = run_program(&p, &[], 1).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![1.0; 6]);
}

#[test]
fn send_rotates_shards() {
    let decl = |name: &str| BufferDecl {
        name: name.into(),
        dtype: Dtype::Fp32,
        dims: vec![sym("N"), c(2)],
    };
    let p = TileProgram {
        name: "shift".into(),
        dims: vec!["N".into()],
        inputs: vec![decl("x")],
        temps: vec![],
        outputs: vec![decl("y"), decl("z")],
        kernels: vec![],
        steps: vec![
            Step::Collective {
                kind: CollectiveKind::Send { offset: 1 },
                axis: "d".into(),
                devices: 2,
                src: BufferId::Input(0),
                dst: BufferId::Output(0),
            },
            Step::Copy {
                src: BufferId::Output(0),
                dst: BufferId::Output(1),
            },
            Step::Collective {
                kind: CollectiveKind::Recv { offset: 1 },
                axis: "d".into(),
                devices: 2,
                src: BufferId::Output(1),
                dst: BufferId::Output(1),
            },
        ],
    };
    let x = Tensor::from_f64(Dtype::Fp32, &[4, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]).unwrap();
    let out = run_program(&p, std::slice::from_ref(&x), 1).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![4., 5., 6., 7., 0., 1., 2., 3.]);
    assert_eq!(out[1], x);
}

#[test]
fn dot_rounds_tf32_operands_and_batches() {
    let mut kb = Kb::new();
    let t = |s: &[i64]| TileTy::consts(s, Dtype::Fp32);
    // 1 + 2^-12 is an fp32 value that tf32 rounds to 1.
    let a = kb.konst(1.0 + 1.0 / 4096.0, t(&[1, 1]));
    let one = kb.konst(1.0, t(&[1, 1]));
    let zero = kb.konst(0.0, t(&[1, 1]));
    let dot = |kb: &mut Kb, tf32| {
        kb.op(
            TOp::Dot {
                a,
                b: one,
                acc: zero,
                tf32,
                bf16_acc: false,
            },
            t(&[1, 1]),
        )
    };
    let (exact, rounded) = (dot(&mut kb, false), dot(&mut kb, true));
    // A batched product x[b] @ x[b]^T + 0.5, with x[b] = [[0, 1], [2, 3]] + 4b.
    let ar = kb.op(TOp::Arange(0), TileTy::consts(&[8], Dtype::Int32));
    let xf = kb.op(TOp::Cast(ar), t(&[8]));
    let x = kb.op(TOp::Reshape(xf), t(&[2, 2, 2]));
    let xt = kb.op(TOp::Permute(x, vec![0, 2, 1]), t(&[2, 2, 2]));
    let acc = kb.konst(0.5, t(&[2, 2, 2]));
    let prod = kb.op(
        TOp::Dot {
            a: x,
            b: xt,
            acc,
            tf32: false,
            bf16_acc: false,
        },
        t(&[2, 2, 2]),
    );
    let flat = kb.op(TOp::Reshape(prod), t(&[8]));
    let zero_i = kb.konst(0.0, TileTy::consts(&[1, 1], Dtype::Int32));
    kb.eff(TOp::Store {
        param: 0,
        index: vec![zero_i, zero_i],
        value: exact,
        mask: None,
        atomic: None,
    });
    let one_i = kb.konst(1.0, TileTy::consts(&[1, 1], Dtype::Int32));
    kb.eff(TOp::Store {
        param: 0,
        index: vec![zero_i, one_i],
        value: rounded,
        mask: None,
        atomic: None,
    });
    kb.eff(TOp::Store {
        param: 1,
        index: vec![ar],
        value: flat,
        mask: None,
        atomic: None,
    });
    let p = program(kb.kernel(
        vec![
            param("s", Dtype::Fp32, &[c(1), c(2)], Access::Out),
            param("b", Dtype::Fp32, &[c(8)], Access::Out),
        ],
        [c(1), c(1), c(1)],
    ));
    let out = run_program(&p, &[], 1).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![1.0 + 1.0 / 4096.0, 1.0]);
    // x @ x^T per batch, plus 0.5.
    let want: Vec<f64> = (0..2)
        .flat_map(|b| {
            let x = move |i: usize, j: usize| (4 * b + 2 * i + j) as f64;
            (0..4).map(move |e| {
                let (i, j) = (e / 2, e % 2);
                0.5 + (0..2).map(|k| x(i, k) * x(j, k)).sum::<f64>()
            })
        })
        .collect();
    assert_eq!(out[1].to_f64_vec(), want);
}
