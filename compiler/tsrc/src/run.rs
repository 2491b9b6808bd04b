//! `tsrc run`: runs `fn main`, or one op on `.npy` inputs (`--entry`),
//! on the CPU backend or a GPU device.

use std::path::Path;
use std::process::ExitCode;
use tessera_cpu::kernels::run_graph;
use tessera_driver::diagnostics::{render_all, Diagnostic, RenderOptions};
use tessera_driver::graph::{Arg, Callable};
use tessera_driver::syntax::ast;
use tessera_driver::Compilation;
use tessera_driver::{Entry, Pipeline};
use tessera_tensor::{read_npy_file, write_npy_file, Tensor};

fn render(c: &Compilation, d: &Diagnostic, options: RenderOptions) -> ExitCode {
    eprint!(
        "{}",
        render_all(&c.sources, std::slice::from_ref(d), options)
    );
    ExitCode::from(1)
}

fn error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

/// A command line that does not fit the program (an entry or input it
/// lacks, an input left out): exit status 2, as clap's own usage errors.
fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// Compiles `fn main` with Cranelift and runs it, printing to standard
/// output; op calls run on `device`, or on the CPU backend.
pub fn main_fn(
    c: &Compilation,
    device: Option<tessera_launch::Device<'_>>,
    cache: &tessera_launch::KernelCache,
    profile: Option<Option<&Path>>,
    options: RenderOptions,
) -> ExitCode {
    let host = match c.host_module() {
        Ok(h) => h,
        Err(d) => return render(c, &d, options),
    };
    let program = c.program().expect("the program was checked");
    let locate = |s| c.locate(s);
    let db = crate::tune::database();
    let mut on_device = device.map(|dev| tessera_exec::DeviceRunner {
        dev,
        locate: Some(&locate),
        cache: Some(cache),
        tunings: Some(&db),
    });
    let mut profiling = profile.map(|_| {
        tessera_exec::profile::ProfilingRunner::new(device, Some(&locate), Some(cache), Some(&db))
    });
    let runner = match &mut profiling {
        Some(p) => Some(p as &mut dyn tessera_cpu::host::GraphRunner),
        None => on_device
            .as_mut()
            .map(|r| r as &mut dyn tessera_cpu::host::GraphRunner),
    };
    let mut out = tessera_exec::CheckedStdout::new();
    let code = match tessera_exec::run_main(&program, &host, runner, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(d) => render(c, &d, options),
    };
    let code = crate::delivered(out, code);
    match (&profiling, profile) {
        (Some(p), Some(trace)) => report_profile(&p.profile, trace, code),
        _ => code,
    }
}

/// Prints the profile and writes its trace, if asked for.
fn report_profile(
    p: &tessera_exec::profile::Profile,
    trace: Option<&Path>,
    code: ExitCode,
) -> ExitCode {
    match tessera_exec::profile::report(p, trace) {
        Ok(()) => code,
        Err(e) => error(e),
    }
}

/// Runs op or kernel `name` on the `NAME=PATH` inputs and writes its
/// results: `out.npy`, or `NAME.npy` for each `out` parameter of a kernel
/// with several, or `out0.npy`, `out1.npy`, ... for an op's several
/// results.
#[allow(clippy::too_many_arguments)]
pub fn entry(
    c: &Compilation,
    name: &str,
    inputs: &[String],
    output: &Path,
    device: Option<tessera_launch::Device<'_>>,
    cache: &tessera_launch::KernelCache,
    profile: Option<Option<&Path>>,
    options: RenderOptions,
) -> ExitCode {
    let program = c.program().expect("the program was checked");
    // A kernel's inputs are its parameters but the `out` ones, which are
    // allocated from the dimensions the inputs bind.
    let (params, is_kernel): (Vec<&ast::Param>, bool) = match program.lookup(name) {
        Some(Callable::Op(op, None)) if op.body.is_some() => (op.params.iter().collect(), false),
        Some(Callable::Kernel(k)) => (k.params.iter().filter(|p| p.is_input()).collect(), true),
        Some(_) | None => {
            let ops: Vec<&str> = program
                .user_ops()
                .iter()
                .map(|o| o.name.text.as_str())
                .collect();
            let kernels = program.user_kernels();
            let list = |names: &[&str]| {
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            };
            return usage(format!(
                "no op or kernel named `{name}` in this file (its ops: {}; its kernels: {})",
                list(&ops),
                list(&kernels)
            ));
        }
    };
    // The files the results go to: `out.npy` for one, the `out`
    // parameters' names for several.
    let names: Vec<String> = match program.lookup(name) {
        Some(Callable::Kernel(k)) if k.params.iter().filter(|p| p.is_output()).count() > 1 => k
            .params
            .iter()
            .filter(|p| p.is_output())
            .map(|p| p.name.text.clone())
            .collect(),
        // An op with several results: `out0.npy`, `out1.npy`, ...
        Some(Callable::Op(op, _)) => match op.ret.as_ref().map(|t| &t.kind) {
            Some(ast::TypeKind::Tuple(parts)) => {
                (0..parts.len()).map(|i| format!("out{i}")).collect()
            }
            _ => vec!["out".to_owned()],
        },
        _ => vec!["out".to_owned()],
    };
    if names.len() > 1 && is_npy_file(output) {
        eprintln!(
            "error: `--output {}` is one file, but `{name}` has {} outputs ({}): pass a directory",
            output.display(),
            names.len(),
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    // An op's `bool` parameter is an attribute; a kernel's is a run-time
    // scalar, given as a 0-d `.npy` like `n: int32`.
    let attribute = |p: &ast::Param| {
        p.ty.is_attribute() && !(is_kernel && matches!(p.ty.kind, ast::TypeKind::Tensor { .. }))
    };
    let mut given: Vec<(&str, &str)> = Vec::new();
    for spec in inputs {
        let Some((n, path)) = spec.split_once('=') else {
            eprintln!("error: `--input {spec}` must be NAME=PATH.npy");
            return ExitCode::from(2);
        };
        if given.iter().any(|(m, _)| *m == n) {
            eprintln!("error: `--input {n}=...` is given twice");
            return ExitCode::from(2);
        }
        given.push((n, path));
    }
    for (n, _) in &given {
        if let Some(p) = params.iter().find(|p| p.name.text == *n && attribute(p)) {
            return usage(format!(
                "`{n}` is an attribute of `{name}`, not an input: an entry runs with its default{}, or the value `--const {n}=VALUE` gives",
                p.default
                    .as_ref()
                    .and_then(Arg::of_literal)
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default()
            ));
        }
        if !params.iter().any(|p| p.name.text == *n) {
            let names: Vec<&str> = params.iter().map(|p| p.name.text.as_str()).collect();
            return usage(format!(
                "`{name}` has no parameter `{n}` (its parameters: {})",
                names.join(", ")
            ));
        }
    }
    let mut tensors = Vec::new();
    let mut args = Vec::new();
    for p in &params {
        if attribute(p) {
            // Attributes (`axis: int = -1`) take their defaults.
            match p.default.as_ref().map(|d| Arg::of_literal(d).unwrap_or(Arg::Default)) {
                Some(a) => {
                    args.push(a);
                    continue;
                }
                None => {
                    return usage(format!(
                        "attribute `{}` of `{name}` has no default, and an entry takes only tensors: set it with `--const {}=VALUE` (or `{name}.{}=VALUE`), or give it a default (`{}: {} = ...`)",
                        p.name.text,
                        p.name.text,
                        p.name.text,
                        p.name.text,
                        describe_attribute(&p.ty)
                    ))
                }
            }
        }
        let ast::TypeKind::Tensor { elem, dims, .. } = &p.ty.kind else {
            return error(format!(
                "parameter `{}` of `{name}` is not a tensor; only ops whose parameters are all tensors can be entries",
                p.name.text
            ));
        };
        let default_scalar = match (elem, &p.default) {
            (ast::ElemType::Dtype(d, _), Some(e)) if dims.is_empty() => e
                .kind
                .literal_number()
                .map(|x| tessera_tensor::Tensor::scalar(*d, x)),
            _ => None,
        };
        let given_path = given.iter().find(|(n, _)| *n == p.name.text);
        if let (None, Some(t)) = (given_path, default_scalar) {
            // A scalar left out takes its default (`s: fp32 = 1.0`).
            args.push(Arg::Type(tessera_cpu::tensor_type(&t)));
            tensors.push(t);
            continue;
        }
        let Some((_, path)) = given_path else {
            return usage(format!(
                "missing input for parameter `{}` of `{name}`: pass `--input {}=PATH.npy`",
                p.name.text, p.name.text
            ));
        };
        let array = match read_npy_file(path) {
            Ok(a) => a,
            Err(e) => return error(format!("input `{}`: {e}", p.name.text)),
        };
        // Every dimension of a tensor is at least 1 (E0207): an empty
        // axis would reduce to nothing (an argmax of no element).
        if array.tensor.shape.contains(&0) {
            return error(format!(
                "[E0207] input `{}` ({} {:?}) has a dimension of size 0: every dimension of a tensor is at least 1",
                p.name.text, array.tensor.dtype, array.tensor.shape
            ));
        }
        // A file of another rank is described as it is, before any
        // conversion to the parameter's dtype.
        let packs = dims.iter().any(|d| matches!(d.kind, ast::DimKind::Pack(_)));
        if !packs && array.tensor.shape.len() != dims.len() {
            return error(format!(
                "input `{}` ({} {:?}) has rank {}; parameter `{}` of `{name}` is `{}`, of rank {}",
                p.name.text,
                array.tensor.dtype,
                array.tensor.shape,
                array.tensor.shape.len(),
                p.name.text,
                tessera_driver::syntax::printer::type_text(&p.ty),
                dims.len()
            ));
        }
        let t = match elem {
            ast::ElemType::Dtype(d, _) => match array.tensor.convert_exact(*d) {
                Ok(t) => t,
                Err(why) => {
                    return error(format!(
                        "input `{}` ({} {:?}) {why}",
                        p.name.text, array.tensor.dtype, array.tensor.shape
                    ))
                }
            },
            ast::ElemType::Var(_) => array.tensor,
        };
        args.push(Arg::Type(tessera_cpu::tensor_type(&t)));
        tensors.push(t);
    }
    let built = if is_kernel {
        let types: Vec<_> = tensors.iter().map(tessera_cpu::tensor_type).collect();
        Pipeline::new(&program, tessera_cpu::kernels::CPU_SCHEDULE_ARCH)
            .graph(Entry::Kernel(name, Some(&types)))
            .map(|(g, _)| g)
    } else {
        Pipeline::new(&program, tessera_cpu::kernels::CPU_SCHEDULE_ARCH)
            .graph(Entry::Op(name, Some(&args)))
            .map(|(g, _)| g)
    };
    let g = match built {
        Ok(g) => g,
        Err(d) => return render(c, &d, options),
    };
    let db = crate::tune::database();
    let locate = |s| c.locate(s);
    if let Some(trace) = profile {
        let mut runner = tessera_exec::profile::ProfilingRunner::new(
            device,
            Some(&locate),
            Some(cache),
            Some(&db),
        );
        use tessera_cpu::host::GraphRunner;
        let results = match runner.run(&program, &g, &tensors) {
            Ok(r) => r,
            Err(d) => return render(c, &d, options),
        };
        let code = write_results(output, &names, &results);
        return report_profile(&runner.profile, trace, code);
    }
    let results = match device {
        None => run_graph(&program, &g, &tensors, None),
        Some(dev) => tessera_cpu::kernels::compile_graph_at(
            &program,
            &g,
            (dev.target(), Some(&db)),
            &tensors.iter().map(|t| &t.shape[..]).collect::<Vec<_>>(),
        )
        .and_then(|p| {
            tessera_launch::run_program_cached(
                dev,
                &p,
                &tensors,
                Some(&|s| c.locate(s)),
                Some(cache),
            )
            .map_err(|e| {
                tessera_driver::pipeline::run_error(
                    &g,
                    e.message,
                    e.span,
                    tessera_exec::running(Some(dev)),
                )
            })
        }),
    };
    let results = match results {
        Ok(r) => r,
        Err(d) => return render(c, &d, options),
    };
    write_results(output, &names, &results)
}

/// Whether `--output PATH` names a `.npy` file rather than a directory.
fn is_npy_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "npy") && !path.is_dir()
}

/// Writes `results`, one per name, as `DIR/NAME.npy`, or the one result to
/// `dir` itself when it names a `.npy` file.
fn write_results(dir: &Path, names: &[String], results: &[Tensor]) -> ExitCode {
    if results.len() != names.len() {
        return error(format!(
            "internal error: {} results for {} outputs (this is a bug in tsrc)",
            results.len(),
            names.len()
        ));
    }
    // `--output r.npy`: the one result, in that file.
    if is_npy_file(dir) {
        let [t] = results else {
            return error(format!(
                "the entry has {} results: `--output` must be a directory for them",
                results.len()
            ));
        };
        if let Err(e) = write_npy_file(dir, t) {
            return error(format!("cannot write `{}`: {e}", dir.display()));
        }
        eprintln!("wrote {} ({} {:?})", dir.display(), t.dtype, t.shape);
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        return error(format!("cannot create `{}`: {e}", dir.display()));
    }
    for (name, t) in names.iter().zip(results) {
        let path = dir.join(format!("{name}.npy"));
        if let Err(e) = write_npy_file(&path, t) {
            return error(format!("cannot write `{}`: {e}", path.display()));
        }
        eprintln!("wrote {} ({} {:?})", path.display(), t.dtype, t.shape);
    }
    ExitCode::SUCCESS
}

/// The type of an attribute as written: `int`, `float` or `bool`.
fn describe_attribute(t: &ast::Type) -> &'static str {
    match t.kind {
        ast::TypeKind::Int => "int",
        ast::TypeKind::Float => "float",
        _ => "bool",
    }
}
