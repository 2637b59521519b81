//! Reading `application/x-www-form-urlencoded` bodies strictly: bounded size, and invalid
//! UTF-8 is an error instead of being replaced (so a password is never silently altered).

use app::AppError;
use axum::body::Body;
use percent_encoding::percent_decode;

/// Largest form body accepted, in bytes. A 128-byte password and its neighbours fit many
/// times over; a megabyte is refused before it is read whole or hashed.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// A parsed form: its fields in order. [`Form::get`] takes the last occurrence; OAuth
/// endpoints read [`Form::pairs`] to refuse repeated parameters.
#[derive(Debug, Default)]
pub struct Form(Vec<(String, String)>);

impl Form {
    /// Reads and parses `body`. Errors: [`AppError::RequestTooLarge`] beyond
    /// [`MAX_FORM_BYTES`], [`AppError::InvalidForm`] for bytes that are not UTF-8 after
    /// percent-decoding (WHATWG URL §5.1).
    pub async fn read(body: Body) -> Result<Self, AppError> {
        let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
            .await
            .map_err(|_| AppError::RequestTooLarge)?;
        Self::parse(&bytes)
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, AppError> {
        let mut fields = Vec::new();
        for pair in bytes.split(|b| *b == b'&').filter(|p| !p.is_empty()) {
            let mut halves = pair.splitn(2, |b| *b == b'=');
            let name = decode(halves.next().unwrap_or_default())?;
            let value = decode(halves.next().unwrap_or_default())?;
            fields.push((name, value));
        }
        Ok(Self(fields))
    }

    /// The field's value, or `""` when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every field, in the order sent.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }
}

fn decode(raw: &[u8]) -> Result<String, AppError> {
    let plus_as_space: Vec<u8> = raw
        .iter()
        .map(|b| if *b == b'+' { b' ' } else { *b })
        .collect();
    percent_decode(&plus_as_space)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| AppError::InvalidForm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent_and_plus() {
        let form = Form::parse(b"user_name=alice&password=a+b%26c%3D%E3%81%82&empty=").unwrap();
        assert_eq!(form.get("user_name"), "alice");
        assert_eq!(form.get("password"), "a b&c=\u{3042}");
        assert_eq!(form.get("empty"), "");
        assert_eq!(form.get("missing"), "");
    }

    #[test]
    fn invalid_utf8_is_refused_not_replaced() {
        assert_eq!(
            Form::parse(b"password=%FF%FE").unwrap_err(),
            AppError::InvalidForm
        );
        assert_eq!(
            Form::parse(b"pass\xffword=x").unwrap_err(),
            AppError::InvalidForm
        );
    }

    #[tokio::test]
    async fn oversized_bodies_are_refused() {
        let body = Body::from(vec![b'a'; MAX_FORM_BYTES + 1]);
        assert_eq!(
            Form::read(body).await.unwrap_err(),
            AppError::RequestTooLarge
        );
    }
}
