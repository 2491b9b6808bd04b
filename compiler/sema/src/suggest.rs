//! "Did you mean" suggestions: by edit distance, and for the names of
//! torch, Triton and numpy functions that Tessera spells otherwise.

/// What Tessera writes for `name`, a function of torch, Triton or numpy
/// that it has under another name or form, or has no need of.
pub fn foreign_function(name: &str) -> Option<&'static str> {
    Some(match name {
        "trans" => "a tile's transpose is `x.T` (Triton's `tl.trans`); `permute(x, dims)` reorders any axes",
        "fma" => "write `a * b + c`",
        "multiple_of" | "max_contiguous" | "max_constancy" | "assume" => {
            "Tessera takes no alignment or contiguity hints: drop the call; the compiler finds \
             what the index expressions allow from the shapes"
        }
        "debug_barrier" | "barrier" | "syncthreads" => {
            "kernels place no barriers: the compiler synchronises the shared-memory stages it creates"
        }
        "atomic_cas" | "atomic_xchg" | "atomic_and" | "atomic_or" | "atomic_xor" => {
            "the atomics are `atomic_add`, `atomic_max` and `atomic_min` (an `out` tensor may \
             declare its start value: `out m: tensor<C, fp32> = -inf`); there is no \
             compare-and-swap to build locks on"
        }
        "cat" | "concatenate" | "hstack" | "vstack" => "joining along an axis is `concat(xs, axis)`",
        "view" | "flatten" => "`reshape(x, [..])` (one size may be -1)",
        "numel" | "size" | "shape" => {
            "sizes are named in the types: in `x: tensor<R, C, fp32>` the sizes are `R` and `C`"
        }
        _ => return None,
    })
}

/// The candidate closest to `name`, if it is close enough to be a typo.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() > 64 {
        return None;
    }
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| c.len() <= 64 && *c != name)
        .map(|c| (distance(name, c), c))
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance between two short strings.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_typos() {
        assert_eq!(
            super::closest("sofmax", ["softmax", "sum"]),
            Some("softmax")
        );
        assert_eq!(super::closest("zzz", ["softmax"]), None);
    }
}
