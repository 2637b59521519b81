//! Translations: Fluent files under `locales/<tag>/*.ftl`, compiled into the binary and the
//! wasm bundle, and the negotiation of the page language.

use std::borrow::Cow;
use std::collections::HashMap;

use fluent_templates::fluent_bundle::FluentValue;
use fluent_templates::{LanguageIdentifier, Loader, langid, static_loader};
use serde::{Deserialize, Serialize};

static_loader! {
    static LOCALES = {
        locales: "../locales",
        fallback_language: "en",
        // Bidi isolation marks around arguments would end up inside names and numbers.
        customise: |bundle| bundle.set_use_isolating(false),
    };
}

static EN: LanguageIdentifier = langid!("en");
static JA: LanguageIdentifier = langid!("ja");

/// A language the console is translated into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Locale {
    #[default]
    En,
    Ja,
}

impl Locale {
    pub const ALL: [Locale; 2] = [Locale::En, Locale::Ja];

    /// The BCP 47 tag: `en` or `ja`.
    pub fn tag(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::Ja => "ja",
        }
    }

    /// Reads a tag as stored in the `lang` cookie or posted by the language switch.
    pub fn from_tag(tag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.tag() == tag)
    }

    /// Picks the best supported language from an `Accept-Language` header
    /// (RFC 9110 §12.5.4): highest `q` wins, ties go to the earlier entry, a region
    /// (`ja-JP`) matches its language, `q=0` excludes. English when nothing matches.
    pub fn negotiate(accept_language: &str) -> Self {
        let mut best: Option<(f32, Locale)> = None;
        for entry in accept_language.split(',') {
            let mut parts = entry.split(';');
            let range = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|v| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let primary = range.split('-').next().unwrap_or_default();
            let Some(locale) = Self::from_tag(primary) else {
                continue;
            };
            if q > 0.0 && best.is_none_or(|(best_q, _)| q > best_q) {
                best = Some((q, locale));
            }
        }
        best.map_or(Self::En, |(_, locale)| locale)
    }

    fn id(self) -> &'static LanguageIdentifier {
        match self {
            Self::En => &EN,
            Self::Ja => &JA,
        }
    }

    /// The message `key` in this language.
    pub fn t(self, key: &str) -> String {
        LOCALES.lookup(self.id(), key)
    }

    /// The message `key` in this language, or `None` when it is not defined (a code the
    /// console has no words for).
    pub fn try_t(self, key: &str) -> Option<String> {
        LOCALES.try_lookup(self.id(), key)
    }

    /// The message `key` with named arguments (`{ $name }` in the Fluent source). An
    /// argument that is an integer is passed as a number, so plural selectors work.
    pub fn t_with(self, key: &str, args: &[(&'static str, String)]) -> String {
        let args: HashMap<Cow<'static, str>, FluentValue<'_>> = args
            .iter()
            .map(|(name, value)| {
                let value = match value.parse::<i64>() {
                    Ok(number) => FluentValue::from(number),
                    Err(_) => FluentValue::from(value.as_str()),
                };
                (Cow::Borrowed(*name), value)
            })
            .collect();
        LOCALES.lookup_with_args(self.id(), key, &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_negotiation() {
        let cases = [
            ("", Locale::En),
            ("ja", Locale::Ja),
            ("ja-JP,ja;q=0.9,en;q=0.8", Locale::Ja),
            ("en-US,en;q=0.9,ja;q=0.8", Locale::En),
            ("fr, ja;q=0.5", Locale::Ja),
            ("en;q=0.2, ja;q=0.7", Locale::Ja),
            ("ja;q=0, en;q=0.1", Locale::En),
            ("de, fr", Locale::En),
            ("JA-jp", Locale::Ja),
        ];
        for (header, want) in cases {
            assert_eq!(Locale::negotiate(header), want, "{header:?}");
        }
    }

    #[test]
    fn messages_are_translated_with_arguments() {
        assert_eq!(Locale::En.t("sign-in-title"), "Sign in");
        assert_eq!(Locale::Ja.t("sign-in-title"), "サインイン");
        assert_eq!(
            Locale::Ja.t_with("signed-in-as", &[("name", "alice".into())]),
            "alice としてサインイン中"
        );
        let count = |n: &str| Locale::En.t_with("users-count", &[("total", n.into())]);
        assert_eq!(count("1"), "one user");
        assert_eq!(count("7"), "7 users");
    }
}
