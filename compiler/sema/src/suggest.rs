//! "Did you mean" suggestions by edit distance.

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
