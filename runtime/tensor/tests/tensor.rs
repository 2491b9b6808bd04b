//! Tests of host tensors: construction, storage classes, access, conversion, printing.

use tessera_tensor::{numel, strides, Data, Dtype, ShapeError, StorageClass, Tensor};

#[test]
fn storage_class_follows_dtype() {
    for d in Dtype::ALL {
        let t = Tensor::zeros(d, &[2, 3]).unwrap();
        assert_eq!(t.data.storage_class(), StorageClass::of(d), "{d}");
        assert_eq!(t.len(), 6);
        assert_eq!(t.to_f64_vec(), vec![0.0; 6]);
        t.validate().unwrap();
    }
    assert_eq!(StorageClass::of(Dtype::Fp64), StorageClass::F64);
    assert_eq!(StorageClass::of(Dtype::Fp8E5m2), StorageClass::F32);
    assert_eq!(StorageClass::of(Dtype::Tf32), StorageClass::F32);
    assert_eq!(StorageClass::of(Dtype::Uint8), StorageClass::I64);
    assert_eq!(StorageClass::of(Dtype::Bool), StorageClass::Bool);
}

#[test]
fn constructors_round_values() {
    let t = Tensor::from_f64(Dtype::Bf16, &[3], &[1.0 + 1.0 / 256.0, 0.1, 3.0]).unwrap();
    assert_eq!(t.to_f64_vec(), vec![1.0, 0.10009765625, 3.0]);
    let t = Tensor::from_f64(Dtype::Int8, &[2, 2], &[1.7, -200.0, 500.0, f64::NAN]).unwrap();
    assert_eq!(t.data, Data::I64(vec![1, -128, 127, 0]));
    let t = Tensor::full(Dtype::Fp8E4m3, &[2], 1000.0).unwrap();
    assert_eq!(t.data, Data::F32(vec![448.0, 448.0]));
    let t = Tensor::full(Dtype::Bool, &[1], -2.0).unwrap();
    assert_eq!(t.data, Data::Bool(vec![true]));
    let s = Tensor::scalar(Dtype::Fp16, 65536.0);
    assert_eq!((s.rank(), s.len()), (0, 1));
    assert_eq!(s.get_f64(0), Some(f64::INFINITY));
    let t = Tensor::from_fn(Dtype::Int32, &[4], |i| i as f64 * 1.5).unwrap();
    assert_eq!(t.data, Data::I64(vec![0, 1, 3, 4]));
}

#[test]
fn shape_errors_are_reported() {
    assert_eq!(
        Tensor::from_f64(Dtype::Fp32, &[2, 3], &[1.0; 5]),
        Err(ShapeError::LengthMismatch {
            shape: vec![2, 3],
            expected: 6,
            got: 5
        })
    );
    let huge = [usize::MAX, 2];
    assert_eq!(numel(&huge), None);
    assert!(matches!(
        Tensor::zeros(Dtype::Fp32, &huge),
        Err(ShapeError::Overflow { .. })
    ));
    // The element count fits but the bytes do not.
    assert!(matches!(
        Tensor::zeros(Dtype::Fp64, &[usize::MAX / 4]),
        Err(ShapeError::Overflow { .. })
    ));
    // Fits in usize but not in memory: an error, not an abort.
    assert!(Tensor::zeros(Dtype::Fp64, &[1 << 58]).is_err());
    let e = Tensor::from_f64(Dtype::Fp32, &[2], &[1.0]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "shape [2] has 2 elements but 1 values were given"
    );
    assert_eq!(numel(&[]), Some(1));
    assert_eq!(numel(&[3, 0, 5]), Some(0));
}

#[test]
fn strides_are_row_major() {
    assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
    assert_eq!(strides(&[]), Vec::<usize>::new());
    assert_eq!(strides(&[5]), vec![1]);
    assert_eq!(
        strides(&[0, usize::MAX, 4]),
        vec![usize::MAX, 4, 1],
        "saturates"
    );
    assert_eq!(
        Tensor::zeros(Dtype::Fp32, &[2, 5]).unwrap().strides(),
        vec![5, 1]
    );
}

#[test]
fn get_and_set_round_and_check_bounds() {
    let mut t = Tensor::zeros(Dtype::Int8, &[3]).unwrap();
    t.set_f64(0, 1000.0).unwrap();
    t.set_f64(1, -2.5).unwrap();
    assert_eq!(t.to_f64_vec(), vec![127.0, -2.0, 0.0]);
    assert_eq!(
        t.set_f64(3, 1.0),
        Err(ShapeError::IndexOutOfBounds { index: 3, len: 3 })
    );
    assert_eq!(t.get_f64(3), None);
    let mut t = Tensor::zeros(Dtype::Bf16, &[1]).unwrap();
    t.set_f64(0, 1.0 + 1.0 / 256.0 + 1e-9).unwrap();
    assert_eq!(t.get_f64(0), Some(1.0078125));
    let mut t = Tensor::zeros(Dtype::Fp64, &[1]).unwrap();
    t.set_f64(0, 0.1).unwrap();
    assert_eq!(t.get_f64(0), Some(0.1));
    let mut t = Tensor::zeros(Dtype::Bool, &[1]).unwrap();
    t.set_f64(0, 0.5).unwrap();
    assert_eq!(t.data, Data::Bool(vec![true]));
}

#[test]
fn convert_rounds_and_saturates() {
    let t = Tensor::from_f64(Dtype::Fp32, &[4], &[1.5, -1.5, 1e10, 0.1]).unwrap();
    let i = t.convert(Dtype::Int16);
    assert_eq!(i.data, Data::I64(vec![1, -1, 32767, 0]));
    assert_eq!(i.shape, vec![4]);
    let b = t.convert(Dtype::Bf16);
    assert_eq!(b.to_f64_vec(), vec![1.5, -1.5, 9999220736.0, 0.10009765625]);
    let big = Tensor {
        dtype: Dtype::Int64,
        shape: vec![3],
        data: Data::I64(vec![i64::MAX, i64::MIN, (1 << 53) + 1]),
    };
    assert_eq!(
        big.convert(Dtype::Int8).data,
        Data::I64(vec![127, -128, 127])
    );
    assert_eq!(
        big.convert(Dtype::Int64).data,
        Data::I64(vec![i64::MAX, i64::MIN, (1 << 53) + 1])
    );
    assert_eq!(
        big.convert(Dtype::Bool).data,
        Data::Bool(vec![true, true, true])
    );
    let flags = Tensor::from_f64(Dtype::Bool, &[2], &[0.0, 1.0]).unwrap();
    assert_eq!(flags.convert(Dtype::Uint8).data, Data::I64(vec![0, 1]));
    assert_eq!(flags.convert(Dtype::Fp16).to_f64_vec(), vec![0.0, 1.0]);
    let e4 = Tensor::from_f64(Dtype::Fp64, &[2], &[500.0, -0.3]).unwrap();
    assert_eq!(
        e4.convert(Dtype::Fp8E4m3).to_f64_vec(),
        vec![448.0, -0.3125]
    );
}

#[test]
fn validate_catches_malformed_tensors() {
    let wrong_storage = Tensor {
        dtype: Dtype::Fp32,
        shape: vec![1],
        data: Data::F64(vec![1.0]),
    };
    assert!(matches!(
        wrong_storage.validate(),
        Err(ShapeError::WrongStorage { .. })
    ));
    let wrong_len = Tensor {
        dtype: Dtype::Fp32,
        shape: vec![2, 2],
        data: Data::F32(vec![1.0]),
    };
    assert!(matches!(
        wrong_len.validate(),
        Err(ShapeError::LengthMismatch { .. })
    ));
    assert!(wrong_len.format().contains("malformed"));
}

fn f32_tensor(shape: &[usize], values: impl Fn(usize) -> f64) -> Tensor {
    Tensor::from_fn(Dtype::Fp32, shape, values).unwrap()
}

#[test]
fn format_rank_0_and_1() {
    assert_eq!(
        Tensor::scalar(Dtype::Fp32, 1.5).format(),
        "tensor<fp32>\n1.5000"
    );
    assert_eq!(
        Tensor::scalar(Dtype::Int32, -7.0).format(),
        "tensor<int32>\n-7"
    );
    assert_eq!(
        f32_tensor(&[3], |i| i as f64 - 1.0).format(),
        "tensor<3, fp32>\n[-1.0000,  0.0000,  1.0000]"
    );
    let b = Tensor::from_f64(Dtype::Bool, &[3], &[1.0, 0.0, 1.0]).unwrap();
    assert_eq!(b.format(), "tensor<3, bool>\n[ true, false,  true]");
    let special = Tensor::from_f64(
        Dtype::Fp64,
        &[6],
        &[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            123456.0,
            0.00001234,
            -0.0,
        ],
    )
    .unwrap();
    assert_eq!(
        special.format(),
        "tensor<6, fp64>\n[      nan,       inf,      -inf,  1.2346e5, 1.2340e-5,   -0.0000]"
    );
    assert_eq!(
        Tensor::zeros(Dtype::Fp32, &[0]).unwrap().format(),
        "tensor<0, fp32>\n[]"
    );
    assert_eq!(
        Tensor::zeros(Dtype::Fp32, &[3, 0]).unwrap().format(),
        "tensor<3, 0, fp32>\n[]"
    );
}

#[test]
fn format_rank_2_and_3() {
    let t = Tensor::from_f64(Dtype::Int64, &[2, 3], &[1.0, 20.0, 3.0, -4.0, 5.0, 600.0]).unwrap();
    assert_eq!(
        t.format(),
        "tensor<2, 3, int64>\n[[  1,  20,   3],\n [ -4,   5, 600]]"
    );
    let t = f32_tensor(&[2, 2, 2], |i| i as f64 * 0.5);
    assert_eq!(
        t.format(),
        "tensor<2, 2, 2, fp32>\n\
         [[[0.0000, 0.5000],\n  [1.0000, 1.5000]],\n\n \
         [[2.0000, 2.5000],\n  [3.0000, 3.5000]]]"
    );
    let t = Tensor::from_f64(Dtype::Bf16, &[1, 1, 1, 1], &[2.0]).unwrap();
    assert_eq!(t.format(), "tensor<1, 1, 1, 1, bf16>\n[[[[2.0000]]]]");
}

#[test]
fn format_summarises_large_tensors() {
    let t = Tensor::from_fn(Dtype::Int32, &[1001], |i| i as f64).unwrap();
    assert_eq!(
        t.format(),
        "tensor<1001, int32>\n[   0,    1,    2, ...,  998,  999, 1000]"
    );
    // Exactly 1000 elements: printed in full.
    let t = Tensor::from_fn(Dtype::Int32, &[1000], |i| i as f64).unwrap();
    let text = t.format();
    assert_eq!(text.lines().nth(1).unwrap().matches(", ").count(), 999);
    assert!(!text.contains("..."));
    let t = Tensor::from_fn(Dtype::Int32, &[100, 20], |i| i as f64).unwrap();
    assert_eq!(
        t.format(),
        "tensor<100, 20, int32>\n\
         [[   0,    1,    2, ...,   17,   18,   19],\n \
         [  20,   21,   22, ...,   37,   38,   39],\n \
         [  40,   41,   42, ...,   57,   58,   59],\n \
         ...,\n \
         [1940, 1941, 1942, ..., 1957, 1958, 1959],\n \
         [1960, 1961, 1962, ..., 1977, 1978, 1979],\n \
         [1980, 1981, 1982, ..., 1997, 1998, 1999]]"
    );
    // Short axes are kept whole; long ones are cut, at every depth.
    let t = Tensor::from_fn(Dtype::Int32, &[2, 50, 20], |i| i as f64).unwrap();
    let text = t.format();
    assert!(
        text.starts_with("tensor<2, 50, 20, int32>\n[[[   0,    1,    2, ...,   17,   18,   19],")
    );
    assert!(text.contains("\n  ...,\n"));
    assert!(text.contains("]],\n\n [[1000, 1001, 1002, ..., 1017, 1018, 1019],"));
    assert!(text.ends_with("1997, 1998, 1999]]]"));
    assert_eq!(text.lines().count(), 1 + 7 + 1 + 7);
}
