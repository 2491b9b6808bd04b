//! `dot`: `acc + a @ b` on 2-d tiles (and 3-d tiles with a leading batch
//! axis), products and sums in the accumulator's class, summed over `k` in
//! order for every output element.
//!
//! Each result element receives its products in increasing `k`, so the
//! order (and the bits) are fixed whatever the blocking. A
//! product and its addition are two roundings (no fused multiply-add).

use super::elementwise::{finish, Arg};
use super::value::{Class, Elems, Num, TileVal, ValInfo};
use super::{fail, R};
use tessera_tensor::Dtype;

/// Columns of the result kept in registers across the `k` loop.
const JB: usize = 16;

/// `c[i, j] += Σ_k a[i, k] * b[k, j]` for row-major `a` `[m, k]`, `b`
/// `[k, n]` and `c` `[m, n]`, with `mul_add(acc, x, y) = acc + x * y`.
///
/// Blocks of [`JB`] result columns stay in a local array for the whole
/// `k` loop (registers, vectorised), so each result element still takes its
/// products in increasing `k`.
fn gemm<T: Copy>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [T],
    mul_add: impl Fn(T, T, T) -> T,
) {
    if n == 0 || k == 0 {
        return;
    }
    for (crow, arow) in c.chunks_exact_mut(n).zip(a.chunks_exact(k)).take(m) {
        let mut j0 = 0;
        while j0 + JB <= n {
            let cblock = &mut crow[j0..j0 + JB];
            let mut acc: [T; JB] = std::array::from_fn(|t| cblock[t]);
            for (&x, brow) in arow.iter().zip(b.chunks_exact(n)) {
                let bblock = &brow[j0..j0 + JB];
                for t in 0..JB {
                    acc[t] = mul_add(acc[t], x, bblock[t]);
                }
            }
            cblock.copy_from_slice(&acc);
            j0 += JB;
        }
        for (j, cj) in crow.iter_mut().enumerate().skip(j0) {
            for (&x, brow) in arow.iter().zip(b.chunks_exact(n)) {
                *cj = mul_add(*cj, x, brow[j]);
            }
        }
    }
}

/// The result of `dot` of type `out`.
pub(crate) fn dot(a: Arg<'_>, b: Arg<'_>, acc: Arg<'_>, tf32: bool, out: &ValInfo) -> R<TileVal> {
    let (sa, sb, sc) = (&a.1.shape[..], &b.1.shape[..], &acc.1.shape[..]);
    let rank = sc.len();
    let ok_rank = (rank == 2 || rank == 3) && sa.len() == rank && sb.len() == rank;
    let r = rank.saturating_sub(2);
    if !ok_rank
        || sa[..r] != sc[..r]
        || sb[..r] != sc[..r]
        || sa[r] != sc[r]
        || sb[r + 1] != sc[r + 1]
        || sa[r + 1] != sb[r]
    {
        return fail(format!(
            "dot of shapes {sa:?} and {sb:?} into {sc:?} does not match"
        ));
    }
    if out.shape != sc {
        return fail(format!(
            "dot accumulates into {sc:?} but its result is {:?}",
            out.shape
        ));
    }
    let batch: usize = sc[..r].iter().product();
    let (m, k, n) = (sc[r], sa[r + 1], sc[r + 1]);
    let class = acc.0.class();
    let wide = Num::new(match class {
        Class::F32 => Dtype::Fp32,
        Class::F64 => Dtype::Fp64,
        Class::Int => Dtype::Int64,
        Class::Bool => return fail("dot into a boolean accumulator"),
    });
    let operand = |x: Arg<'_>| -> TileVal {
        let mut t = x.0.cast(x.1.num, wide, true).into_owned();
        if tf32 {
            if let TileVal::F32(e) = &mut t {
                let tf = Num::new(Dtype::Tf32);
                e.map_in_place(|v| tf.round_f32(v));
            }
        }
        t
    };
    let (a, b) = (operand(a), operand(b));
    let (la, lb, lc) = (m * k, k * n, m * n);
    let dims = (m, k, n);
    let c = match (&a, &b, acc.0.clone()) {
        (TileVal::F32(x), TileVal::F32(y), TileVal::F32(z)) => {
            let (x, y, mut z) = (x.as_slice(), y.as_slice(), into_vec(z));
            for t in 0..batch {
                let (x, y) = (&x[t * la..][..la], &y[t * lb..][..lb]);
                gemm(dims, x, y, &mut z[t * lc..][..lc], |s, p, q| s + p * q);
            }
            TileVal::F32(Elems::from_vec(z))
        }
        (TileVal::F64(x), TileVal::F64(y), TileVal::F64(z)) => {
            let (x, y, mut z) = (x.as_slice(), y.as_slice(), into_vec(z));
            for t in 0..batch {
                let (x, y) = (&x[t * la..][..la], &y[t * lb..][..lb]);
                gemm(dims, x, y, &mut z[t * lc..][..lc], |s, p, q| s + p * q);
            }
            TileVal::F64(Elems::from_vec(z))
        }
        (TileVal::Int(x), TileVal::Int(y), TileVal::Int(z)) => {
            let (x, y, mut z) = (x.as_slice(), y.as_slice(), into_vec(z));
            for t in 0..batch {
                let (x, y) = (&x[t * la..][..la], &y[t * lb..][..lb]);
                gemm(dims, x, y, &mut z[t * lc..][..lc], |s, p, q| {
                    s.wrapping_add(p.wrapping_mul(q))
                });
            }
            TileVal::Int(Elems::from_vec(z))
        }
        _ => return fail("internal error: dot operands of mixed classes"),
    };
    Ok(finish(c, out))
}

/// The elements as a vector.
fn into_vec<T: Copy>(e: Elems<T>) -> Vec<T> {
    match e {
        Elems::One(x) => vec![x],
        Elems::Many(v) => v,
    }
}
