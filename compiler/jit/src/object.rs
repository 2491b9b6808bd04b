//! Host IR to a relocatable object file (ELF on Linux) for `tsrc build`:
//! the compiled functions, `tessera_main` exported, the runtime's functions
//! left undefined for the linker, plus read-only data symbols the runtime
//! reads at start-up (the embedded program).

use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{DataDescription, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use tessera_host::HostModule;

use crate::CodegenError;

/// A read-only data symbol to define in the object.
pub struct DataSymbol<'a> {
    /// The exported symbol name.
    pub name: &'a str,
    /// Its bytes.
    pub bytes: &'a [u8],
}

/// Compiles `host` for this machine into an object file holding its
/// functions and `data`. Position-independent, for PIE executables.
pub fn object(host: &HostModule, data: &[DataSymbol<'_>]) -> Result<Vec<u8>, CodegenError> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| CodegenError(format!("cranelift setting {k}: {e}")))
    };
    set(&mut flags, "is_pic", "true")?;
    set(&mut flags, "opt_level", "speed")?;
    let isa = cranelift_native::builder()
        .map_err(|e| CodegenError(format!("this machine is not supported by Cranelift: {e}")))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| CodegenError(e.to_string()))?;
    let builder = ObjectBuilder::new(
        isa,
        "tessera_host",
        cranelift_module::default_libcall_names(),
    )
    .map_err(|e| CodegenError(e.to_string()))?;
    let mut module = ObjectModule::new(builder);
    crate::codegen::define(&mut module, host)?;
    for d in data {
        let id = module
            .declare_data(d.name, Linkage::Export, false, false)
            .map_err(|e| CodegenError(e.to_string()))?;
        let mut desc = DataDescription::new();
        desc.define(d.bytes.to_vec().into_boxed_slice());
        desc.set_align(8);
        module
            .define_data(id, &desc)
            .map_err(|e| CodegenError(e.to_string()))?;
    }
    module
        .finish()
        .emit()
        .map_err(|e| CodegenError(format!("cannot write the object file: {e}")))
}
