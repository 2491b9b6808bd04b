//! Host tensors to and from the device's packed little-endian bytes, one element after another.
//!
//! | dtype                      | bytes | device form                                   |
//! |----------------------------|-------|-----------------------------------------------|
//! | fp64                       | 8     | IEEE binary64                                 |
//! | fp32, tf32                 | 4     | IEEE binary32 (tf32 values are fp32 values)   |
//! | bf16, fp16                 | 2     | bfloat16 / IEEE binary16 bits                 |
//! | fp8_e4m3, fp8_e5m2         | 1     | OCP fp8 bits                                  |
//! | int8 / int16 / int32 / int64 / uint8 | width | two's complement / unsigned         |
//! | bool                       | 1     | 0 or 1 (any non-zero byte reads as true)      |
//!
//! A [`Tensor`] keeps bf16/fp16/fp8 values as exactly representable `f32`s, so packing is
//! exact, and unpacking decodes exactly. Pure host code: no device needed.

use tessera_tensor::{
    f8e4m3_from_f32, f8e4m3_to_f32, f8e5m2_from_f32, f8e5m2_to_f32, numel, Data, Dtype, Tensor,
};

use crate::error::CudaError;

/// The error for a tensor whose storage does not match its dtype.
fn malformed(tensor: &Tensor, err: impl std::fmt::Display) -> CudaError {
    CudaError::invalid(
        format!(
            "packing a {} tensor of shape {:?} for the device",
            tensor.dtype, tensor.shape
        ),
        err.to_string(),
    )
}

/// The elements of `tensor`, row-major, in the device's packed little-endian form (see the
/// module documentation). Fails only for a tensor that breaks its invariants.
pub fn tensor_to_bytes(tensor: &Tensor) -> Result<Vec<u8>, CudaError> {
    tensor.validate().map_err(|e| malformed(tensor, e))?;
    let dtype = tensor.dtype;
    let mut out = Vec::new();
    out.try_reserve_exact(tensor.len() * dtype.size_bytes() as usize)
        .map_err(|_| malformed(tensor, "out of host memory"))?;
    match &tensor.data {
        Data::F64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        Data::F32(v) => match dtype {
            Dtype::Bf16 => v
                .iter()
                .for_each(|&x| out.extend(half::bf16::from_f32(x).to_le_bytes())),
            Dtype::Fp16 => v
                .iter()
                .for_each(|&x| out.extend(half::f16::from_f32(x).to_le_bytes())),
            Dtype::Fp8E4m3 => out.extend(v.iter().map(|&x| f8e4m3_from_f32(x))),
            Dtype::Fp8E5m2 => out.extend(v.iter().map(|&x| f8e5m2_from_f32(x))),
            // fp32 and tf32.
            _ => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        },
        Data::I64(v) => {
            // Values lie in the dtype's range by the tensor invariant; clamp anyway so that a
            // malformed tensor saturates instead of wrapping.
            let (min, max) = dtype.int_range().unwrap_or((i64::MIN, i64::MAX));
            for &x in v {
                let x = x.clamp(min, max);
                match dtype {
                    Dtype::Int8 => out.extend((x as i8).to_le_bytes()),
                    Dtype::Int16 => out.extend((x as i16).to_le_bytes()),
                    Dtype::Int32 => out.extend((x as i32).to_le_bytes()),
                    Dtype::Uint8 => out.push(x as u8),
                    _ => out.extend(x.to_le_bytes()),
                }
            }
        }
        Data::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
    }
    Ok(out)
}

/// The tensor of `dtype` and `shape` whose packed little-endian form is `bytes` (the inverse
/// of [`tensor_to_bytes`]). `bytes` must hold exactly `numel(shape) * dtype.size_bytes()`
/// bytes. tf32 elements are rounded to tf32 (a kernel may have written any fp32 value).
pub fn tensor_from_bytes(dtype: Dtype, shape: &[usize], bytes: &[u8]) -> Result<Tensor, CudaError> {
    let during = || format!("unpacking device bytes into a {dtype} tensor of shape {shape:?}");
    let size = dtype.size_bytes() as usize;
    let n = numel(shape)
        .filter(|n| n.checked_mul(size).is_some())
        .ok_or_else(|| CudaError::invalid(during(), "the shape has too many elements"))?;
    if bytes.len() != n * size {
        return Err(CudaError::invalid(
            during(),
            format!("expected {} bytes, got {}", n * size, bytes.len()),
        ));
    }
    let chunks = bytes.chunks_exact(size);
    let data = match dtype {
        Dtype::Fp64 => Data::F64(chunks.map(|c| f64::from_le_bytes(le(c))).collect()),
        Dtype::Fp32 => Data::F32(chunks.map(|c| f32::from_le_bytes(le(c))).collect()),
        Dtype::Tf32 => Data::F32(
            chunks
                .map(|c| Dtype::Tf32.round(f32::from_le_bytes(le(c)).into()) as f32)
                .collect(),
        ),
        Dtype::Bf16 => Data::F32(
            chunks
                .map(|c| half::bf16::from_le_bytes(le(c)).to_f32())
                .collect(),
        ),
        Dtype::Fp16 => Data::F32(
            chunks
                .map(|c| half::f16::from_le_bytes(le(c)).to_f32())
                .collect(),
        ),
        Dtype::Fp8E4m3 => Data::F32(bytes.iter().map(|&b| f8e4m3_to_f32(b)).collect()),
        Dtype::Fp8E5m2 => Data::F32(bytes.iter().map(|&b| f8e5m2_to_f32(b)).collect()),
        Dtype::Int8 => Data::I64(bytes.iter().map(|&b| i64::from(b as i8)).collect()),
        Dtype::Uint8 => Data::I64(bytes.iter().map(|&b| i64::from(b)).collect()),
        Dtype::Int16 => Data::I64(chunks.map(|c| i16::from_le_bytes(le(c)).into()).collect()),
        Dtype::Int32 => Data::I64(chunks.map(|c| i32::from_le_bytes(le(c)).into()).collect()),
        Dtype::Int64 => Data::I64(chunks.map(|c| i64::from_le_bytes(le(c))).collect()),
        Dtype::Bool => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
    };
    Ok(Tensor {
        dtype,
        shape: shape.to_vec(),
        data,
    })
}

/// A chunk of `N` bytes as an array (the callers' chunks have exactly `N` bytes).
fn le<const N: usize>(chunk: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(chunk);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that stress every dtype: zeros of both signs, fractions, extremes, overflow.
    fn probe_values() -> Vec<f64> {
        vec![
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.1,
            3.0e-3,
            65504.0,
            -448.0,
            1.0e-7,
            300.0,
            -129.0,
            1.0e20,
            f64::INFINITY,
            2.5,
        ]
    }

    #[test]
    fn round_trip_every_dtype() {
        let values = probe_values();
        for dtype in Dtype::ALL {
            let t = Tensor::from_f64(dtype, &[2, 7], &values).unwrap();
            let bytes = tensor_to_bytes(&t).unwrap();
            assert_eq!(bytes.len(), 14 * dtype.size_bytes() as usize, "{dtype}");
            let back = tensor_from_bytes(dtype, &[2, 7], &bytes).unwrap();
            // Compare bit patterns so that -0.0 and infinities count.
            let a: Vec<u64> = t.to_f64_vec().iter().map(|x| x.to_bits()).collect();
            let b: Vec<u64> = back.to_f64_vec().iter().map(|x| x.to_bits()).collect();
            assert_eq!(a, b, "{dtype}");
            assert_eq!(back.dtype, dtype);
        }
    }

    #[test]
    fn nan_survives_float_round_trips() {
        for dtype in Dtype::ALL.into_iter().filter(|d| d.is_float()) {
            let t = Tensor::from_f64(dtype, &[1], &[f64::NAN]).unwrap();
            let back = tensor_from_bytes(dtype, &[1], &tensor_to_bytes(&t).unwrap()).unwrap();
            assert!(back.get_f64(0).unwrap().is_nan(), "{dtype}");
        }
    }

    #[test]
    fn packed_forms_are_the_device_encodings() {
        let t = Tensor::from_f64(Dtype::Bf16, &[2], &[1.0, -2.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0x80, 0x3f, 0x00, 0xc0]);
        let t = Tensor::from_f64(Dtype::Fp16, &[2], &[1.0, -2.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0x00, 0x3c, 0x00, 0xc0]);
        let t = Tensor::from_f64(Dtype::Fp8E4m3, &[2], &[1.0, -448.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0x38, 0xfe]);
        let t = Tensor::from_f64(Dtype::Fp8E5m2, &[2], &[1.0, f64::INFINITY]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0x3c, 0x7c]);
        let t = Tensor::from_f64(Dtype::Fp32, &[1], &[1.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0x00, 0x00, 0x80, 0x3f]);
        let t = Tensor::from_f64(Dtype::Int16, &[2], &[-2.0, 258.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0xfe, 0xff, 0x02, 0x01]);
        let t = Tensor::from_f64(Dtype::Int8, &[2], &[-1.0, 127.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0xff, 0x7f]);
        let t = Tensor::from_f64(Dtype::Uint8, &[1], &[255.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0xff]);
        let t = Tensor::from_f64(Dtype::Bool, &[3], &[0.0, 2.0, -1.0]).unwrap();
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0, 1, 1]);
        let t = Tensor::scalar(Dtype::Int64, -1.0);
        assert_eq!(tensor_to_bytes(&t).unwrap(), [0xff; 8]);
    }

    #[test]
    fn unpacking_checks_the_length_and_reads_any_nonzero_bool() {
        let err = tensor_from_bytes(Dtype::Fp32, &[3], &[0; 11]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unpacking device bytes into a fp32 tensor of shape [3]: expected 12 bytes, got 11"
        );
        let t = tensor_from_bytes(Dtype::Bool, &[3], &[0, 7, 0xff]).unwrap();
        assert_eq!(t.data, Data::Bool(vec![false, true, true]));
        let t = tensor_from_bytes(Dtype::Tf32, &[1], &1.0000001f32.to_le_bytes()).unwrap();
        assert_eq!(t.data, Data::F32(vec![1.0]));
        assert!(tensor_from_bytes(Dtype::Fp64, &[usize::MAX, 2], &[]).is_err());
        let empty = tensor_from_bytes(Dtype::Bf16, &[0, 4], &[]).unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn malformed_tensors_are_errors_not_panics() {
        let t = Tensor {
            dtype: Dtype::Bf16,
            shape: vec![2],
            data: Data::I64(vec![1, 2]),
        };
        assert!(tensor_to_bytes(&t).is_err());
        let t = Tensor {
            dtype: Dtype::Int8,
            shape: vec![1],
            data: Data::I64(vec![1000]),
        };
        assert_eq!(tensor_to_bytes(&t).unwrap(), [127]);
    }
}
