//! How a path is written for people and JSON, and read back.

/// A path for JSON and messages: as it is when valid UTF-8, else in [`quote_path`]'s form
/// (`"caf\351"`), never with replacement characters.
pub fn path_text(name: &[u8]) -> String {
    match std::str::from_utf8(name) {
        Ok(s) => s.to_owned(),
        Err(_) => quote_path(name),
    }
}

/// A path as git prints it with `core.quotePath=true`: unchanged when it holds only
/// printable ASCII other than `"` and `\`, else in double quotes with C escapes and
/// octal for other bytes.
pub fn quote_path(name: &[u8]) -> String {
    let plain = name
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        return String::from_utf8_lossy(name).into_owned();
    }
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for &b in name {
        match b {
            b'\x07' => out.push_str("\\a"),
            b'\x08' => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\x0b' => out.push_str("\\v"),
            b'\x0c' => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// The bytes [`path_text`] wrote `text` from: the quoted form is only ever written for
/// bytes that are not UTF-8, so a text that unquotes to UTF-8 is a name as it is.
pub fn from_path_text(text: &str) -> Vec<u8> {
    unquote(text)
        .filter(|bytes| std::str::from_utf8(bytes).is_err())
        .unwrap_or_else(|| text.as_bytes().to_vec())
}

/// Git's C-style quoting undone, if `text` is in that form.
fn unquote(text: &str) -> Option<Vec<u8>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?.as_bytes();
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let b = inner[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let next = *inner.get(i + 1)?;
        let simple = match next {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b't' => Some(b'\t'),
            b'n' => Some(b'\n'),
            b'v' => Some(0x0b),
            b'f' => Some(0x0c),
            b'r' => Some(b'\r'),
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            i += 2;
            continue;
        }
        let digits = inner.get(i + 1..i + 4)?;
        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
            return None;
        }
        let value = digits
            .iter()
            .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
        out.push(u8::try_from(value).ok()?);
        i += 4;
    }
    Some(out)
}
