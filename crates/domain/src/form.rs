//! `application/x-www-form-urlencoded` bodies, read strictly (WHATWG URL §5.1): invalid
//! UTF-8 after percent-decoding is an error instead of being replaced, so a password or a
//! token is never silently altered. Every form the console receives goes through
//! [`parse_form`] (the server's `Form`), the OAuth endpoints' bodies included.

use percent_encoding::percent_decode;

/// A form body that is not UTF-8 once percent-decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the form is not valid UTF-8 once percent-decoded")]
pub struct InvalidForm;

/// The fields of a form body, in the order sent: `name=value` pairs split on `&` (empty
/// pairs skipped), the name ending at the first `=` (a pair without one has an empty
/// value), `+` read as a space, then percent-decoded (a `%` not followed by two hex digits
/// stays as it is). The caller bounds the body's size.
pub fn parse_form(bytes: &[u8]) -> Result<Vec<(String, String)>, InvalidForm> {
    let mut fields = Vec::new();
    for pair in bytes.split(|b| *b == b'&').filter(|p| !p.is_empty()) {
        let mut halves = pair.splitn(2, |b| *b == b'=');
        let name = decode(halves.next().unwrap_or_default())?;
        let value = decode(halves.next().unwrap_or_default())?;
        fields.push((name, value));
    }
    Ok(fields)
}

fn decode(raw: &[u8]) -> Result<String, InvalidForm> {
    let plus_as_space: Vec<u8> = raw
        .iter()
        .map(|b| if *b == b'+' { b' ' } else { *b })
        .collect();
    percent_decode(&plus_as_space)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| InvalidForm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_decodes_and_keeps_the_order() {
        let fields = parse_form(b"b=1&&a=x+y%26z%3D%E3%81%82&flag&a=").unwrap();
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            fields,
            [("b", "1"), ("a", "x y&z=\u{3042}"), ("flag", ""), ("a", "")]
        );
        assert_eq!(parse_form(b"").unwrap(), []);
        assert_eq!(
            parse_form(b"p=100%&q=%zz").unwrap(),
            [("p".into(), "100%".into()), ("q".into(), "%zz".into())]
        );
    }

    #[test]
    fn invalid_utf8_is_refused_not_replaced() {
        assert_eq!(parse_form(b"password=%FF%FE"), Err(InvalidForm));
        assert_eq!(parse_form(b"pass\xffword=x"), Err(InvalidForm));
    }
}
