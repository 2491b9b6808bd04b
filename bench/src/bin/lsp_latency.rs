//! Language-server latency on a generated file: the re-check after an edit
//! (compile and index the whole document, what `tsrc lsp` does on every
//! change) and hover requests at many positions (median of RUNS).
//!
//! Usage: `lsp_latency [LINES] [RUNS]` (defaults 5000 and 9).

use std::time::Instant;
use tessera_lsp::analysis::Analysis;

fn main() {
    let mut args = std::env::args().skip(1);
    let lines: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9).max(1);
    let text = tessera_bench::generate_source(lines);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut checks = Vec::new();
    let mut analysis = None;
    for i in 0..runs {
        // An edit: one more space at the end, so every run sees new text.
        let edited = format!("{text}{}", " ".repeat(i));
        let t = Instant::now();
        analysis = Some(Analysis::new("bench.tsr", &edited));
        checks.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let a = analysis.expect("at least one run");
    // Hover at 200 positions spread over the file.
    let step = (text.len() / 200).max(1);
    let mut hovers = Vec::new();
    let mut answered = 0;
    for off in (0..text.len()).step_by(step) {
        let t = Instant::now();
        answered += usize::from(tessera_lsp::hover::hover(&a, off as u32).is_some());
        hovers.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "{} lines: re-check median {:.1} ms over {runs} edits; hover median {:.1} µs, max {:.1} µs over {} positions ({answered} answered)",
        text.lines().count(),
        median(checks),
        median(hovers.clone()),
        hovers.iter().cloned().fold(0.0, f64::max),
        hovers.len()
    );
}
