//! Tests of `.npy` reading and writing: round trips, hand-made files of every format
//! version, Fortran order, big-endian data, and errors (never panics).

use tessera_tensor::{
    read_npy, read_npy_file, write_npy, write_npy_file, Data, Dtype, NpyDtype, NpyError, Tensor,
};

/// A `.npy` file with the given version, header dict text and data, padded like numpy.
fn npy_file(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let len_size = if major == 1 { 2 } else { 4 };
    let mut header = dict.to_string();
    let pad = (64 - (8 + len_size + header.len() + 1) % 64) % 64;
    header.extend(std::iter::repeat_n(' ', pad));
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn dict(descr: &str, fortran: bool, shape: &str) -> String {
    let order = if fortran { "True" } else { "False" };
    format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}")
}

/// Values that exercise each dtype: fractions, negatives, extremes.
fn sample_values() -> Vec<f64> {
    vec![
        0.0, 1.0, -2.5, 0.1, 300.0, -70000.0, 1e-3, 12345.678, 255.0, -128.0, 0.5, 7.0,
    ]
}

#[test]
fn every_dtype_round_trips() {
    for d in Dtype::ALL {
        let t = Tensor::from_f64(d, &[3, 4], &sample_values()).unwrap();
        let bytes = write_npy(&t);
        assert_eq!(
            bytes.len() % 64,
            (12 * NpyDtype::for_dtype(d).item_size()) % 64
        );
        let back = read_npy(&bytes).unwrap();
        assert_eq!(back.dtype, NpyDtype::for_dtype(d), "{d}");
        assert_eq!(back.shape, vec![3, 4]);
        assert!(!back.fortran_order);
        let want = match d {
            Dtype::Tf32 | Dtype::Bf16 | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Dtype::Fp32,
            _ => d,
        };
        assert_eq!(back.tensor.dtype, want, "{d}");
        assert_eq!(back.tensor.to_f64_vec(), t.to_f64_vec(), "{d}");
        back.tensor.validate().unwrap();
    }
}

#[test]
fn round_trip_keeps_special_values_and_ranks() {
    let t = Tensor::from_f64(
        Dtype::Fp64,
        &[4],
        &[f64::NAN, f64::INFINITY, -0.0, f64::MIN_POSITIVE],
    )
    .unwrap();
    let back = read_npy(&write_npy(&t)).unwrap().tensor.to_f64_vec();
    assert!(back[0].is_nan());
    assert_eq!(back[1], f64::INFINITY);
    assert!(back[2] == 0.0 && back[2].is_sign_negative());
    assert_eq!(back[3], f64::MIN_POSITIVE);
    let big = Tensor {
        dtype: Dtype::Int64,
        shape: vec![2],
        data: Data::I64(vec![i64::MIN, i64::MAX]),
    };
    assert_eq!(read_npy(&write_npy(&big)).unwrap().tensor.data, big.data);
    for shape in [vec![], vec![0], vec![5], vec![2, 0, 3], vec![1, 2, 1, 2, 1]] {
        let t = Tensor::from_fn(Dtype::Fp16, &shape, |i| i as f64 / 3.0).unwrap();
        let back = read_npy(&write_npy(&t)).unwrap();
        assert_eq!(back.tensor, t, "{shape:?}");
    }
}

#[test]
fn writes_numpy_headers() {
    let t = Tensor::from_f64(Dtype::Int32, &[5], &[1.0; 5]).unwrap();
    let bytes = write_npy(&t);
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    assert!(header.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }"));
    assert!(header.ends_with(" \n"));
    assert_eq!((10 + len) % 64, 0);
    assert_eq!(&bytes[10 + len..14 + len], &1i32.to_le_bytes());
    let scalar = write_npy(&Tensor::scalar(Dtype::Bool, 1.0));
    let text = String::from_utf8_lossy(&scalar);
    assert!(text.contains("'descr': '|b1'") && text.contains("'shape': ()"));
    assert_eq!(*scalar.last().unwrap(), 1);
    let bf = write_npy(&Tensor::scalar(Dtype::Bf16, 1.0));
    assert!(String::from_utf8_lossy(&bf).contains("'<f4'"));
}

#[test]
fn reads_all_format_versions() {
    let data: Vec<u8> = (0..6i32).flat_map(|v| v.to_le_bytes()).collect();
    for major in [1, 2, 3] {
        let file = npy_file(major, &dict("<i4", false, "(2, 3)"), &data);
        let a = read_npy(&file).unwrap();
        assert_eq!(a.dtype, NpyDtype::I4);
        assert_eq!(a.tensor.dtype, Dtype::Int32);
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.tensor.data, Data::I64(vec![0, 1, 2, 3, 4, 5]));
    }
    // Version 3.0 headers are UTF-8; 1.0 and 2.0 are latin-1.
    let utf8 = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'note': 'é'}";
    assert!(read_npy(&npy_file(3, utf8, &data)).is_ok());
    assert!(read_npy(&npy_file(1, utf8, &data)).is_ok());
    let mut bad_utf8 = npy_file(3, &dict("<i4", false, "(2, 3)"), &data);
    bad_utf8[12] = 0xff;
    assert!(matches!(read_npy(&bad_utf8), Err(NpyError::BadHeader(_))));
}

#[test]
fn reads_scalars_and_one_tuples() {
    let a = read_npy(&npy_file(
        1,
        &dict("<f8", false, "()"),
        &2.5f64.to_le_bytes(),
    ))
    .unwrap();
    assert_eq!(a.shape, Vec::<usize>::new());
    assert_eq!(a.tensor.to_f64_vec(), vec![2.5]);
    let data: Vec<u8> = (0..5u8).collect();
    let a = read_npy(&npy_file(1, &dict("|u1", false, "(5,)"), &data)).unwrap();
    assert_eq!((a.dtype, a.tensor.dtype), (NpyDtype::U1, Dtype::Uint8));
    assert_eq!(a.tensor.data, Data::I64(vec![0, 1, 2, 3, 4]));
    let a = read_npy(&npy_file(1, &dict("|b1", false, "(3,)"), &[1, 0, 2])).unwrap();
    assert_eq!(a.tensor.data, Data::Bool(vec![true, false, true]));
}

#[test]
fn fortran_order_becomes_row_major() {
    // The 2x3 matrix [[0, 1, 2], [3, 4, 5]] column-major is 0 3 1 4 2 5.
    let data: Vec<u8> = [0i16, 3, 1, 4, 2, 5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let a = read_npy(&npy_file(1, &dict("<i2", true, "(2, 3)"), &data)).unwrap();
    assert!(a.fortran_order);
    assert_eq!(a.tensor.dtype, Dtype::Int16);
    assert_eq!(a.tensor.data, Data::I64(vec![0, 1, 2, 3, 4, 5]));
    // Rank 3: element (i, j, k) of shape (2, 3, 4) is at i + 2j + 6k in the file.
    let shape = [2usize, 3, 4];
    let mut file_order = [0f32; 24];
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                file_order[i + 2 * j + 6 * k] = (i * 12 + j * 4 + k) as f32;
            }
        }
    }
    let data: Vec<u8> = file_order.iter().flat_map(|v| v.to_le_bytes()).collect();
    let a = read_npy(&npy_file(2, &dict("<f4", true, "(2, 3, 4)"), &data)).unwrap();
    assert_eq!(a.shape, shape.to_vec());
    let want: Vec<f64> = (0..24).map(f64::from).collect();
    assert_eq!(a.tensor.to_f64_vec(), want);
}

#[test]
fn reads_every_numpy_dtype_and_byte_order() {
    fn check(descr: &str, bytes: Vec<u8>, npy: NpyDtype, dtype: Dtype, want: &[f64]) {
        let shape = format!("({},)", want.len());
        let a = read_npy(&npy_file(1, &dict(descr, false, &shape), &bytes)).unwrap();
        assert_eq!((a.dtype, a.tensor.dtype), (npy, dtype), "{descr}");
        assert_eq!(a.tensor.to_f64_vec(), want, "{descr}");
    }
    let be = |v: &[u64], size: usize| -> Vec<u8> {
        v.iter()
            .flat_map(|x| x.to_be_bytes()[8 - size..].to_vec())
            .collect()
    };
    check(
        ">f8",
        1.5f64.to_be_bytes().to_vec(),
        NpyDtype::F8,
        Dtype::Fp64,
        &[1.5],
    );
    check(
        ">f4",
        (-0.25f32).to_be_bytes().to_vec(),
        NpyDtype::F4,
        Dtype::Fp32,
        &[-0.25],
    );
    check("<f2", vec![0x00, 0x3c], NpyDtype::F2, Dtype::Fp16, &[1.0]);
    check(
        ">f2",
        vec![0x3c, 0x00, 0x7b, 0xff],
        NpyDtype::F2,
        Dtype::Fp16,
        &[1.0, 65504.0],
    );
    check(
        "|i1",
        vec![0xff, 0x80],
        NpyDtype::I1,
        Dtype::Int8,
        &[-1.0, -128.0],
    );
    check(">i2", be(&[0xfffe], 2), NpyDtype::I2, Dtype::Int16, &[-2.0]);
    check(
        ">i4",
        be(&[0x8000_0000], 4),
        NpyDtype::I4,
        Dtype::Int32,
        &[-2147483648.0],
    );
    check(
        ">i8",
        be(&[u64::MAX], 8),
        NpyDtype::I8,
        Dtype::Int64,
        &[-1.0],
    );
    check(
        ">u2",
        be(&[65535], 2),
        NpyDtype::U2,
        Dtype::Int32,
        &[65535.0],
    );
    check(
        "<u2",
        vec![0xff, 0xff],
        NpyDtype::U2,
        Dtype::Int32,
        &[65535.0],
    );
    check(
        ">u4",
        be(&[4294967295], 4),
        NpyDtype::U4,
        Dtype::Int64,
        &[4294967295.0],
    );
    check(
        ">u8",
        be(&[1 << 40], 8),
        NpyDtype::U8,
        Dtype::Int64,
        &[2f64.powi(40)],
    );
    check(
        "=i4",
        7i32.to_le_bytes().to_vec(),
        NpyDtype::I4,
        Dtype::Int32,
        &[7.0],
    );
    check("<u1", vec![200], NpyDtype::U1, Dtype::Uint8, &[200.0]);
    check("|b1", vec![0, 1], NpyDtype::B1, Dtype::Bool, &[0.0, 1.0]);
}

fn error_text(file: &[u8]) -> String {
    match read_npy(file) {
        Ok(a) => panic!("expected an error, read {:?}", a.shape),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_say_what_is_wrong() {
    assert_eq!(
        error_text(b"PK\x03\x04 a zip"),
        "not a .npy file (bad magic)"
    );
    assert_eq!(error_text(b""), "not a .npy file (bad magic)");
    let f4 = |dict: &str, data: &[u8]| npy_file(1, dict, data);
    assert_eq!(
        error_text(&f4(&dict("<c16", false, "(1,)"), &[0; 16])),
        "unsupported dtype '<c16' (complex numbers)"
    );
    assert_eq!(
        error_text(&f4(&dict("|O", false, "(1,)"), &[0; 8])),
        "object arrays are not supported"
    );
    assert!(error_text(&f4(&dict("<U5", false, "(1,)"), &[0; 20])).contains("unicode strings"));
    assert!(error_text(&f4(&dict("<f16", false, "(1,)"), &[0; 16])).contains("8-byte floats"));
    assert!(error_text(&f4(&dict("<M8[ns]", false, "(1,)"), &[0; 8])).contains("datetimes"));
    let structured = "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }";
    assert!(error_text(&f4(structured, &[0; 4])).contains("structured"));
    assert_eq!(
        error_text(&f4(&dict("<f4", false, "(120,)"), &[0; 400])),
        "truncated data: header says 120 elements (480 bytes) but the file has 400"
    );
    assert!(error_text(&f4(&dict("<f4", false, "(2,)"), &[0; 12])).starts_with("trailing data"));
    let overflow = dict("<f8", false, "(4294967296, 4294967296, 4294967296)");
    assert!(error_text(&f4(&overflow, &[])).contains("too many elements"));
    let huge_dim = dict("<f8", false, "(123456789012345678901234567890,)");
    assert!(error_text(&f4(&huge_dim, &[])).contains("too many elements"));
    // Element count fits but byte count does not.
    let byte_overflow = dict("<f8", false, &format!("({},)", usize::MAX / 4));
    assert!(error_text(&f4(&byte_overflow, &[])).contains("too many elements"));
    assert!(error_text(&f4("{'descr': '<f4'}", &[])).contains("no 'fortran_order' key"));
    assert!(error_text(&f4(&dict("<f4", false, "(-1,)"), &[])).contains("negative"));
    assert!(error_text(&npy_file(1, "not a dict", &[])).starts_with("malformed .npy header"));
    let mut v4 = npy_file(1, &dict("<f4", false, "()"), &[0; 4]);
    v4[6] = 4;
    assert_eq!(
        error_text(&v4),
        "unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are supported)"
    );
    let mut short = npy_file(1, &dict("<f4", false, "()"), &[0; 4]);
    short[8] = 0xff;
    short[9] = 0xff;
    assert!(error_text(&short).starts_with("truncated header"));
    let too_big = u64::MAX.to_le_bytes();
    let e = read_npy(&f4(&dict("<u8", false, "(1,)"), &too_big)).unwrap_err();
    assert!(matches!(
        e,
        NpyError::ValueOutOfRange {
            index: 0,
            value: u64::MAX
        }
    ));
    assert!(e.to_string().contains("does not fit in int64"));
}

/// A small deterministic generator for the fuzz test.
fn next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

#[test]
fn arbitrary_bytes_never_panic() {
    let valid: Vec<Vec<u8>> = Dtype::ALL
        .iter()
        .map(|&d| write_npy(&Tensor::from_fn(d, &[2, 3], |i| i as f64).unwrap()))
        .chain([npy_file(3, &dict(">i2", true, "(2, 3)"), &[1; 12])])
        .collect();
    let mut state = 1;
    let mut accepted = 0;
    for round in 0..20_000 {
        let base = &valid[round % valid.len()];
        let mut bytes = base.clone();
        match next(&mut state) % 4 {
            // Truncate anywhere.
            0 => bytes.truncate(next(&mut state) as usize % (base.len() + 1)),
            // Flip a few bytes, mostly in the header.
            1 | 2 => {
                for _ in 0..1 + next(&mut state) % 4 {
                    let at = next(&mut state) as usize % bytes.len().min(140);
                    bytes[at] = next(&mut state) as u8;
                }
            }
            // Pure noise, sometimes behind a valid magic.
            _ => {
                let len = next(&mut state) as usize % 200;
                bytes = (0..len).map(|_| next(&mut state) as u8).collect();
                if len % 2 == 0 {
                    bytes.splice(0..0, b"\x93NUMPY\x01\x00".iter().copied());
                }
            }
        }
        if let Ok(a) = read_npy(&bytes) {
            a.tensor.validate().unwrap();
            accepted += 1;
        }
    }
    // Some mutations (inside the padding or the data) leave a valid file.
    assert!(accepted > 0);
    for base in &valid {
        for len in 0..base.len() {
            assert!(read_npy(&base[..len]).is_err());
        }
    }
}

#[test]
fn files_round_trip_and_report_io_errors() {
    let dir = std::env::temp_dir().join(format!("tessera-npy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.npy");
    let t = Tensor::from_f64(Dtype::Fp32, &[2], &[1.0, 2.0]).unwrap();
    write_npy_file(&path, &t).unwrap();
    assert_eq!(read_npy_file(&path).unwrap().tensor, t);
    let missing = dir.join("missing.npy");
    let e = read_npy_file(&missing).unwrap_err();
    assert!(matches!(e, NpyError::Io { .. }));
    assert!(e.to_string().contains("missing.npy"));
    assert!(std::error::Error::source(&e).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_tensors_are_written_as_rank_1() {
    let t = Tensor {
        dtype: Dtype::Fp32,
        shape: vec![2, 2],
        data: Data::F32(vec![1.0, 2.0, 3.0]),
    };
    let a = read_npy(&write_npy(&t)).unwrap();
    assert_eq!(a.shape, vec![3]);
    assert_eq!(a.tensor.to_f64_vec(), vec![1.0, 2.0, 3.0]);
}

/// A FIFO (which would block until a writer came) and a directory are
/// refused at once, naming the path.
#[test]
fn only_regular_files_are_read() {
    let dir = std::env::temp_dir().join(format!("tessera-npy-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = read_npy_file(&dir).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    let fifo = dir.join("x.npy");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let e = read_npy_file(&fifo).unwrap_err().to_string();
        assert!(
            e.contains("not a regular file") && e.contains("x.npy"),
            "{e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
