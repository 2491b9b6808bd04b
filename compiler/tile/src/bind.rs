//! Binding a program's dimension symbols to the shapes of concrete inputs,
//! shared by every backend that runs Tile IR.

use crate::TileProgram;
use tessera_schedule::{Bindings, Size};

/// Evaluates extents under `b`; each must be non-negative.
pub fn eval_dims(dims: &[Size], b: &Bindings) -> Result<Vec<usize>, String> {
    dims.iter()
        .map(|s| {
            let n = s.eval(b)?;
            usize::try_from(n).map_err(|_| format!("extent `{s}` is negative ({n})"))
        })
        .collect()
}

impl TileProgram {
    /// Binds the dimension symbols of the inputs' declared shapes to
    /// `shapes` (one per input) and checks every input against its
    /// declaration. Errors name the input and both shapes.
    pub fn bind_dims(&self, shapes: &[&[usize]]) -> Result<Bindings, String> {
        let mut b = Bindings::new();
        for (decl, shape) in self.inputs.iter().zip(shapes) {
            if decl.dims.len() != shape.len() {
                let want: Vec<String> = decl.dims.iter().map(Size::to_string).collect();
                return Err(format!(
                    "input `{}` has shape {:?} but the op expects [{}]",
                    decl.name,
                    shape,
                    want.join(", ")
                ));
            }
            for (d, (size, &n)) in decl.dims.iter().zip(shape.iter()).enumerate() {
                if let Size::Sym(name) = size {
                    let n = i64::try_from(n)
                        .map_err(|_| format!("input `{}` is too large", decl.name))?;
                    match b.get(name) {
                        Some(&old) if old != n => {
                            return Err(format!(
                                "input `{}` has shape {:?}: its dim {d} binds `{name}` to {n}, \
                                 but `{name}` is already {old}",
                                decl.name, shape
                            ))
                        }
                        _ => {
                            b.insert(name.clone(), n);
                        }
                    }
                }
            }
        }
        for (decl, shape) in self.inputs.iter().zip(shapes) {
            let want =
                eval_dims(&decl.dims, &b).map_err(|e| format!("input `{}`: {e}", decl.name))?;
            if want != *shape {
                return Err(format!(
                    "input `{}` has shape {:?} but the op expects {:?}",
                    decl.name, shape, want
                ));
            }
        }
        Ok(b)
    }
}
