//! The `extern "C"` functions compiled host code calls
//! (`tessera_host::abi`), and the context they share.
//!
//! A handle is an `Rc` of a host value turned into a raw pointer; 0 is
//! unit.
//! Nothing may unwind across these functions: a panic inside one becomes an
//! internal-error diagnostic and sets the failure flag.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use tessera_cpu::host::{HostValue, MAX_CALL_DEPTH};
use tessera_diagnostics::{codes, Diagnostic};
use tessera_host::abi;

/// Runs the sites of one module; the state behind a [`Ctx`].
pub trait Sites {
    /// Runs site `site` on its argument words and returns its result word.
    fn call(&mut self, site: u32, args: &[i64]) -> Result<i64, Box<Diagnostic>>;
    /// The error for integer overflow or division by zero at `site`.
    fn arith_error(&self, site: u32) -> Box<Diagnostic>;
    /// The error for a host call nesting too deeply at `site`.
    fn depth_error(&self, site: u32) -> Box<Diagnostic>;
}

/// The context compiled host code passes to every runtime call. The
/// failure flag must stay the first field (`abi::FAILED_OFFSET`).
#[repr(C)]
pub struct Ctx {
    /// Nonzero once a call failed.
    pub failed: u8,
    /// Nested host fn calls, `main` included.
    pub depth: u32,
    /// The first error.
    pub error: Option<Box<Diagnostic>>,
    /// The sites (the borrow lives as long as the run; see `run`).
    pub sites: *mut (dyn Sites + 'static),
}

const _: () = assert!(abi::FAILED_OFFSET == 0);

impl Ctx {
    fn fail(&mut self, d: Box<Diagnostic>) {
        if self.error.is_none() {
            self.error = Some(d);
        }
        self.failed = 1;
    }

    /// Runs `f` on the sites, turning errors and panics into the failure
    /// flag.
    fn guard(&mut self, f: impl FnOnce(&mut dyn Sites) -> Result<i64, Box<Diagnostic>>) -> i64 {
        // SAFETY: `run` keeps the sites borrowed for the whole run, and
        // compiled code calls in from one thread, never re-entrantly.
        let sites = unsafe { &mut *self.sites };
        match catch_unwind(AssertUnwindSafe(|| f(sites))) {
            Ok(Ok(word)) => word,
            Ok(Err(d)) => {
                self.fail(d);
                0
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "a panic".into());
                self.fail(Box::new(Diagnostic::error(
                    codes::E0701,
                    Default::default(),
                    format!("internal error in the runtime (this is a bug in tsrc): {msg}"),
                )));
                0
            }
        }
    }
}

thread_local! {
    static LIVE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The object behind a handle. Counts itself in [`live_handles`].
struct Object(HostValue);

impl Drop for Object {
    fn drop(&mut self) {
        LIVE.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Objects behind handles that are still alive on this thread: zero after
/// a run that finished normally, if compiled code releases every
/// reference it takes.
pub fn live_handles() -> usize {
    LIVE.with(|n| n.get())
}

/// Wraps a value as an owned handle.
pub fn into_handle(v: HostValue) -> i64 {
    match v {
        HostValue::Unit => 0,
        v => {
            LIVE.with(|n| n.set(n.get() + 1));
            Rc::into_raw(Rc::new(Object(v))) as i64
        }
    }
}

/// The value behind a handle, borrowed.
///
/// # Safety
/// `h` must be 0 or a live handle made by [`into_handle`].
pub unsafe fn handle_value(h: i64) -> HostValue {
    if h == 0 {
        return HostValue::Unit;
    }
    // SAFETY: per the contract, a live `Rc` made by `into_handle`.
    unsafe { (*(h as *const Object)).0.clone() }
}

/// The value behind handle `h`, borrowed (no copy); `None` for the unit
/// handle.
///
/// # Safety
/// `h` is 0 or a live handle made by `into_handle`, alive for `'a`.
pub unsafe fn handle_ref<'a>(h: i64) -> Option<&'a HostValue> {
    if h == 0 {
        return None;
    }
    // SAFETY: per the contract, a live `Rc` made by `into_handle`.
    Some(unsafe { &(*(h as *const Object)).0 })
}

/// See `tessera_host::abi`.
///
/// # Safety
/// Called by compiled host code only, with the context it was given and
/// handles it owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_call(ctx: *mut Ctx, site: u32, args: *const i64, n: u32) -> i64 {
    // SAFETY: compiled code passes its context and `n` words on its stack.
    let (ctx, args) = unsafe { (&mut *ctx, std::slice::from_raw_parts(args, n as usize)) };
    ctx.guard(|s| s.call(site, args))
}

/// See `tessera_host::abi`.
///
/// # Safety
/// Called by compiled host code only, with the context it was given and
/// handles it owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_retain(h: i64) {
    if h != 0 {
        // SAFETY: compiled code only retains live handles.
        unsafe { Rc::increment_strong_count(h as *const Object) };
    }
}

/// See `tessera_host::abi`.
///
/// # Safety
/// Called by compiled host code only, with the context it was given and
/// handles it owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_release(h: i64) {
    if h != 0 {
        // SAFETY: compiled code releases each reference it owns once.
        unsafe { Rc::decrement_strong_count(h as *const Object) };
    }
}

/// See `tessera_host::abi`.
///
/// # Safety
/// Called by compiled host code only, with the context it was given and
/// handles it owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_fail(ctx: *mut Ctx, site: u32) {
    // SAFETY: compiled code passes its context.
    let ctx = unsafe { &mut *ctx };
    ctx.guard(|s| Err(s.arith_error(site)));
}

/// See `tessera_host::abi`.
///
/// # Safety
/// Called by compiled host code only, with the context it was given and
/// handles it owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_enter(ctx: *mut Ctx, site: u32) {
    // SAFETY: compiled code passes its context.
    let ctx = unsafe { &mut *ctx };
    if ctx.depth as usize >= MAX_CALL_DEPTH {
        ctx.guard(|s| Err(s.depth_error(site)));
    } else {
        ctx.depth += 1;
    }
}

/// See `tessera_host::abi`.
///
/// # Safety
/// Called by compiled host code only, with the context it was given and
/// handles it owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_leave(ctx: *mut Ctx) {
    // SAFETY: compiled code passes its context.
    let ctx = unsafe { &mut *ctx };
    ctx.depth = ctx.depth.saturating_sub(1);
}

/// See `tessera_host::abi`.
#[no_mangle]
pub extern "C" fn tsr_fmod(a: f64, b: f64) -> f64 {
    a % b
}

/// See `tessera_host::abi`.
#[no_mangle]
pub extern "C" fn tsr_pow(a: f64, b: f64) -> f64 {
    a.powf(b)
}

/// The address of every runtime function compiled code imports, by name.
pub fn symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        (abi::CALL, tsr_call as *const u8),
        (abi::RETAIN, tsr_retain as *const u8),
        (abi::RELEASE, tsr_release as *const u8),
        (abi::FAIL, tsr_fail as *const u8),
        (abi::ENTER, tsr_enter as *const u8),
        (abi::LEAVE, tsr_leave as *const u8),
        (abi::FMOD, tsr_fmod as *const u8),
        (abi::POW, tsr_pow as *const u8),
    ]
}
