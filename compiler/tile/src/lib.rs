//! Tile IR: one block program per kernel (see [`ir`]), built with
//! [`build::KernelBuilder`], checked by [`verify()`](verify::verify), printed
//! by [`print`](mod@print), read back from that text by [`read_program`],
//! lowered from the Schedule IR by [`lower()`](lower::lower), and
//! specialised to bound sizes by [`specialise()`] with the value ranges of
//! [`facts`].

pub mod bind;
pub mod build;
pub mod facts;
pub mod ir;
pub mod lower;
pub mod print;
pub mod profile;
pub mod read;
pub mod scan;
pub mod specialise;
pub mod user;
pub mod verify;

pub use bind::eval_dims;
pub use ir::*;
pub use lower::lower;
pub use read::{read_program, ReadError};
pub use specialise::specialise;
pub use tessera_diagnostics::Span;
pub use user::{lower_user_kernel, user_grid, UserKernel};
