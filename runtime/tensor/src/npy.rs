//! Reading and writing `.npy` files, the format of numpy's `np.save` / `np.load`.
//!
//! A file is the magic `\x93NUMPY`, a version (1.0, 2.0 or 3.0), the length of a header
//! (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), the header (a Python dict literal
//! with `descr`, `fortran_order` and `shape`, padded with spaces and a newline), and the raw
//! element bytes. See <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>.
//!
//! Reading never panics and never allocates more than the file's size suggests: whatever the
//! bytes, [`read_npy`] returns an array or an [`NpyError`] whose message says what is wrong.
//! The element bytes must be exactly as many as the header promises (numpy's loader ignores
//! extra bytes; here they are an error, since they mean the file is not what it claims).

mod header;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::dtype::Dtype;
use crate::tensor::{numel, strides, Data, Tensor};

/// The numpy element types this reader understands (`descr` without the byte-order mark).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NpyDtype {
    /// `f8`: float64.
    F8,
    /// `f4`: float32.
    F4,
    /// `f2`: float16.
    F2,
    /// `i1`: int8.
    I1,
    /// `i2`: int16.
    I2,
    /// `i4`: int32.
    I4,
    /// `i8`: int64.
    I8,
    /// `u1`: uint8.
    U1,
    /// `u2`: uint16.
    U2,
    /// `u4`: uint32.
    U4,
    /// `u8`: uint64.
    U8,
    /// `b1`: bool.
    B1,
}

impl NpyDtype {
    /// The type code without byte order: `f8`, `i4`, `b1`, ...
    pub fn code(self) -> &'static str {
        match self {
            NpyDtype::F8 => "f8",
            NpyDtype::F4 => "f4",
            NpyDtype::F2 => "f2",
            NpyDtype::I1 => "i1",
            NpyDtype::I2 => "i2",
            NpyDtype::I4 => "i4",
            NpyDtype::I8 => "i8",
            NpyDtype::U1 => "u1",
            NpyDtype::U2 => "u2",
            NpyDtype::U4 => "u4",
            NpyDtype::U8 => "u8",
            NpyDtype::B1 => "b1",
        }
    }

    /// The `descr` numpy writes on a little-endian machine: `<f8`, `|i1`, `|b1`, ...
    pub fn descr(self) -> String {
        let order = if self.item_size() == 1 { '|' } else { '<' };
        format!("{order}{}", self.code())
    }

    /// Bytes per element.
    pub fn item_size(self) -> usize {
        match self {
            NpyDtype::F8 | NpyDtype::I8 | NpyDtype::U8 => 8,
            NpyDtype::F4 | NpyDtype::I4 | NpyDtype::U4 => 4,
            NpyDtype::F2 | NpyDtype::I2 | NpyDtype::U2 => 2,
            NpyDtype::I1 | NpyDtype::U1 | NpyDtype::B1 => 1,
        }
    }

    /// The Tessera dtype that holds this type's values: the same type where Tessera has it,
    /// otherwise the smallest wider one (uint16 → int32, uint32 and uint64 → int64; a
    /// uint64 value above `i64::MAX` is a read error).
    pub fn dtype(self) -> Dtype {
        match self {
            NpyDtype::F8 => Dtype::Fp64,
            NpyDtype::F4 => Dtype::Fp32,
            NpyDtype::F2 => Dtype::Fp16,
            NpyDtype::I1 => Dtype::Int8,
            NpyDtype::I2 => Dtype::Int16,
            NpyDtype::I4 | NpyDtype::U2 => Dtype::Int32,
            NpyDtype::I8 | NpyDtype::U4 | NpyDtype::U8 => Dtype::Int64,
            NpyDtype::U1 => Dtype::Uint8,
            NpyDtype::B1 => Dtype::Bool,
        }
    }

    /// The numpy type written for a tensor of `dtype`: the same type where numpy has it,
    /// float32 for tf32, bf16 and both fp8 formats.
    pub fn for_dtype(dtype: Dtype) -> NpyDtype {
        match dtype {
            Dtype::Fp64 => NpyDtype::F8,
            Dtype::Fp32 | Dtype::Tf32 | Dtype::Bf16 | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => {
                NpyDtype::F4
            }
            Dtype::Fp16 => NpyDtype::F2,
            Dtype::Int8 => NpyDtype::I1,
            Dtype::Int16 => NpyDtype::I2,
            Dtype::Int32 => NpyDtype::I4,
            Dtype::Int64 => NpyDtype::I8,
            Dtype::Uint8 => NpyDtype::U1,
            Dtype::Bool => NpyDtype::B1,
        }
    }
}

/// An array read from a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// The numpy element type the file had.
    pub dtype: NpyDtype,
    /// The shape (the same as `tensor.shape`).
    pub shape: Vec<usize>,
    /// Whether the file stored the data column-major (`tensor` is row-major either way).
    pub fortran_order: bool,
    /// The values, row-major, in the dtype [`NpyDtype::dtype`] names.
    pub tensor: Tensor,
}

/// Why a `.npy` file could not be read or written.
#[derive(Debug)]
pub enum NpyError {
    /// The file does not start with `\x93NUMPY`.
    BadMagic,
    /// A format version other than 1.0, 2.0 and 3.0.
    UnsupportedVersion {
        /// The major version byte.
        major: u8,
        /// The minor version byte.
        minor: u8,
    },
    /// The file ends inside the preamble or the header.
    TruncatedHeader {
        /// Bytes needed to hold the header.
        needed: usize,
        /// Bytes the file has.
        available: usize,
    },
    /// The header is not a dict with `descr`, `fortran_order` and `shape`.
    BadHeader(String),
    /// A numpy dtype Tessera has no counterpart for.
    UnsupportedDtype {
        /// The `descr` string.
        descr: String,
        /// What kind of dtype it is.
        reason: String,
    },
    /// An array of Python objects (`descr` `|O`).
    ObjectArray,
    /// The shape's element or byte count overflows.
    ShapeOverflow {
        /// The shape as the header wrote it.
        shape: String,
    },
    /// Fewer data bytes than the shape needs.
    TruncatedData {
        /// Elements the header promises.
        elements: usize,
        /// Bytes they need.
        needed: usize,
        /// Data bytes the file has.
        available: usize,
    },
    /// More data bytes than the shape needs.
    TrailingData {
        /// Elements the header promises.
        elements: usize,
        /// Bytes they need.
        needed: usize,
        /// Data bytes the file has.
        available: usize,
    },
    /// A uint64 element above `i64::MAX`, which int64 cannot hold.
    ValueOutOfRange {
        /// Row-major index of the element.
        index: usize,
        /// Its value.
        value: u64,
    },
    /// Reading or writing the file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::BadMagic => f.write_str("not a .npy file (bad magic)"),
            NpyError::UnsupportedVersion { major, minor } => write!(
                f,
                "unsupported .npy format version {major}.{minor} (1.0, 2.0 and 3.0 are supported)"
            ),
            NpyError::TruncatedHeader { needed, available } => write!(
                f,
                "truncated header: it needs {needed} bytes but the file has {available}"
            ),
            NpyError::BadHeader(why) => write!(f, "malformed .npy header: {why}"),
            NpyError::UnsupportedDtype { descr, reason } => {
                write!(f, "unsupported dtype '{descr}' ({reason})")
            }
            NpyError::ObjectArray => f.write_str("object arrays are not supported"),
            NpyError::ShapeOverflow { shape } => {
                write!(f, "shape {shape} has too many elements to load")
            }
            NpyError::TruncatedData {
                elements,
                needed,
                available,
            } => write!(
                f,
                "truncated data: header says {elements} elements ({needed} bytes) but the file has {available}"
            ),
            NpyError::TrailingData {
                elements,
                needed,
                available,
            } => write!(
                f,
                "trailing data: header says {elements} elements ({needed} bytes) but the file has {available}"
            ),
            NpyError::ValueOutOfRange { index, value } => write!(
                f,
                "element {index} of the uint64 array is {value}, which does not fit in int64"
            ),
            NpyError::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NpyError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// Parses a `descr` such as `<f4` into its type and whether the bytes are big-endian.
fn parse_descr(descr: &str) -> Result<(NpyDtype, bool), NpyError> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let big_endian = match order {
        '>' => true,
        '<' => false,
        // Native order ('=') and "not applicable" ('|') mean this machine's order.
        _ => cfg!(target_endian = "big"),
    };
    let dtype = match code {
        "f8" => NpyDtype::F8,
        "f4" => NpyDtype::F4,
        "f2" => NpyDtype::F2,
        "i1" => NpyDtype::I1,
        "i2" => NpyDtype::I2,
        "i4" => NpyDtype::I4,
        "i8" => NpyDtype::I8,
        "u1" => NpyDtype::U1,
        "u2" => NpyDtype::U2,
        "u4" => NpyDtype::U4,
        "u8" => NpyDtype::U8,
        "b1" | "?" => NpyDtype::B1,
        _ if code.starts_with('O') => return Err(NpyError::ObjectArray),
        _ => {
            let reason = match code.chars().next() {
                Some('c') => "complex numbers",
                Some('f') => "only 2-, 4- and 8-byte floats are supported",
                Some('i') | Some('u') => "only 1-, 2-, 4- and 8-byte integers are supported",
                Some('U') => "unicode strings",
                Some('S') | Some('a') => "byte strings",
                Some('V') => "raw or structured records",
                Some('M') => "datetimes",
                Some('m') => "timedeltas",
                _ => "not a numpy dtype this reader knows",
            };
            return Err(NpyError::UnsupportedDtype {
                descr: descr.to_string(),
                reason: reason.to_string(),
            });
        }
    };
    Ok((dtype, big_endian))
}

/// Splits `bytes` into the header and the data.
fn split(bytes: &[u8]) -> Result<(header::Header, &[u8]), NpyError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let truncated = |needed| NpyError::TruncatedHeader {
        needed,
        available: bytes.len(),
    };
    let (major, minor) = match bytes.get(6..8) {
        Some(v) => (v[0], v[1]),
        None => return Err(truncated(8)),
    };
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let len_field = bytes.get(8..8 + len_size).ok_or(truncated(8 + len_size))?;
    let header_len = len_field
        .iter()
        .rev()
        .fold(0usize, |n, &b| (n << 8) | usize::from(b));
    let start = 8 + len_size;
    let end = start.saturating_add(header_len);
    let raw = bytes.get(start..end).ok_or(truncated(end))?;
    let text: String = if utf8 {
        std::str::from_utf8(raw)
            .map_err(|_| NpyError::BadHeader("the header is not valid UTF-8".to_string()))?
            .to_string()
    } else {
        // Versions 1.0 and 2.0 use latin-1: each byte is one character.
        raw.iter().map(|&b| char::from(b)).collect()
    };
    Ok((header::parse(&text)?, &bytes[end..]))
}

/// Reads element `k` of `data` as `N` bytes in little-endian order.
fn item<const N: usize>(data: &[u8], k: usize, big_endian: bool) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&data[k * N..(k + 1) * N]);
    if big_endian {
        b.reverse();
    }
    b
}

/// Decodes `n` elements (the length of `data` is checked by the caller).
fn decode(data: &[u8], n: usize, dtype: NpyDtype, be: bool) -> Result<Data, NpyError> {
    let ints = |f: &dyn Fn(usize) -> i64| Data::I64((0..n).map(f).collect());
    Ok(match dtype {
        NpyDtype::F8 => Data::F64(
            (0..n)
                .map(|k| f64::from_le_bytes(item(data, k, be)))
                .collect(),
        ),
        NpyDtype::F4 => Data::F32(
            (0..n)
                .map(|k| f32::from_le_bytes(item(data, k, be)))
                .collect(),
        ),
        NpyDtype::F2 => Data::F32(
            (0..n)
                .map(|k| half::f16::from_le_bytes(item(data, k, be)).to_f32())
                .collect(),
        ),
        NpyDtype::I1 => ints(&|k| i64::from(data[k] as i8)),
        NpyDtype::U1 => ints(&|k| i64::from(data[k])),
        NpyDtype::I2 => ints(&|k| i64::from(i16::from_le_bytes(item(data, k, be)))),
        NpyDtype::U2 => ints(&|k| i64::from(u16::from_le_bytes(item(data, k, be)))),
        NpyDtype::I4 => ints(&|k| i64::from(i32::from_le_bytes(item(data, k, be)))),
        NpyDtype::U4 => ints(&|k| i64::from(u32::from_le_bytes(item(data, k, be)))),
        NpyDtype::I8 => ints(&|k| i64::from_le_bytes(item(data, k, be))),
        NpyDtype::U8 => Data::I64(
            (0..n)
                .map(|k| {
                    let value = u64::from_le_bytes(item(data, k, be));
                    i64::try_from(value).map_err(|_| NpyError::ValueOutOfRange { index: k, value })
                })
                .collect::<Result<_, _>>()?,
        ),
        NpyDtype::B1 => Data::Bool(data[..n].iter().map(|&b| b != 0).collect()),
    })
}

/// Reorders column-major `values` of `shape` into row-major order.
fn fortran_to_c<T: Copy>(values: &[T], shape: &[usize]) -> Vec<T> {
    let mut out = values.to_vec();
    if values.is_empty() {
        return out;
    }
    let c_strides = strides(shape);
    let mut index = vec![0usize; shape.len()];
    // Walk the elements in file order (first axis fastest), tracking the row-major offset.
    let mut offset = 0usize;
    for &v in values {
        out[offset] = v;
        for axis in 0..shape.len() {
            index[axis] += 1;
            offset += c_strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= c_strides[axis] * shape[axis];
            index[axis] = 0;
        }
    }
    out
}

/// Parses a `.npy` file's bytes.
pub fn read_npy(bytes: &[u8]) -> Result<NpyArray, NpyError> {
    let (header, data) = split(bytes)?;
    let (npy_dtype, big_endian) = parse_descr(&header.descr)?;
    let overflow = || NpyError::ShapeOverflow {
        shape: header::shape_text(&header.shape),
    };
    let n = numel(&header.shape).ok_or_else(overflow)?;
    let needed = n.checked_mul(npy_dtype.item_size()).ok_or_else(overflow)?;
    if data.len() < needed {
        return Err(NpyError::TruncatedData {
            elements: n,
            needed,
            available: data.len(),
        });
    }
    if data.len() > needed {
        return Err(NpyError::TrailingData {
            elements: n,
            needed,
            available: data.len(),
        });
    }
    let mut values = decode(data, n, npy_dtype, big_endian)?;
    if header.fortran_order && header.shape.len() > 1 {
        values = match values {
            Data::F64(v) => Data::F64(fortran_to_c(&v, &header.shape)),
            Data::F32(v) => Data::F32(fortran_to_c(&v, &header.shape)),
            Data::I64(v) => Data::I64(fortran_to_c(&v, &header.shape)),
            Data::Bool(v) => Data::Bool(fortran_to_c(&v, &header.shape)),
        };
    }
    Ok(NpyArray {
        dtype: npy_dtype,
        shape: header.shape.clone(),
        fortran_order: header.fortran_order,
        tensor: Tensor {
            dtype: npy_dtype.dtype(),
            shape: header.shape,
            data: values,
        },
    })
}

/// Serialises `t` as a `.npy` file (format 1.0, or 2.0 if the header needs it) with the
/// numpy type of [`NpyDtype::for_dtype`], little-endian, row-major. A malformed tensor
/// (see [`Tensor::validate`]) is written as a rank-1 array of the elements it holds.
pub fn write_npy(t: &Tensor) -> Vec<u8> {
    let npy = NpyDtype::for_dtype(t.dtype);
    let n = t.len();
    let rank1 = [n];
    let shape: &[usize] = if t.validate().is_ok() {
        &t.shape
    } else {
        &rank1
    };
    let mut text = header::render(&npy.descr(), shape);
    // Pad with spaces and a final newline so the data starts at a multiple of 64 bytes.
    let mut version = 1u8;
    let mut preamble = MAGIC.len() + 2 + 2;
    if text.len() + 1 + 64 > usize::from(u16::MAX) {
        version = 2;
        preamble += 2;
    }
    let pad = (64 - (preamble + text.len() + 1) % 64) % 64;
    text.extend(std::iter::repeat_n(' ', pad));
    text.push('\n');
    let mut out = Vec::with_capacity(preamble + text.len() + n * npy.item_size());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    let data = &t.data;
    for i in 0..n {
        let x = data.get_f64(i).unwrap_or(0.0);
        let k = data.get_i64(i).unwrap_or(0);
        match npy {
            NpyDtype::F8 => out.extend_from_slice(&x.to_le_bytes()),
            NpyDtype::F4 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            NpyDtype::F2 => {
                // Exact: the value is rounded to fp16 first, and every fp16 value is an fp32.
                let h = half::f16::from_f32(Dtype::Fp16.round(x) as f32);
                out.extend_from_slice(&h.to_le_bytes());
            }
            NpyDtype::I1 => out.push(k.clamp(i8::MIN.into(), i8::MAX.into()) as i8 as u8),
            NpyDtype::I2 => out.extend_from_slice(
                &(k.clamp(i16::MIN.into(), i16::MAX.into()) as i16).to_le_bytes(),
            ),
            NpyDtype::I4 => out.extend_from_slice(
                &(k.clamp(i32::MIN.into(), i32::MAX.into()) as i32).to_le_bytes(),
            ),
            NpyDtype::I8 => out.extend_from_slice(&k.to_le_bytes()),
            NpyDtype::U1 => out.push(k.clamp(0, u8::MAX.into()) as u8),
            NpyDtype::B1 => out.push(u8::from(x != 0.0)),
            // Never chosen by `for_dtype`.
            NpyDtype::U2 | NpyDtype::U4 | NpyDtype::U8 => {
                out.extend_from_slice(&vec![0; npy.item_size()]);
            }
        }
    }
    out
}

/// Reads and parses the `.npy` file at `path`.
///
/// Only regular files are read: a FIFO with no writer would block forever,
/// and a directory or device is no `.npy` file.
pub fn read_npy_file(path: impl AsRef<Path>) -> Result<NpyArray, NpyError> {
    let path = path.as_ref();
    let io = |error| NpyError::Io {
        path: path.to_path_buf(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, directory or device is not read as a .npy file)",
        )));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    read_npy(&bytes)
}

/// Writes `t` to `path` as a `.npy` file (see [`write_npy`]).
pub fn write_npy_file(path: impl AsRef<Path>, t: &Tensor) -> Result<(), NpyError> {
    let path = path.as_ref();
    std::fs::write(path, write_npy(t)).map_err(|error| NpyError::Io {
        path: path.to_path_buf(),
        error,
    })
}
