//! Standard output that remembers its first write error, so that a program
//! whose output is lost (a full disk, a closed terminal) does not end with
//! exit status 0, and a closed pipe (`tsrc explain | head -1`) ends
//! quietly instead of panicking.

use std::io::{self, ErrorKind, StdoutLock, Write};

/// A locked standard output that records the first write error.
pub struct CheckedStdout {
    inner: StdoutLock<'static>,
    error: Option<io::Error>,
}

/// How a run's output went, once flushed.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivered {
    /// Everything was written.
    All,
    /// The reader went away (a closed pipe): nothing to report.
    ReaderGone,
    /// A write failed for another reason: the message says why.
    Failed(String),
}

impl CheckedStdout {
    /// Standard output, locked for the caller.
    pub fn new() -> CheckedStdout {
        CheckedStdout {
            inner: io::stdout().lock(),
            error: None,
        }
    }

    fn note<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if self.error.is_none() {
                self.error = Some(io::Error::new(e.kind(), e.to_string()));
            }
        }
        r
    }

    /// Flushes and says whether everything written arrived.
    pub fn finish(mut self) -> Delivered {
        let r = self.inner.flush();
        let _ = self.note(r);
        match self.error {
            None => Delivered::All,
            Some(e) if e.kind() == ErrorKind::BrokenPipe => Delivered::ReaderGone,
            Some(e) => Delivered::Failed(format!("cannot write to standard output: {e}")),
        }
    }
}

impl Default for CheckedStdout {
    fn default() -> CheckedStdout {
        CheckedStdout::new()
    }
}

impl Write for CheckedStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.error.is_some() {
            // The first failure is the one reported; later writes go nowhere.
            return Ok(buf.len());
        }
        let r = self.inner.write(buf);
        self.note(r)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        let r = self.inner.flush();
        self.note(r)
    }
}
