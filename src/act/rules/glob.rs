//! Shell-style wildcards for rule conditions on container and pod names: `*` matches any run
//! of characters (none included), `?` exactly one; everything else matches itself. Matching is
//! case-sensitive (Kubernetes and Docker names are), linear in practice, and never fails.

/// Longest pattern a rule may hold (characters).
const MAX_PATTERN_CHARS: usize = 512;

/// Why a pattern is refused, or `None` when it is usable.
pub fn problem(pattern: &str) -> Option<String> {
    if pattern.trim().is_empty() {
        Some("the pattern is empty (use * to match every container)".into())
    } else if pattern.chars().count() > MAX_PATTERN_CHARS {
        Some(format!(
            "the pattern is longer than {MAX_PATTERN_CHARS} characters"
        ))
    } else {
        None
    }
}

/// True when `text` matches `pattern` as a whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it has been stretched to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches("jupyter-*", "jupyter-0"));
        assert!(matches("jupyter-*", "jupyter-"));
        assert!(!matches("jupyter-*", "my-jupyter-0"));
        assert!(matches("*jupyter*", "my-jupyter-0"));
        assert!(matches("ml/*", "ml/trainer-7d9f"));
        assert!(!matches("ml/*", "batch/eval"));
        assert!(matches("trainer-????", "trainer-7d9f"));
        assert!(!matches("trainer-???", "trainer-7d9f"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "aXXbYYbc"));
        assert!(!matches("a*b*c", "aXXbYYb"));
        assert!(!matches("web", "Web"));
        assert!(matches("nötebook-*", "nötebook-1"));
    }

    #[test]
    fn refused_patterns() {
        assert!(problem("").is_some());
        assert!(problem("  ").is_some());
        assert!(problem(&"*".repeat(MAX_PATTERN_CHARS + 1)).is_some());
        assert!(problem("jupyter-*").is_none());
    }
}
