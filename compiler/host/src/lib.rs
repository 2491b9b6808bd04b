//! Host IR: the host side of a Tessera program (`fn main` and the fns it
//! calls), between the checked AST and Cranelift.
//!
//! [`lower`] builds it from the checked program, [`verify`] checks it,
//! [`print_module`] writes its text form (`tsrc build --emit host`). The
//! code generator (`tessera-jit`) turns it into machine code that calls
//! the runtime at every [`Site`] through the C ABI of [`abi`]. No IO here.

pub mod abi;
pub mod ir;
pub mod lower;
pub mod print;
pub mod verify;

pub use ir::*;
pub use lower::{lower, lower_fns, ExprTypes};
pub use print::print_module;
pub use verify::{verify, VerifyError};
