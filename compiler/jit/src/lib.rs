//! Cranelift code generation for Host IR.
//!
//! [`codegen::define`] turns a [`HostModule`] into Cranelift functions in any
//! Cranelift module; [`Jit`] does so in memory for `tsrc run`, with the
//! runtime's functions ([`abi::IMPORTS`]) resolved to addresses the caller
//! supplies; [`object::object`] writes an object file for executables. The
//! runtime itself lives in `tessera-exec`.

pub mod codegen;
pub mod object;

pub use tessera_host::abi;

pub use codegen::CodegenError;

use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use tessera_host::HostModule;

/// The signature of the compiled `fn main`: it takes the runtime context.
pub type EntryFn = unsafe extern "C" fn(ctx: *mut u8);

/// Host code compiled to machine code in this process.
pub struct Jit {
    module: Option<JITModule>,
    entry: EntryFn,
}

impl Jit {
    /// Compiles `host`, resolving each runtime import to the address
    /// `symbols` gives for its name.
    pub fn compile(host: &HostModule, symbols: &[(&str, *const u8)]) -> Result<Jit, CodegenError> {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v)
                .map_err(|e| CodegenError(format!("cranelift setting {k}: {e}")))
        };
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "opt_level", "speed")?;
        let isa = cranelift_native::builder()
            .map_err(|e| CodegenError(format!("this machine is not supported by Cranelift: {e}")))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| CodegenError(e.to_string()))?;
        let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        for name in abi::IMPORTS {
            let Some((_, ptr)) = symbols.iter().find(|(n, _)| n == name) else {
                return Err(CodegenError(format!(
                    "the runtime does not provide `{name}`"
                )));
            };
            builder.symbol(*name, *ptr);
        }
        let mut module = JITModule::new(builder);
        let id = codegen::define(&mut module, host)?;
        module
            .finalize_definitions()
            .map_err(|e| CodegenError(e.to_string()))?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `define` gave the entry the signature `fn(ctx)` with the
        // platform's default calling convention, which is C's.
        let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(ptr) };
        Ok(Jit {
            module: Some(module),
            entry,
        })
    }

    /// The compiled `fn main`.
    pub fn entry(&self) -> EntryFn {
        self.entry
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the entry is no longer callable once the Jit is gone.
            unsafe { m.free_memory() };
        }
    }
}
