//! The process's allocator: the system's, except that an allocation that
//! fails ends `tsrc` with "out of memory" and what it was working on (exit
//! 1), where Rust's default would abort with a bare message (exit 134).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::OnceLock;

/// What the process is working on, for the out-of-memory message.
static WORK: OnceLock<String> = OnceLock::new();

/// Names what the process works on (the command and its file), once.
pub fn working_on(what: String) {
    let _ = WORK.set(what);
}

/// The system allocator, reporting failure (see the module docs).
pub struct Allocator;

/// Writes the decimal digits of `n` into `buf`, returning them.
fn digits(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cold]
fn out_of_memory(bytes: usize) -> ! {
    // Nothing here allocates: the allocator just failed.
    let mut err = std::io::stderr().lock();
    let mut buf = [0u8; 20];
    let _ = err.write_all(b"error: out of memory (an allocation of ");
    let _ = err.write_all(digits(bytes, &mut buf));
    let _ = err.write_all(b" bytes failed)");
    if let Some(w) = WORK.get() {
        let _ = err.write_all(b" while ");
        let _ = err.write_all(w.as_bytes());
    }
    let _ = err.write_all(b"\n");
    let _ = err.flush();
    std::process::exit(1)
}

// SAFETY: every method forwards to `System`, which upholds the contract;
// a null result (failure) ends the process instead of being returned.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn digits_are_decimal() {
        let mut buf = [0u8; 20];
        assert_eq!(super::digits(0, &mut buf), b"0");
        assert_eq!(super::digits(4294967296, &mut buf), b"4294967296");
        assert_eq!(super::digits(usize::MAX, &mut buf), b"18446744073709551615");
    }
}
