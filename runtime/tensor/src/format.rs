//! Printing host tensors for Tessera's `print` builtin, in numpy's layout.
//!
//! ```text
//! tensor<2, 3, fp32>
//! [[1.0000, 2.0000, 3.0000],
//!  [4.0000, 5.0000, 6.0000]]
//! ```
//!
//! The first line is the tensor's type as Tessera writes it (`tensor<fp32>` at rank 0).
//! The values follow in nested brackets, every entry right-aligned to the widest one. Rows
//! of a matrix are separated by a newline, matrices of a rank-3 tensor by a blank line, and
//! so on (`rank - axis - 2` blank lines between the blocks of an axis), as numpy does.
//!
//! Entries:
//!
//! * floats: `nan`, `inf`, `-inf`; otherwise 4 decimals (`{:.4}`, so `-0.0000` for -0.0),
//!   unless `|x| >= 1e5` or `0 < |x| < 1e-4`, then scientific with 4 decimals (`{:.4e}`,
//!   e.g. `1.2346e5`, `-3.0000e-7`);
//! * integers in decimal; bools as `true` / `false`.
//!
//! A tensor with more than [`SUMMARY_THRESHOLD`] elements is summarised like numpy: along
//! every axis longer than `2 * EDGE_ITEMS`, only the first and last [`EDGE_ITEMS`] entries are
//! shown with `...` between them. A tensor without elements shows `[]`. The text has no
//! trailing newline.

use std::fmt::{self, Write};

use crate::tensor::{numel, strides, Data, Tensor};

/// Tensors with more elements than this are summarised.
pub const SUMMARY_THRESHOLD: usize = 1000;

/// Entries shown at each end of a summarised axis.
pub const EDGE_ITEMS: usize = 3;

/// Formats one float entry by the rule of the module documentation.
pub fn format_float(x: f64) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if x.abs() >= 1e5 || (x != 0.0 && x.abs() < 1e-4) {
        format!("{x:.4e}")
    } else {
        format!("{x:.4}")
    }
}

/// The type line: `tensor<2, 3, bf16>`, or `tensor<fp32>` at rank 0.
fn type_line(t: &Tensor) -> String {
    let mut s = String::from("tensor<");
    for d in &t.shape {
        let _ = write!(s, "{d}, ");
    }
    s.push_str(t.dtype.name());
    s.push('>');
    s
}

/// The entry for element `i`.
fn entry(data: &Data, i: usize) -> String {
    match data {
        Data::F64(v) => v.get(i).map_or_else(String::new, |&x| format_float(x)),
        Data::F32(v) => v
            .get(i)
            .map_or_else(String::new, |&x| format_float(f64::from(x))),
        Data::I64(v) => v.get(i).map_or_else(String::new, |x| x.to_string()),
        Data::Bool(v) => v.get(i).map_or_else(String::new, |x| x.to_string()),
    }
}

/// The indices shown along an axis of length `dim`; `None` marks the `...`.
fn shown(dim: usize, summarise: bool) -> Vec<Option<usize>> {
    if summarise && dim > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((dim - EDGE_ITEMS..dim).map(Some))
            .collect()
    } else {
        (0..dim).map(Some).collect()
    }
}

/// Walks the shown elements; shared by the width pass and the writing pass.
struct Printer<'a> {
    shape: &'a [usize],
    strides: Vec<usize>,
    summarise: bool,
    data: &'a Data,
    width: usize,
}

impl Printer<'_> {
    /// The width of the widest shown entry below `axis` at element offset `offset`.
    fn max_width(&self, axis: usize, offset: usize) -> usize {
        if axis == self.shape.len() {
            return entry(self.data, offset).chars().count();
        }
        shown(self.shape[axis], self.summarise)
            .into_iter()
            .flatten()
            .map(|i| self.max_width(axis + 1, offset + i * self.strides[axis]))
            .max()
            .unwrap_or(0)
    }

    /// Writes the block of `axis` starting at element offset `offset`.
    fn write(&self, out: &mut String, axis: usize, offset: usize) {
        if axis == self.shape.len() {
            let text = entry(self.data, offset);
            let pad = self.width.saturating_sub(text.chars().count());
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
            return;
        }
        let axes_left = self.shape.len() - axis;
        out.push('[');
        for (k, index) in shown(self.shape[axis], self.summarise)
            .into_iter()
            .enumerate()
        {
            if k > 0 {
                if axes_left == 1 {
                    out.push_str(", ");
                } else {
                    out.push(',');
                    out.extend(std::iter::repeat_n('\n', axes_left - 1));
                    out.extend(std::iter::repeat_n(' ', axis + 1));
                }
            }
            match index {
                Some(i) => self.write(out, axis + 1, offset + i * self.strides[axis]),
                None => out.push_str("..."),
            }
        }
        out.push(']');
    }
}

impl Tensor {
    /// The text the `print` builtin shows for this tensor (see the `format` module docs).
    /// A malformed tensor prints its type line and what is wrong with it.
    pub fn format(&self) -> String {
        let mut out = type_line(self);
        out.push('\n');
        if let Err(e) = self.validate() {
            let _ = write!(out, "<malformed tensor: {e}>");
            return out;
        }
        let summarise = numel(&self.shape).is_some_and(|n| n > SUMMARY_THRESHOLD);
        let mut printer = Printer {
            shape: &self.shape,
            strides: strides(&self.shape),
            summarise,
            data: &self.data,
            width: 0,
        };
        if self.is_empty() {
            // Like numpy, whatever the shape (which may have huge dimensions beside a zero).
            out.push_str("[]");
            return out;
        }
        printer.width = printer.max_width(0, 0);
        printer.write(&mut out, 0, 0);
        out
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.format())
    }
}
