//! Reading `application/x-www-form-urlencoded` bodies strictly: bounded size, and invalid
//! UTF-8 is an error instead of being replaced (so a password is never silently altered).
//! The parsing itself is [`banlieue_domain::form::parse_form`] (fuzzed: `fuzz/`).

use app::AppError;
use axum::body::Body;
use banlieue_domain::form::parse_form;

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

    /// Parses a form body ([`banlieue_domain::form::parse_form`]). Errors:
    /// [`AppError::InvalidForm`] for bytes that are not UTF-8 after percent-decoding.
    pub fn parse(bytes: &[u8]) -> Result<Self, AppError> {
        parse_form(bytes)
            .map(Self)
            .map_err(|_| AppError::InvalidForm)
    }

    /// The field's value, or `""` when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every value of the field, in the order sent (a group of checkboxes sends one per
    /// box ticked).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every field, in the order sent.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }
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
    fn a_repeated_field_gives_every_value() {
        let form = Form::parse(b"roles=viewer&name=a&roles=claimer").unwrap();
        assert_eq!(form.all("roles").collect::<Vec<_>>(), ["viewer", "claimer"]);
        assert_eq!(form.get("roles"), "claimer");
        assert_eq!(form.all("missing").count(), 0);
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
