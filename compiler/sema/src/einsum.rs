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

impl Einsum {
    /// Parses `equation` (spaces ignored). The error says what is wrong:
    /// a character that is no letter, `...` (not supported), a letter
    /// twice in one operand (a diagonal, not supported) or in the result,
    /// or a result letter no operand has.
    pub fn parse(equation: &str) -> Result<Einsum, String> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        if eq.contains("...") {
            return Err("`...` in an einsum equation is not supported: name every axis".into());
        }
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let letters = |term: &str, what: &str| -> Result<Vec<char>, String> {
            let mut out = Vec::new();
            for c in term.chars() {
                if !c.is_ascii_alphabetic() {
                    return Err(format!("`{c}` in {what} is not an axis letter"));
                }
                if out.contains(&c) {
                    return Err(format!(
                        "`{c}` twice in {what} (a diagonal or trace) is not supported"
                    ));
                }
                out.push(c);
            }
            Ok(out)
        };
        let inputs = (lhs.split(',').enumerate())
            .map(|(i, t)| letters(t, &format!("operand {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let count = |c: char| inputs.iter().filter(|t| t.contains(&c)).count();
        let output = match rhs {
            Some(r) => {
                let out = letters(r, "the result")?;
                if let Some(c) = out.iter().find(|c| count(**c) == 0) {
                    return Err(format!("the result's `{c}` is in no operand"));
                }
                out
            }
            None => {
                let mut once: Vec<char> = inputs.iter().flatten().copied().collect();
                once.sort_unstable();
                once.dedup();
                once.retain(|c| count(*c) == 1);
                once
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
        let e = Einsum::parse("bij, bjk -> bik").unwrap();
        assert_eq!(e.inputs, vec![vec!['b', 'i', 'j'], vec!['b', 'j', 'k']]);
        assert_eq!(e.output, vec!['b', 'i', 'k']);
        // numpy: the letters written once, sorted.
        assert_eq!(Einsum::parse("ij,jk").unwrap().output, vec!['i', 'k']);
        assert_eq!(Einsum::parse("ji").unwrap().output, vec!['i', 'j']);
        assert_eq!(Einsum::parse("i,i->").unwrap().output, Vec::<char>::new());
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(Einsum::parse("ii->i")
            .unwrap_err()
            .contains("twice in operand 0"));
        assert!(Einsum::parse("ij->iz")
            .unwrap_err()
            .contains("`z` is in no operand"));
        assert!(Einsum::parse("...ij->...ji").unwrap_err().contains("`...`"));
        assert!(Einsum::parse("i1,j->ij").unwrap_err().contains("`1`"));
    }
}
