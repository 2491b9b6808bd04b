//! Offline PTX tooling: find `ptxas`, assemble PTX to a cubin with its resource report, and
//! disassemble cubins to SASS with `cuobjdump`. No GPU needed.
//!
//! The tools come from PyPI wheels that `.ci/install-cuda-tools.sh` installs into
//! `<workspace>/.tools/cuda` (`nvidia-cuda-nvcc-cu12` for `ptxas`, `nvidia-cuda-cuobjdump`).
//! [`find_ptxas`] looks, in order, at `$TESSERA_PTXAS`, that folder, and `PATH`.
//!
//! [`assemble`] parses `ptxas -v`, whose output (on stderr) looks like this:
//!
//! ```text
//! ptxas info    : 0 bytes gmem
//! ptxas info    : Compiling entry function 'smem_kernel' for 'sm_80'
//! ptxas info    : Function properties for smem_kernel
//!     64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 10 registers, used 1 barriers, 64 bytes cumulative stack size, 1024 bytes smem, 360 bytes cmem[0]
//! ptxas info    : Compile time = 7.386 ms
//! ptxas info    : Function properties for helper
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ```
//!
//! Entry functions get a "Compiling entry function" line; device functions (`.func`) only a
//! "Function properties" block.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Resource use of one function, from `ptxas -v`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionResources {
    /// The function's (mangled) name.
    pub name: String,
    /// Whether it is an entry function (a kernel) rather than a `.func`.
    pub is_entry: bool,
    /// Registers per thread (0 for device functions, which ptxas does not report).
    pub registers: u32,
    /// Bytes of spill stores per thread.
    pub spill_stores_bytes: u32,
    /// Bytes of spill loads per thread.
    pub spill_loads_bytes: u32,
    /// Bytes of stack frame per thread.
    pub stack_frame_bytes: u32,
    /// Bytes of statically allocated shared memory per block.
    pub shared_bytes: u32,
    /// Named barriers used.
    pub barriers: u32,
    /// Bytes of constant bank 0 (the kernel parameters live there).
    pub cmem0_bytes: u32,
}

impl FunctionResources {
    /// Whether ptxas spilled registers to local memory.
    pub fn spills(&self) -> bool {
        self.spill_stores_bytes > 0 || self.spill_loads_bytes > 0
    }
}

/// What `ptxas -v` reported for one PTX file, and the cubin it produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// The `-arch` it was assembled for: `sm_80`.
    pub arch: String,
    /// Every function ptxas reported on, entries and device functions, in its order.
    pub functions: Vec<FunctionResources>,
    /// Warnings and performance advisories (`ptxas warning : ...`, `(C7515) ...`), verbatim.
    pub warnings: Vec<String>,
    /// The full `-v` output.
    pub log: String,
    /// The assembled cubin (an ELF file).
    pub cubin: Vec<u8>,
}

impl PtxasReport {
    /// The entry functions (kernels), in ptxas's order.
    pub fn kernels(&self) -> impl Iterator<Item = &FunctionResources> {
        self.functions.iter().filter(|f| f.is_entry)
    }

    /// The entry function called `name`.
    pub fn kernel(&self, name: &str) -> Option<&FunctionResources> {
        self.kernels().find(|f| f.name == name)
    }
}

/// The `ptxas` to use: `$TESSERA_PTXAS` when set (even if it does not exist, so that a wrong
/// setting fails loudly), else the one `.ci/install-cuda-tools.sh` installs under
/// `<workspace>/.tools/cuda`, else `ptxas` on `PATH`.
pub fn find_ptxas() -> Option<PathBuf> {
    find_tool("ptxas", "TESSERA_PTXAS")
}

/// The `cuobjdump` to use, found like [`find_ptxas`] (`$TESSERA_CUOBJDUMP`).
pub fn find_cuobjdump() -> Option<PathBuf> {
    find_tool("cuobjdump", "TESSERA_CUOBJDUMP")
}

/// `<workspace>/.tools/cuda`, where the install script puts the tools.
fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/cuda")
}

fn find_tool(name: &str, env_var: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env_var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    // The workspace this crate was built in, then the working directory
    // and its parents (a build artifact may carry another checkout's path).
    let mut roots = vec![tools_dir()];
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(|d| d.join(".tools/cuda")));
    }
    for root in roots.iter().filter(|r| r.is_dir()) {
        // Where the pinned wheels put them, then anywhere below (another
        // wheel version).
        for known in [
            "nvidia/cuda_nvcc/bin",
            "nvidia/cu13/bin",
            "nvidia/cuda_cuobjdump/bin",
        ] {
            let candidate = root.join(known).join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
        if let Some(found) = find_below(root, name, 6) {
            return Some(found);
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The first file called `name` in a `bin` folder at most `depth` levels below `dir`.
fn find_below(dir: &Path, name: &str, depth: u32) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in &entries {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name)
            && path.is_file()
            && dir.file_name().is_some_and(|d| d == "bin")
        {
            return Some(path);
        }
    }
    if depth == 0 {
        return None;
    }
    entries
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_below(&e.path(), name, depth - 1))
}

/// A temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "tessera-ptxas-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create temporary folder {}: {e}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Assembles `ptx` with `ptxas -v -arch=<arch>` and returns the per-function report and the
/// cubin. The error is ptxas's message (with the temporary file name shown as `<ptx>`), or
/// why ptxas could not be run.
pub fn assemble(ptx: &str, arch: &str) -> Result<PtxasReport, String> {
    assemble_with_options(ptx, arch, &[])
}

/// [`assemble`] with extra ptxas options, such as `-maxrregcount=64` or `-O0`.
pub fn assemble_with_options(
    ptx: &str,
    arch: &str,
    options: &[&str],
) -> Result<PtxasReport, String> {
    if arch.is_empty() || !arch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "invalid ptxas architecture `{arch}` (expected e.g. sm_80)"
        ));
    }
    let ptxas = find_ptxas().ok_or_else(|| {
        "ptxas not found: run .ci/install-cuda-tools.sh, or set TESSERA_PTXAS".to_string()
    })?;
    let dir = TempDir::new()?;
    let input = dir.0.join("kernel.ptx");
    let output = dir.0.join("kernel.cubin");
    std::fs::write(&input, ptx).map_err(|e| format!("cannot write {}: {e}", input.display()))?;
    let result = Command::new(&ptxas)
        .arg("-v")
        .arg(format!("-arch={arch}"))
        .args(options)
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let mut log = String::from_utf8_lossy(&result.stderr).into_owned();
    log.push_str(&String::from_utf8_lossy(&result.stdout));
    let log = log.replace(&*input.to_string_lossy(), "<ptx>");
    if !result.status.success() {
        return Err(format!(
            "ptxas -arch={arch} failed ({}):\n{}",
            result.status,
            log.trim_end()
        ));
    }
    let cubin = std::fs::read(&output)
        .map_err(|e| format!("ptxas wrote no cubin at {}: {e}", output.display()))?;
    let mut report = parse_verbose_output(&log);
    report.arch = arch.to_string();
    report.cubin = cubin;
    Ok(report)
}

/// Disassembles `cubin` to SASS with `cuobjdump -sass`.
pub fn sass(cubin: &[u8]) -> Result<String, String> {
    let cuobjdump = find_cuobjdump().ok_or_else(|| {
        "cuobjdump not found: run .ci/install-cuda-tools.sh, or set TESSERA_CUOBJDUMP".to_string()
    })?;
    let dir = TempDir::new()?;
    let input = dir.0.join("kernel.cubin");
    std::fs::write(&input, cubin).map_err(|e| format!("cannot write {}: {e}", input.display()))?;
    let result = Command::new(&cuobjdump)
        .arg("-sass")
        .arg(&input)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cuobjdump.display()))?;
    if !result.status.success() {
        return Err(format!(
            "cuobjdump -sass failed ({}):\n{}",
            result.status,
            String::from_utf8_lossy(&result.stderr).trim_end()
        ));
    }
    Ok(String::from_utf8_lossy(&result.stdout).into_owned())
}

/// Parses the output of `ptxas -v` (see the module documentation). Lines it does not know
/// are ignored, so newer ptxas versions degrade to missing numbers, not errors.
pub fn parse_verbose_output(log: &str) -> PtxasReport {
    let mut report = PtxasReport {
        log: log.to_string(),
        ..PtxasReport::default()
    };
    // The function the following property lines describe.
    let mut current: Option<usize> = None;
    for line in log.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("ptxas info") {
            let msg = rest.trim_start().trim_start_matches(':').trim();
            if let Some(name) = msg
                .strip_prefix("Compiling entry function '")
                .and_then(|s| s.split('\'').next())
            {
                current = Some(function_index(&mut report, name, true));
            } else if let Some(name) = msg.strip_prefix("Function properties for ") {
                current = Some(function_index(&mut report, name.trim(), false));
            } else if msg.starts_with("Used ") {
                if let Some(i) = current {
                    apply_usage(&mut report.functions[i], msg);
                }
            } else if msg.starts_with("(C") {
                report.warnings.push(trimmed.to_string());
            }
        } else if trimmed.starts_with("ptxas warning") || trimmed.starts_with("ptxas error") {
            report.warnings.push(trimmed.to_string());
        } else if trimmed.contains("bytes stack frame") {
            if let Some(i) = current {
                apply_usage(&mut report.functions[i], trimmed);
            }
        }
    }
    report
}

/// The index of function `name` in the report, added if new.
fn function_index(report: &mut PtxasReport, name: &str, is_entry: bool) -> usize {
    if let Some(i) = report.functions.iter().position(|f| f.name == name) {
        report.functions[i].is_entry |= is_entry;
        return i;
    }
    report.functions.push(FunctionResources {
        name: name.to_string(),
        is_entry,
        ..FunctionResources::default()
    });
    report.functions.len() - 1
}

/// Applies a comma-separated list of "<number> <what>" items to `f`: "Used 10 registers",
/// "used 1 barriers", "1024 bytes smem", "360 bytes cmem[0]", "64 bytes stack frame", ...
fn apply_usage(f: &mut FunctionResources, line: &str) {
    for item in line.split(',') {
        let words: Vec<&str> = item.split_whitespace().collect();
        let Some(pos) = words.iter().position(|w| w.parse::<u64>().is_ok()) else {
            continue;
        };
        let value = words[pos]
            .parse::<u64>()
            .unwrap_or(0)
            .min(u64::from(u32::MAX)) as u32;
        let what = words[pos + 1..].join(" ");
        match what.as_str() {
            "registers" => f.registers = value,
            "barriers" => f.barriers = value,
            "bytes smem" => f.shared_bytes = value,
            "bytes cmem[0]" => f.cmem0_bytes = value,
            "bytes stack frame" => f.stack_frame_bytes = value,
            "bytes spill stores" => f.spill_stores_bytes = value,
            "bytes spill loads" => f.spill_loads_bytes = value,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real `ptxas -v -arch=sm_80 -maxrregcount=24` output (ptxas 12.9) for a file with a
    /// spilling kernel, a kernel using shared memory and a device function.
    const SAMPLE: &str = "\
ptxas info    : Overriding maximum register limit 256 for 'spill_kernel' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spill_kernel' for 'sm_80'
ptxas info    : Function properties for spill_kernel
    96 bytes stack frame, 92 bytes spill stores, 92 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 96 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Compile time = 12.187 ms
ptxas info    : Compiling entry function 'smem_kernel' for 'sm_80'
ptxas info    : Function properties for smem_kernel
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 64 bytes cumulative stack size, 1024 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 7.386 ms
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas warning : Registers are spilled to local memory in function 'spill_kernel', 92 bytes spill stores, 92 bytes spill loads
";

    #[test]
    fn parses_real_verbose_output() {
        let r = parse_verbose_output(SAMPLE);
        assert_eq!(r.functions.len(), 3);
        let spill = r.kernel("spill_kernel").unwrap();
        assert_eq!(
            spill,
            &FunctionResources {
                name: "spill_kernel".into(),
                is_entry: true,
                registers: 24,
                spill_stores_bytes: 92,
                spill_loads_bytes: 92,
                stack_frame_bytes: 96,
                shared_bytes: 0,
                barriers: 0,
                cmem0_bytes: 360,
            }
        );
        assert!(spill.spills());
        let smem = r.kernel("smem_kernel").unwrap();
        assert_eq!(
            (
                smem.registers,
                smem.shared_bytes,
                smem.barriers,
                smem.stack_frame_bytes
            ),
            (10, 1024, 1, 64)
        );
        assert!(!smem.spills());
        assert!(r.kernel("helper").is_none(), "a .func is not a kernel");
        let helper = &r.functions[2];
        assert_eq!((helper.name.as_str(), helper.is_entry), ("helper", false));
        assert_eq!(r.kernels().count(), 2);
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].starts_with("ptxas warning : Registers are spilled"));
    }

    #[test]
    fn unknown_lines_are_ignored() {
        let r = parse_verbose_output(
            "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
             ptxas info    : Used 168 registers, used 16 barriers, 12 textures, 8 bytes smem\n\
             ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async serialized\n\
             something new\n",
        );
        let k = r.kernel("k").unwrap();
        assert_eq!((k.registers, k.barriers, k.shared_bytes), (168, 16, 8));
        assert_eq!(r.warnings.len(), 1);
        assert!(parse_verbose_output("").functions.is_empty());
    }

    #[test]
    fn bad_arch_is_refused() {
        assert!(assemble("", "sm 80; rm")
            .unwrap_err()
            .contains("invalid ptxas architecture"));
        assert!(assemble("", "").is_err());
    }
}
