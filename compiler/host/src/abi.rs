//! The runtime's C ABI as compiled host code sees it: the functions it
//! imports and the layout of the context it is given.
//!
//! Every compiled host function takes the context pointer first. The
//! runtime sets the byte at offset [`FAILED_OFFSET`] of the context when a
//! call fails; compiled code checks it after every call that may fail and
//! returns at once.

/// `tsr_call(ctx, site, args, n) -> i64`: runs site `site` on `n` argument
/// words (ints, float bits, booleans 0/1, handles) and returns its result
/// word (0 for unit).
pub const CALL: &str = "tsr_call";
/// `tsr_retain(handle)`: takes another reference.
pub const RETAIN: &str = "tsr_retain";
/// `tsr_release(handle)`: gives up a reference (0 is ignored).
pub const RELEASE: &str = "tsr_release";
/// `tsr_fail(ctx, site)`: integer overflow or division by zero at a site.
pub const FAIL: &str = "tsr_fail";
/// `tsr_enter(ctx, site)`: a host fn call begins (depth limit).
pub const ENTER: &str = "tsr_enter";
/// `tsr_leave(ctx)`: a host fn call returned.
pub const LEAVE: &str = "tsr_leave";
/// `tsr_fmod(a, b) -> f64`: the float remainder with the sign of a.
pub const FMOD: &str = "tsr_fmod";
/// `tsr_pow(a, b) -> f64`: a to the power b.
pub const POW: &str = "tsr_pow";

/// Every imported symbol.
pub const IMPORTS: &[&str] = &[CALL, RETAIN, RELEASE, FAIL, ENTER, LEAVE, FMOD, POW];

/// The symbol of the compiled `fn main`: `void tessera_main(ctx *)`.
pub const ENTRY: &str = "tessera_main";

/// Where the failure flag (one byte, nonzero once a call failed) lies in
/// the context.
pub const FAILED_OFFSET: i32 = 0;
