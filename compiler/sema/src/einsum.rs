//! numpy's and torch's einsum equations (`"bhqd,bhkd->bhqk"`), parsed once
//! for the checker, which types a call, and the graph builder, which
//! lowers it to permutes, sums and batched products.

/// A parsed equation: the letters of each operand and of the result, one
/// per axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Einsum {
    /// Each operand's letters, in axis order.
    pub inputs: Vec<Vec<char>>,
    /// The result's letters: the ones after `->`, or (numpy's implicit
    /// form) every letter written once, in alphabetical order.
    pub output: Vec<char>,
}

/// The first of the letters `...` stands for (Greek, so that they are no
/// letter of an equation); [`is_ellipsis`] tells them apart.
const ELLIPSIS_BASE: u32 = 0x3b1;

/// Whether `c` is one of the letters a `...` was expanded to.
pub fn is_ellipsis(c: char) -> bool {
    !c.is_ascii()
}

impl Einsum {
    /// Parses `equation` (spaces ignored) for operands of ranks `ranks`.
    /// A `...` in an operand stands for the axes its letters leave out,
    /// the same axes in every operand, aligned to the right (numpy's
    /// broadcast dimensions); the result's `...` places them, and without
    /// `->` they come first. A letter twice in one operand takes the
    /// diagonal of those axes (`ii->i`; `ii` alone is the trace). The error
    /// says what is wrong: a character that is no letter, `...` twice in a
    /// term or missing from a result that needs it, a letter twice in the
    /// result, or a result letter no operand has.
    pub fn parse(equation: &str, ranks: &[usize]) -> Result<Einsum, String> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        // A term's letters, with `None` where its `...` is.
        let letters = |term: &str, what: &str| -> Result<Vec<Option<char>>, String> {
            let mut out = Vec::new();
            let mut rest = term;
            while !rest.is_empty() {
                if let Some(after) = rest.strip_prefix("...") {
                    if out.contains(&None) {
                        return Err(format!("`...` twice in {what}"));
                    }
                    out.push(None);
                    rest = after;
                    continue;
                }
                let c = rest.chars().next().expect("not empty");
                if !c.is_ascii_alphabetic() {
                    return Err(format!("`{c}` in {what} is not an axis letter"));
                }
                out.push(Some(c));
                rest = &rest[c.len_utf8()..];
            }
            Ok(out)
        };
        let terms = (lhs.split(',').enumerate())
            .map(|(i, t)| letters(t, &format!("operand {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        // How many axes each `...` stands for, and the letters of the most.
        let spans: Vec<usize> = (terms.iter().enumerate())
            .map(|(i, t)| {
                let named = t.iter().filter(|c| c.is_some()).count();
                match t.contains(&None) {
                    true => ranks.get(i).map_or(0, |r| r.saturating_sub(named)),
                    false => 0,
                }
            })
            .collect();
        let most = spans.iter().copied().max().unwrap_or(0);
        let ellipsis: Vec<char> = (0..most)
            .map(|k| char::from_u32(ELLIPSIS_BASE + k as u32).expect("a Greek letter"))
            .collect();
        let expand = |t: &[Option<char>], span: usize| -> Vec<char> {
            t.iter()
                .flat_map(|c| match c {
                    Some(c) => vec![*c],
                    None => ellipsis[most - span..].to_vec(),
                })
                .collect()
        };
        let inputs: Vec<Vec<char>> = (terms.iter().zip(&spans))
            .map(|(t, s)| expand(t, *s))
            .collect();
        // Occurrences over every operand: a letter written once is kept by
        // numpy's implicit result, one written twice (a trace) is summed.
        let count = |c: char| inputs.iter().flatten().filter(|l| **l == c).count();
        let output = match rhs {
            Some(r) => {
                let term = letters(r, "the result")?;
                if most > 0 && !term.contains(&None) {
                    return Err(
                        "the operands' `...` axes need a place in the result: write `...` there \
                         (`...ij->...i`)"
                            .into(),
                    );
                }
                let out = expand(&term, most);
                for (i, c) in out.iter().enumerate() {
                    if out[..i].contains(c) {
                        return Err(format!("`{c}` twice in the result"));
                    }
                }
                if let Some(c) = out.iter().find(|c| count(**c) == 0) {
                    return Err(format!("the result's `{c}` is in no operand"));
                }
                out
            }
            None => {
                let mut once: Vec<char> = inputs.iter().flatten().copied().collect();
                once.retain(|c| !is_ellipsis(*c) && count(*c) == 1);
                once.sort_unstable();
                ellipsis.iter().copied().chain(once).collect()
            }
        };
        Ok(Einsum { inputs, output })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_and_implicit_results() {
        let e = Einsum::parse("bij, bjk -> bik", &[3, 3]).unwrap();
        assert_eq!(e.inputs, vec![vec!['b', 'i', 'j'], vec!['b', 'j', 'k']]);
        assert_eq!(e.output, vec!['b', 'i', 'k']);
        // numpy: the letters written once, sorted.
        assert_eq!(
            Einsum::parse("ij,jk", &[2, 2]).unwrap().output,
            vec!['i', 'k']
        );
        assert_eq!(Einsum::parse("ji", &[2]).unwrap().output, vec!['i', 'j']);
        assert_eq!(
            Einsum::parse("i,i->", &[1, 1]).unwrap().output,
            Vec::<char>::new()
        );
        // A trace: the letter written twice is summed.
        assert_eq!(
            Einsum::parse("ii", &[2]).unwrap().output,
            Vec::<char>::new()
        );
        assert_eq!(
            Einsum::parse("ii->i", &[2]).unwrap().inputs,
            vec![vec!['i', 'i']]
        );
    }

    #[test]
    fn ellipsis_axes_align_right() {
        let e = Einsum::parse("...ij,jk->...ik", &[4, 2]).unwrap();
        let (a, b) = ('\u{3b1}', '\u{3b2}');
        assert_eq!(e.inputs[0], vec![a, b, 'i', 'j']);
        assert_eq!(e.output, vec![a, b, 'i', 'k']);
        // The shorter `...` takes the last of the axes.
        let e = Einsum::parse("...d,...d", &[3, 2]).unwrap();
        assert_eq!(e.inputs[1], vec![b, 'd']);
        assert_eq!(e.output, vec![a, b]);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(Einsum::parse("ij->ii", &[2])
            .unwrap_err()
            .contains("twice in the result"));
        assert!(Einsum::parse("ij->iz", &[2])
            .unwrap_err()
            .contains("`z` is in no operand"));
        assert!(Einsum::parse("...ij->ij", &[3])
            .unwrap_err()
            .contains("`...`"));
        assert!(Einsum::parse("......i", &[3])
            .unwrap_err()
            .contains("twice"));
        assert!(Einsum::parse("i1,j->ij", &[2, 1])
            .unwrap_err()
            .contains("`1`"));
    }
}
