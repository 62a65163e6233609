//! Text for a terminal: anything that came from outside (a process name, a command line, a
//! companion's answer, a file name) is printed with its control characters escaped, so it can
//! never move the cursor, retitle the window or hide what follows it.

use std::borrow::Cow;

/// `s` with every control character (C0, DEL and the C1 range U+0080–U+009F that some
/// terminals read as escape sequences) written as an escape (`\x1b`, `\n`, `\t`, `\u{9b}`);
/// borrowed when there is nothing to escape. A tab or newline inside a field is escaped too,
/// as it would break the row.
pub fn escape_control(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Like [`escape_control`] but newlines are kept: for messages of several lines.
pub fn escape_keeping_lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_lines: bool) -> Cow<'_, str> {
    let is_control = |c: char| c.is_control() && !(keep_lines && c == '\n');
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !is_control(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// True when standard output is a terminal (escape what goes there).
pub fn stdout_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert!(matches!(
            escape_control("python3 train.py"),
            Cow::Borrowed(_)
        ));
        assert_eq!(escape_control("a\x1b]0;pwned\x07b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(escape_control("x\ny\tz\r"), "x\\ny\\tz\\r");
        assert_eq!(escape_control("c1\u{9b}31m"), "c1\\u{9b}31m");
        assert_eq!(escape_control("del\x7f"), "del\\x7f");
        assert_eq!(escape_control("ünïcode ✓"), "ünïcode ✓");
        assert_eq!(escape_keeping_lines("a\nb\x1b"), "a\nb\\x1b");
    }
}
