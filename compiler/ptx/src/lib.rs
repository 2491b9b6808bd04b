//! Target IR: per-architecture, thread-level, PTX-shaped code; its
//! verifier; the PTX printer; and the lowering from Tile IR.

pub mod expand;
pub mod fold;
pub mod hoist;
pub mod induction;
pub mod ir;
pub mod lower;
pub mod opt;
pub mod print;
pub mod read;
pub mod verify;

pub use ir::{Module, ASSERT_COMMENT};
pub use lower::{emit_ptx, locate, lower_program, LowerError};
pub use print::print_module;
pub use read::{read_module, ReadError};
