//! Every message exists in every language, and every key the code uses exists.

use std::collections::BTreeSet;
use std::path::Path;

use app::{AppError, Locale};
use fluent_syntax::ast::Entry;

fn message_ids(lang: &str) -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../locales")
        .join(lang);
    let mut ids = BTreeSet::new();
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        if path.extension().is_some_and(|e| e == "ftl") {
            let source = std::fs::read_to_string(&path).unwrap();
            let resource = fluent_syntax::parser::parse(source.as_str())
                .unwrap_or_else(|(_, errors)| panic!("{}: {errors:?}", path.display()));
            for entry in resource.body {
                if let Entry::Message(message) = entry {
                    assert!(
                        ids.insert(message.id.name.to_owned()),
                        "{} defined twice in {lang}",
                        message.id.name
                    );
                }
            }
        }
    }
    ids
}

#[test]
fn every_language_has_the_same_keys() {
    let en = message_ids("en");
    assert!(!en.is_empty());
    for locale in Locale::ALL {
        let other = message_ids(locale.tag());
        let missing: Vec<_> = en.difference(&other).collect();
        let extra: Vec<_> = other.difference(&en).collect();
        assert!(missing.is_empty(), "{} lacks {missing:?}", locale.tag());
        assert!(
            extra.is_empty(),
            "{} has keys English lacks: {extra:?}",
            locale.tag()
        );
    }
}

/// The string literals passed to `t(` / `t_with(` in the app's sources.
fn keys_used_in_code() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            for marker in [".t(\"", ".t_with(\""] {
                for (at, _) in source.match_indices(marker) {
                    let rest = &source[at + marker.len()..];
                    keys.insert(rest[..rest.find('"').unwrap()].to_owned());
                }
            }
        }
    }
    keys
}

#[test]
fn every_key_the_code_uses_is_defined() {
    let en = message_ids("en");
    let used = keys_used_in_code();
    assert!(used.len() > 10, "the scan found too few keys: {used:?}");
    let mut wanted: BTreeSet<String> = used;
    wanted.extend(
        AppError::examples()
            .iter()
            .map(|e| e.fluent_key().to_owned()),
    );
    wanted.extend(Locale::ALL.iter().map(|l| format!("language-{}", l.tag())));
    let undefined: Vec<_> = wanted.difference(&en).collect();
    assert!(undefined.is_empty(), "undefined messages: {undefined:?}");
}

#[test]
fn error_messages_are_translated_not_echoed() {
    for error in AppError::examples() {
        for locale in Locale::ALL {
            let text = error.message(locale);
            assert_ne!(text, error.fluent_key(), "{error:?} in {locale:?}");
            // fluent-templates answers a message whose arguments are missing with this.
            assert!(
                !text.contains("Unknown localization key"),
                "{error:?} in {locale:?}: {text}"
            );
            assert!(!text.is_empty());
        }
    }
    assert!(
        AppError::Throttled {
            retry_after_secs: 42
        }
        .message(Locale::Ja)
        .contains("42")
    );
}
