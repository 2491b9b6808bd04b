//! The Tile IR reader on its own: a program with every instruction, header
//! form (a parameter's start value included) and step reads back to the same IR and the same text; malformed
//! text is an error with a line and a column, never a panic.

use tessera_core::{BinaryOp, CollectiveKind, Dtype, Policy, Size, UnaryOp};
use tessera_tile::build::KernelBuilder;
use tessera_tile::print::print_program;
use tessera_tile::verify::verify;
use tessera_tile::*;

fn sym(s: &str) -> Size {
    Size::Sym(s.to_owned())
}

fn decl(name: &str, dtype: Dtype, dims: Vec<Size>) -> BufferDecl {
    BufferDecl {
        name: name.to_owned(),
        dtype,
        dims,
    }
}

/// A kernel that uses every instruction but `if`, on symbolic and constant
/// tiles, with two shared buffers, a nested loop and a loop that carries
/// nothing.
fn everything_kernel() -> Kernel {
    let n = sym("N");
    let tile = n.clone().pow2().max(Size::Const(16));
    let grid = [
        n.clone().cdiv(Size::Const(128)),
        sym("B").mul(sym("H")),
        sym("B").add(Size::Const(1)),
    ];
    let mut b = KernelBuilder::new("k0_everything", grid, 128);
    let x = b.param(
        "x",
        Dtype::Bf16,
        vec![n.clone(), Size::Const(64)],
        Access::In,
    );
    let y = b.param("y", Dtype::Fp32, vec![n.clone()], Access::In);
    let out = b.param("out", Dtype::Fp32, vec![n.clone()], Access::In);
    b.start_value(out, f64::NEG_INFINITY);
    let s = b.param("s", Dtype::Fp32, vec![], Access::In);
    let a_buf = b.shared(Shared {
        name: "a".into(),
        shape: vec![16, 64],
        dtype: Dtype::Bf16,
        stages: 2,
        padding: 8,
    });
    let pid = b.program_id(0);
    let np = b.op(TOp::NumPrograms(2), TileTy::scalar(Dtype::Int32));
    let np = b.cast(np, Dtype::Int64);
    let size = b.size(&tile);
    let rows = b.arange(&Size::Const(16));
    let base = b.binary(BinaryOp::Mul, pid, np);
    let rows = b.binary(BinaryOp::Add, rows, base);
    let rows2 = b.reshape(rows, vec![Size::Const(16), Size::Const(1)]);
    let cols = b.op(
        TOp::Arange(-3),
        TileTy {
            shape: vec![Size::Const(64)],
            dtype: Dtype::Int64,
        },
    );
    let cols2 = b.reshape(cols, vec![Size::Const(1), Size::Const(64)]);
    let mask = b.binary(BinaryOp::Lt, rows2, size);
    let xs = b.load(x, vec![rows2, cols2], Some(mask), f64::NEG_INFINITY);
    let staged = b.op(
        TOp::Stage {
            shared: a_buf,
            value: xs,
        },
        b.ty(xs).clone(),
    );
    b.effect(TOp::Barrier);
    let t = b.op(
        TOp::Permute(staged, vec![1, 0]),
        TileTy::consts(&[64, 16], Dtype::Bf16),
    );
    let acc = b.constant(0.0, TileTy::consts(&[16, 16], Dtype::Fp32));
    let d = b.dot(staged, t, acc, true);
    let d2 = b.op(
        TOp::Dot {
            a: staged,
            b: t,
            acc: d,
            tf32: false,
            bf16_acc: false,
        },
        TileTy::consts(&[16, 16], Dtype::Fp32),
    );
    // One k-tile of a bf16 accumulator: widen, `dot ... bf16_acc`, round.
    let acc16 = b.constant(0.0, TileTy::consts(&[16, 16], Dtype::Bf16));
    b.dot_bf16_acc(staged, t, acc16, false);
    let mut last = d2;
    for u in UnaryOp::ALL {
        last = b.unary(u, last);
    }
    for op in BinaryOp::ALL {
        last = b.binary_as(op, last, d, Dtype::Fp32);
        last = b.cast(last, Dtype::Fp32);
    }
    let sel = b.select(mask, last, d, Dtype::Fp32);
    let mx = b.reduce(Combine::Max, sel, 1, Policy::Fast);
    let mn = b.reduce(Combine::Min, sel, 0, Policy::Deterministic);
    let sm = b.reduce(Combine::Sum, mx, 0, Policy::KahanSum);
    let bc = b.op(TOp::Broadcast(mn), TileTy::consts(&[4, 16], Dtype::Fp32));
    // Both results of a sort, the positions int32, either way.
    let (sorted, _) = b.sort(sel, true);
    b.sort(sorted, false);
    let special = [f64::INFINITY, -0.5, 1e300, 0.1, -7.0, 1.5e-9];
    for c in special {
        b.constant(c, TileTy::scalar(Dtype::Fp64));
    }
    let ys = b.load(y, vec![rows], None, 2.5);
    let lo = b.int(0);
    let hi = b.size(&n);
    let step = b.int(16);
    let zero = b.constant(0.0, TileTy::consts(&[16], Dtype::Fp32));
    let (iv, carried) = b.begin_loop(lo, hi, step, vec![zero, zero]);
    let (jv, inner) = b.begin_loop(lo, iv, step, vec![carried[0]]);
    let _ = jv;
    let sum = b.binary(BinaryOp::Add, inner[0], ys);
    let next = b.end_loop(vec![sum]);
    let (k1, k2) = b.kahan_add(next[0], carried[1], ys);
    let (_, none) = b.begin_loop(lo, hi, step, Vec::new());
    assert!(none.is_empty());
    b.effect(TOp::Barrier);
    b.end_loop(Vec::new());
    let res = b.end_loop(vec![k1, k2]);
    b.store(out, vec![rows], res[0], Some(mask), None);
    b.store(out, vec![rows], bc, None, Some(tessera_tile::Combine::Sum));
    b.store(s, vec![], sm, None, None);
    b.finish()
}

/// A kernel with `if`s (the builder has none): one with results, one
/// without, and an empty `yield`.
fn if_kernel() -> Kernel {
    let mut b = KernelBuilder::new(
        "k1_if",
        [Size::Const(1), Size::Const(1), Size::Const(1)],
        32,
    );
    let io = b.param("io", Dtype::Int32, vec![Size::Const(4)], Access::InOut);
    b.kept(io);
    let mut k = b.finish();
    let fresh = |k: &mut Kernel, ty: TileTy| {
        k.values.push(ty);
        Value(k.values.len() as u32 - 1)
    };
    let i = fresh(&mut k, TileTy::consts(&[4], Dtype::Int64));
    let cond = fresh(&mut k, TileTy::scalar(Dtype::Bool));
    let x = fresh(&mut k, TileTy::consts(&[4], Dtype::Int32));
    let y = fresh(&mut k, TileTy::consts(&[4], Dtype::Int32));
    let r = fresh(&mut k, TileTy::consts(&[4], Dtype::Int32));
    let r2 = fresh(&mut k, TileTy::scalar(Dtype::Bool));
    let inst = Inst::new;
    k.body.insts = vec![
        inst(vec![i], TOp::Arange(0)),
        inst(vec![cond], TOp::Const(1.0)),
        inst(
            vec![x],
            TOp::Load {
                param: 0,
                index: vec![i],
                mask: None,
                other: 0.0,
            },
        ),
        inst(
            vec![r, r2],
            TOp::If {
                cond,
                then: Block {
                    args: vec![],
                    insts: vec![
                        inst(vec![y], TOp::Unary(UnaryOp::Neg, x)),
                        inst(vec![], TOp::Yield(vec![y, cond])),
                    ],
                },
                els: Block {
                    args: vec![],
                    insts: vec![inst(vec![], TOp::Yield(vec![x, cond]))],
                },
            },
        ),
        inst(
            vec![],
            TOp::If {
                cond: r2,
                then: Block {
                    args: vec![],
                    insts: vec![inst(vec![], TOp::Barrier)],
                },
                els: Block {
                    args: vec![],
                    insts: vec![inst(vec![], TOp::Yield(vec![]))],
                },
            },
        ),
        inst(
            vec![],
            TOp::Store {
                param: 0,
                index: vec![i],
                value: r,
                mask: None,
                atomic: None,
            },
        ),
    ];
    k
}

/// A program with every header form: dims, each kind of buffer, and each
/// kind of step, collectives of every kind included.
fn everything() -> TileProgram {
    let n = sym("N");
    let buf = |name: &str| decl(name, Dtype::Fp32, vec![n.clone()]);
    let mut p = TileProgram {
        name: "everything".into(),
        dims: vec!["N".into(), "B".into(), "H".into()],
        inputs: vec![
            decl("x", Dtype::Bf16, vec![n.clone(), Size::Const(64)]),
            buf("y"),
        ],
        temps: vec![buf("t1"), buf("t2")],
        outputs: vec![buf("result0"), decl("result1", Dtype::Fp32, vec![])],
        kernels: vec![everything_kernel(), if_kernel()],
        steps: Vec::new(),
    };
    let (input, temp, output) = (BufferId::Input, BufferId::Temp, BufferId::Output);
    p.steps = vec![
        Step::Launch {
            kernel: 0,
            args: vec![input(0), input(1), temp(0), output(1)],
        },
        Step::Copy {
            src: temp(0),
            dst: output(0),
        },
    ];
    let kinds = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter { dim: 1 },
        CollectiveKind::AllToAll {
            split_dim: 0,
            concat_dim: 2,
        },
        CollectiveKind::Send { offset: -1 },
        CollectiveKind::Recv { offset: 3 },
    ];
    for kind in kinds {
        p.steps.push(Step::Collective {
            kind,
            axis: "tp".into(),
            devices: 4,
            src: temp(0),
            dst: temp(1),
        });
    }
    p
}

#[test]
fn every_construct_reads_back_to_the_same_ir() {
    let p = everything();
    verify(&p).unwrap_or_else(|e| panic!("{e}\n{}", print_program(&p)));
    let text = print_program(&p);
    let read = read_program(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print_program(&read), text);
    assert_eq!(read, p, "{text}");
    for word in [
        "num_programs",
        "permute",
        "broadcast",
        "other -inf",
        "other 2.5",
        "tf32",
        "reduce_min",
        "if %",
        "} else {",
        "padding 8",
        "inout io: int32[4] = passed",
        "copy t1 -> result0",
        "send {offset = -1}",
        "all_to_all {split = 0, concat = 2}",
        "const 1e300",
        "carry ()",
        "result1: fp32[]",
    ] {
        assert!(text.contains(word), "`{word}` is not exercised:\n{text}");
    }
}

#[test]
fn nan_constants_read_back() {
    let text = print_program(&everything()).replace("const inf", "const NaN");
    let p = read_program(&text).expect("reads");
    assert_eq!(print_program(&p), text);
    let k = &p.kernels[0];
    assert!(k
        .body
        .insts
        .iter()
        .any(|i| matches!(i.op, TOp::Const(c) if c.is_nan())));
}

#[test]
fn an_empty_program_reads_back() {
    let text = "program nothing {\n    dims: \n}\n";
    let p = read_program(text).expect("an empty program");
    assert!(p.dims.is_empty() && p.kernels.is_empty() && p.steps.is_empty());
    assert_eq!(print_program(&p), text);
    // Without dims, the next line is not taken for one.
    let text = "program one {\n    dims: \n    input x: fp32[]\n}\n";
    assert_eq!(print_program(&read_program(text).expect("one input")), text);
}

#[test]
fn hand_written_text_may_have_comments_and_free_spacing() {
    let text = "// a comment before the program\n\
        program p { dims: N // dims end at the line break\n\
        input x: fp32[N] output result0: fp32[N]\n\
        launch k(x, result0) }\n\
        kernel k(in x: fp32[N], out result0: fp32[N]) grid [cdiv(N, 128), 1, 1] threads 128 {\n\
          %0 = program_id 0 : int32   %1 = cast %0 : int64\n\
          %2 = arange 0 : int64[128]  %3 = add %2, %1 : int64[128]\n\
          %4 = size N : int64\n\
          %5 = lt %3 , %4 : bool[128]\n\
          %6 = load x[%3] mask %5 : fp32[128]\n\
          store result0[%3], %6 mask %5 // the end\n\
        }\n";
    let p = read_program(text).unwrap_or_else(|e| panic!("{e}"));
    verify(&p).expect("verifies");
    let printed = print_program(&p);
    assert!(
        printed.contains("    %5 = lt %3, %4 : bool[128]\n"),
        "{printed}"
    );
    assert_eq!(read_program(&printed), Ok(p));
}

/// The error `text` gives: its line, column and message.
fn error(text: &str) -> (usize, usize, String) {
    match read_program(text) {
        Ok(p) => panic!("read:\n{}", print_program(&p)),
        Err(e) => {
            // Display carries the position.
            assert!(e
                .to_string()
                .starts_with(&format!("line {}, column {}: ", e.line, e.column)));
            (e.line, e.column, e.message)
        }
    }
}

const HEADER: &str = "program p {\n    dims: N\n    input x: fp32[N]\n    output result0: fp32[N]\n    launch k(x, result0)\n}\n\n";
const KERNEL: &str = "kernel k(in x: fp32[N], out result0: fp32[N]) grid [1, 1, 1] threads 32 {\n";

/// A one-kernel program whose body is `body`; the body starts on line 9.
fn with_body(body: &str) -> String {
    format!("{HEADER}{KERNEL}{body}}}\n")
}

#[test]
fn malformed_text_is_an_error_with_a_position() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("", 1, 1, "expected `program`, found the end of the text"),
        ("program p {\n    dims: N\n    launch", 3, 11, "expected a kernel's name"),
        (
            "program p {\n    dims: N\n    bogus x\n}\n",
            3,
            5,
            "unknown program line `bogus`",
        ),
        ("program p {\n    dims: N\n}\n$", 4, 1, "unexpected character `$`"),
        (
            "program p {\n    dims: N\n    input x: fp33[N]\n}\n",
            3,
            14,
            "unknown dtype `fp33`",
        ),
        (
            "program p {\n    dims: N\n    input x: fp32[cdiv(N]\n}\n",
            3,
            25,
            "expected `,`",
        ),
        (
            "program p {\n    dims: N\n    launch k()\n}\n",
            3,
            12,
            "no kernel named `k`",
        ),
        (
            "program p {\n    dims: N\n    input x: fp32[N]\n    temp x: fp32[N]\n    copy x -> x\n}\n",
            5,
            10,
            "`x` names more than one buffer",
        ),
        (
            "program p {\n    dims: N\n    collective all_sum over tp (2 devices) x -> x\n}\n",
            3,
            16,
            "unknown collective `all_sum`",
        ),
    ];
    for (text, line, column, message) in cases {
        let (l, c, m) = error(text);
        assert!(
            (l, c) == (*line, *column) && m.contains(message),
            "{text:?}: got {l}:{c} {m:?}, want {line}:{column} {message:?}"
        );
    }
}

#[test]
fn malformed_kernels_are_errors_with_a_position() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "    %0 = frobnicate %1 : fp32\n",
            9,
            10,
            "unknown instruction `frobnicate`",
        ),
        (
            "    %0 = const 1.0\n",
            10,
            1,
            "expected `:` and the result type",
        ),
        (
            "    %0 = const 1.0 : fp32\n    %0 = const 2.0 : fp32\n",
            10,
            5,
            "%0 is defined twice",
        ),
        ("    %0 = neg %7 : fp32\n", 9, 14, "%7 is never defined"),
        ("    %0 = load y[%0] : fp32\n", 9, 15, "no parameter `y`"),
        (
            "    %0 = stage %0 via a : fp32\n",
            9,
            23,
            "no shared buffer `a`",
        ),
        (
            "    %0 = program_id 300 : int32\n",
            9,
            21,
            "a grid axis out of range",
        ),
        (
            "    %99999999999 = const 1.0 : fp32\n",
            9,
            5,
            "value numbers above",
        ),
        (
            "    %0 = reduce_sum %0 axis 0 {policy = slow} : fp32\n",
            9,
            41,
            "unknown policy `slow`",
        ),
        (
            "    %2 = for %0 = %0 to %0 step %0 carry (%1 = %5) {\n    yield %1\n    }\n",
            9,
            48,
            "the type of %5 is needed here",
        ),
        (
            "    %0 = const 0.0 : int64\n    for %1 = %0 to %0 step %0 carry (%2 = %0) {\n    }\n",
            10,
            5,
            "a loop with 0 results carries 1 values",
        ),
        (
            "    %0 = const 1.0 : bool\n    %1 = if %0 {\n    } else {\n    }\n",
            10,
            5,
            "must end its first arm in a `yield`",
        ),
        (
            "    shared a: fp32[4, 4] x 2 stages, padding 0 (64 bytes)\n",
            9,
            49,
            "takes 128 bytes, not 64",
        ),
        (
            "    shared a: fp32[4611686018427387904, 4] x 2 stages, padding 0 (64 bytes)\n",
            9,
            12,
            "is too large",
        ),
        (
            "    %0 = const 1.0 : fp32[1.5]\n",
            9,
            28,
            "malformed size expression",
        ),
        ("    %0 = % 1\n", 9, 10, "expected a value number after `%`"),
        ("    yield %0,\n", 10, 1, "expected a value"),
    ];
    let mut wrong = Vec::new();
    for (body, line, column, message) in cases {
        let (l, c, m) = error(&with_body(body));
        if (l, c) != (*line, *column) || !m.contains(message) {
            wrong.push(format!(
                "{body:?}: got {l}:{c} {m:?}, want {line}:{column} {message:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // A grid of two extents.
    let text = format!("{HEADER}kernel k() grid [1, 1] threads 32 {{\n}}\n");
    let (l, c, m) = error(&text);
    assert_eq!((l, c, m.as_str()), (8, 17, "a grid has three extents"));
}

#[test]
fn truncated_text_is_an_error_at_its_end() {
    let p = everything();
    let text = print_program(&p);
    // Every proper prefix that ends inside the text is an error or a
    // smaller program, never a panic; those that cut a kernel short are
    // errors.
    let kernel_start = text.find("kernel ").expect("a kernel");
    for (cut, _) in text.char_indices().skip(1) {
        let prefix = &text[..cut];
        match read_program(prefix) {
            Ok(_) => assert!(
                cut < kernel_start || prefix.trim_end().ends_with('}'),
                "{prefix}"
            ),
            Err(e) => assert!(e.line >= 1 && e.column >= 1),
        }
    }
    let cut = &text[..text.len() - 3];
    let e = read_program(cut).expect_err("a kernel without its end");
    assert!(e.message.contains("the end of the text"), "{e}");
}

#[test]
fn mutated_text_never_panics() {
    let text = print_program(&everything());
    let bytes = text.as_bytes();
    for at in (0..bytes.len()).step_by(5) {
        for c in ['%', '-', '(', ')', '9', 'x', ' ', '\n', '}', '/'] {
            let mut mutated = text[..at].to_owned();
            mutated.push(c);
            mutated.push_str(&text[at + 1..]);
            // Errors or not, it must not panic; what reads must print.
            if let Ok(p) = read_program(&mutated) {
                print_program(&p);
            }
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_an_overflow() {
    let mut body = String::from("    %0 = const 0.0 : int64\n");
    for i in 1..200 {
        body.push_str(&format!("    for %{i} = %0 to %0 step %0 carry () {{\n"));
    }
    let text = with_body(&body);
    let (_, _, m) = error(&text);
    assert!(m.contains("nested more than"), "{m}");
    let deep = format!("{}N{}", "(".repeat(500), ")".repeat(500));
    let (_, _, m) = error(&format!(
        "program p {{\n    dims: N\n    input x: fp32[{deep}]\n}}\n"
    ));
    assert!(m.contains("nested more than"), "{m}");
}
