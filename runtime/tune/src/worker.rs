//! Measuring in a child process, one failure domain per worker: a
//! configuration that traps, faults or hangs on the GPU leaves a CUDA
//! context that fails every later call (a sticky error), so the tuner
//! times configurations in a worker process (`tsrc tune --worker`) and
//! starts a fresh one after a failure. The parent keeps a wall-clock limit
//! per configuration and kills a worker that exceeds it.
//!
//! The protocol is one line each way. The parent writes a configuration's
//! knobs in [`tessera_core::Knobs::to_text`]'s form; the worker answers
//! with one JSON [`Reply`]. On start the worker compiles the program, runs
//! the untuned configuration for the reference outputs and answers
//! [`Reply::Ready`] (or [`Reply::Fatal`]) before reading anything. After
//! a configuration that fails to load or run, it answers and exits.

use crate::{lower, measure::Measurer, Options, Pick};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_graph::{Graph, Program};
use tessera_schedule::{Choice, ConfigSource};
use tessera_tile::TileProgram;

/// Times configurations for [`crate::tune`].
pub trait Timer {
    /// Prepares to time (for a worker: starts it and waits for its
    /// reference outputs); an error stops the tuning of this op.
    fn start(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// The median milliseconds of configuration `c`, lowered to `tile`, or
    /// why it is rejected.
    fn time(&mut self, c: &Choice, tile: &TileProgram) -> Result<f64, String>;
}

impl Timer for Measurer<'_> {
    fn time(&mut self, _: &Choice, tile: &TileProgram) -> Result<f64, String> {
        Measurer::time(self, tile)
    }
}

/// One line from a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Started: the reference outputs are ready. `key` is the tuning
    /// database key of the graph it measures, which the parent checks.
    Ready {
        /// [`crate::db::key`] of the worker's graph.
        key: String,
    },
    /// The median milliseconds of the configuration asked.
    Time {
        /// Milliseconds.
        ms: f64,
    },
    /// The configuration is rejected, with why.
    Rejected {
        /// Why.
        reason: String,
        /// Whether the worker exits after this reply (it failed on the
        /// GPU, whose context may be unusable now).
        exits: bool,
    },
    /// The worker cannot measure anything (no GPU, the untuned
    /// configuration fails, a request it cannot read); it exits.
    Fatal {
        /// Why.
        reason: String,
    },
}

impl Reply {
    fn line(&self) -> String {
        // A reply of strings and numbers always serialises.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// Runs the worker's side of the protocol for graph `g` on `gpu`: answers
/// [`Reply::Ready`], then one reply per configuration read from `input`,
/// until `input` ends or a configuration fails on the GPU (the context
/// may then be unusable: the parent starts a fresh worker).
pub fn serve(
    program: &Program<'_>,
    g: &Graph,
    gpu: &tessera_launch::Gpu,
    opts: &Options,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), String> {
    let mut say = |r: Reply| -> Result<(), String> {
        writeln!(output, "{}", r.line())
            .and_then(|_| output.flush())
            .map_err(|e| format!("cannot answer the tuner: {e}"))
    };
    let reference = match crate::reference(program, g, opts.arch) {
        Ok((r, _)) => r,
        Err(reason) => return say(Reply::Fatal { reason }),
    };
    let mut measurer = match Measurer::new(gpu, program, g, &reference.tile, opts) {
        Ok(m) => m,
        Err(reason) => return say(Reply::Fatal { reason }),
    };
    say(Reply::Ready {
        key: crate::db::key(g, opts.arch),
    })?;
    for line in input.lines() {
        let line = line.map_err(|e| format!("cannot read the tuner's request: {e}"))?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let knobs = match tessera_core::Knobs::parse(line) {
            Ok(k) => k,
            Err(e) => {
                return say(Reply::Fatal {
                    reason: format!("a request that is not a configuration: {e}"),
                })
            }
        };
        let choice = Choice {
            knobs,
            source: ConfigSource::Tuned(line.to_owned()),
            tensor_cores_at: None,
        };
        let reply = match lower(program, g, opts.arch, Pick::Choice(&choice)) {
            Err(reason) => Reply::Rejected {
                reason,
                exits: false,
            },
            Ok(l) => match measurer.time(&l.tile) {
                Ok(ms) => Reply::Time { ms },
                Err(reason) => Reply::Rejected {
                    reason,
                    exits: measurer.failed(),
                },
            },
        };
        say(reply)?;
        if measurer.failed() {
            return Ok(());
        }
    }
    Ok(())
}

/// A running worker.
struct Running {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// What it wrote on standard error (the last few KiB).
    stderr: Arc<Mutex<String>>,
}

impl Running {
    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The worker's last line on standard error, for a reason.
    fn last_words(&self) -> String {
        // Give the reader thread a moment to take what the worker wrote
        // before it ended.
        std::thread::sleep(Duration::from_millis(50));
        let text = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        match text.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(l) => format!(": {}", l.trim()),
            None => String::new(),
        }
    }
}

/// How long a worker may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// To start: compile the program and run the untuned configuration.
    pub start: Duration,
    /// To lower, load and time one configuration.
    pub config: Duration,
}

impl Limits {
    /// Limits for `opts`: each run may take `timeout_ms`, with a minute
    /// on top for compiling and loading.
    pub fn for_options(opts: &Options) -> Limits {
        let runs = (2 + opts.warmup + opts.reps.max(1)) as f64;
        Limits {
            start: Duration::from_secs(180),
            config: Duration::from_secs_f64(opts.timeout_ms * runs / 1000.0 + 60.0),
        }
    }
}

/// A [`Timer`] that measures in worker processes: `spawn` gives the
/// command that starts one (`tsrc tune FILE --worker N ...`). A worker
/// that dies or overruns its limit rejects the configuration it was
/// timing, and the next configuration gets a fresh worker.
pub struct Isolated {
    spawn: Box<dyn FnMut() -> Command>,
    key: String,
    limits: Limits,
    running: Option<Running>,
    /// Workers started, the first included.
    pub started: usize,
}

impl Isolated {
    /// Measures through workers started by `spawn`, for the graph whose
    /// database key is `key`.
    pub fn new(spawn: Box<dyn FnMut() -> Command>, key: String, limits: Limits) -> Isolated {
        Isolated {
            spawn,
            key,
            limits,
            running: None,
            started: 0,
        }
    }

    fn launch(&mut self) -> Result<Running, String> {
        let mut cmd = (self.spawn)();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start a measuring process: {e}"))?;
        self.started += 1;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("a measuring process without pipes".into());
                }
            };
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if s.len() > 8192 {
                        let cut = s.len() - 4096;
                        let cut = (cut..s.len())
                            .find(|&i| s.is_char_boundary(i))
                            .unwrap_or(s.len());
                        s.drain(..cut);
                    }
                }
            }
        });
        Ok(Running {
            child,
            stdin,
            lines,
            stderr: log,
        })
    }

    /// The next reply of `w` within `limit`, or why there is none (the
    /// worker is then stopped).
    fn reply(w: Running, limit: Duration, doing: &str) -> Result<(Reply, Running), String> {
        match w.lines.recv_timeout(limit) {
            Ok(line) => match serde_json::from_str::<Reply>(&line) {
                Ok(r) => Ok((r, w)),
                Err(_) => {
                    let why = format!("the measuring process wrote `{line}` while {doing}");
                    w.stop();
                    Err(why)
                }
            },
            Err(RecvTimeoutError::Timeout) => {
                w.stop();
                Err(format!(
                    "timed out: no answer within {} s while {doing}; the measuring process was stopped",
                    limit.as_secs()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let words = w.last_words();
                let status = match { w }.child.wait() {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                };
                Err(format!(
                    "the measuring process died while {doing} ({status}){words}"
                ))
            }
        }
    }

    /// A ready worker: the running one, or a fresh one.
    fn worker(&mut self) -> Result<Running, String> {
        if let Some(w) = self.running.take() {
            return Ok(w);
        }
        let w = self.launch()?;
        match Self::reply(w, self.limits.start, "starting")? {
            (Reply::Ready { key }, w) if key == self.key => Ok(w),
            (Reply::Ready { key }, w) => {
                w.stop();
                Err(format!(
                    "the measuring process tunes `{key}`, not `{}`",
                    self.key
                ))
            }
            (Reply::Fatal { reason }, w) => {
                w.stop();
                Err(reason)
            }
            (other, w) => {
                w.stop();
                Err(format!(
                    "the measuring process answered {other:?} before it was ready"
                ))
            }
        }
    }
}

impl Timer for Isolated {
    fn start(&mut self) -> Result<(), String> {
        let w = self.worker()?;
        self.running = Some(w);
        Ok(())
    }

    fn time(&mut self, c: &Choice, _: &TileProgram) -> Result<f64, String> {
        self.time_config(&c.knobs.to_text())
    }
}

impl Isolated {
    /// The median milliseconds of the configuration whose knobs' text is
    /// `config`, timed by the running worker or a fresh one.
    pub fn time_config(&mut self, config: &str) -> Result<f64, String> {
        let mut w = self
            .worker()
            .map_err(|e| format!("no measuring process: {e}"))?;
        if let Err(e) = writeln!(w.stdin, "{config}").and_then(|_| w.stdin.flush()) {
            let words = w.last_words();
            w.stop();
            return Err(format!(
                "the measuring process stopped reading ({e}){words}"
            ));
        }
        let (reply, w) = Self::reply(w, self.limits.config, "timing this configuration")?;
        match reply {
            Reply::Time { ms } => {
                self.running = Some(w);
                Ok(ms)
            }
            Reply::Rejected { reason, exits } => {
                // A worker that failed on the GPU exits after answering;
                // one that rejected for other reasons keeps going.
                match exits {
                    true => w.stop(),
                    false => self.running = Some(w),
                }
                Err(reason)
            }
            Reply::Fatal { reason } => {
                w.stop();
                Err(reason)
            }
            Reply::Ready { .. } => {
                w.stop();
                Err("the measuring process answered `ready` to a configuration".into())
            }
        }
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        if let Some(w) = self.running.take() {
            // Closing its input ends a worker between configurations.
            drop(w.stdin);
            let mut child = w.child;
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in worker: a shell script speaking the protocol, which
    /// times `fast`, dies on `die`, hangs on `hang` and fails on the GPU
    /// (and exits) on `trap`.
    fn fake(start: &'static str) -> Box<dyn FnMut() -> Command> {
        let script = format!(
            r#"{start}
while read -r line; do
  case "$line" in
    die) echo "worker: fault" >&2; exit 3 ;;
    hang) exec sleep 100 ;;
    trap) echo '{{"rejected":{{"reason":"does not run: trap","exits":true}}}}'; exit 0 ;;
    slow) echo '{{"rejected":{{"reason":"timed out: 9 ms","exits":false}}}}' ;;
    *) echo '{{"time":{{"ms":1.5}}}}' ;;
  esac
done"#
        );
        Box::new(move || {
            let mut c = Command::new("sh");
            c.arg("-c").arg(&script);
            c
        })
    }

    const READY: &str = r#"echo '{"ready":{"key":"K"}}'"#;

    fn limits() -> Limits {
        Limits {
            start: Duration::from_secs(20),
            config: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_worker_that_dies_or_hangs_rejects_its_configuration_and_is_replaced() {
        let mut t = Isolated::new(fake(READY), "K".into(), limits());
        t.start().unwrap();
        assert_eq!(t.time_config("fast"), Ok(1.5));
        assert_eq!(t.time_config("fast"), Ok(1.5));
        assert_eq!(t.started, 1, "one worker times configurations in turn");
        let died = t.time_config("die").unwrap_err();
        assert!(
            died.contains("died") && died.contains("worker: fault"),
            "{died}"
        );
        assert_eq!(t.time_config("fast"), Ok(1.5));
        assert_eq!(t.started, 2);
        let hung = t.time_config("hang").unwrap_err();
        assert!(hung.starts_with("timed out"), "{hung}");
        assert_eq!(t.time_config("fast"), Ok(1.5));
        assert_eq!(t.started, 3);
        // A failure on the GPU: the worker says it exits, and the next
        // configuration gets a fresh one rather than a broken pipe.
        assert_eq!(t.time_config("trap"), Err("does not run: trap".to_string()));
        assert_eq!(t.time_config("fast"), Ok(1.5));
        assert_eq!(t.started, 4);
        // Rejected for being slow: the same worker goes on.
        assert!(t.time_config("slow").is_err());
        assert_eq!(t.time_config("fast"), Ok(1.5));
        assert_eq!(t.started, 4);
    }

    #[test]
    fn a_worker_that_cannot_start_stops_the_tuning_with_its_reason() {
        let fatal =
            r#"echo '{"fatal":{"reason":"the untuned configuration does not run: x"}}'; exit 1"#;
        let mut t = Isolated::new(fake(fatal), "K".into(), limits());
        assert_eq!(
            t.start(),
            Err("the untuned configuration does not run: x".to_string())
        );
        let mut t = Isolated::new(fake(READY), "other".into(), limits());
        assert!(t.start().unwrap_err().contains("tunes `K`, not `other`"));
        let mut t = Isolated::new(fake("echo hello"), "K".into(), limits());
        assert!(t.start().unwrap_err().contains("wrote `hello`"));
        let mut t = Isolated::new(fake("exit 5"), "K".into(), limits());
        assert!(t.start().unwrap_err().contains("died while starting"));
        let missing: Box<dyn FnMut() -> Command> =
            Box::new(|| Command::new("/nonexistent/tessera-worker"));
        let mut t = Isolated::new(missing, "K".into(), limits());
        assert!(t.start().unwrap_err().starts_with("cannot start"));
        assert!(t
            .time_config("fast")
            .unwrap_err()
            .starts_with("no measuring process"));
    }

    #[test]
    fn replies_read_back_as_written() {
        for r in [
            Reply::Ready { key: "k".into() },
            Reply::Time { ms: 0.25 },
            Reply::Rejected {
                reason: "wrong results".into(),
                exits: false,
            },
            Reply::Fatal {
                reason: "no GPU".into(),
            },
        ] {
            assert_eq!(serde_json::from_str::<Reply>(&r.line()).unwrap(), r);
        }
    }
}
