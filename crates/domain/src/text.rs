//! Text one person typed and others read: the characters that would hide or reorder it.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Whether `c` is a character others would not see, or one that changes how the text
/// around it is shown: General_Category Cc (controls: NUL, escape sequences), Cf (format:
/// zero-width spaces and joiners, bidirectional overrides and isolates such as U+202E,
/// U+2066, the byte order mark), Zl and Zp (line and paragraph separators), and the
/// [`BLANK_LETTERS`].
pub fn is_hidden(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || BLANK_LETTERS.contains(&c)
}

/// Letters and marks that show as nothing, or as an empty cell, outside the categories
/// [`is_hidden`] refuses whole: the combining grapheme joiner U+034F, the Hangul fillers
/// U+115F, U+1160, U+3164 and U+FFA0, the Khmer inherent vowels U+17B4 and U+17B5 (all
/// Default_Ignorable_Code_Point in Unicode's DerivedCoreProperties), and the blank
/// Braille pattern U+2800. A name made of them looks empty, or like another name.
pub const BLANK_LETTERS: [char; 8] = [
    '\u{034F}', '\u{115F}', '\u{1160}', '\u{17B4}', '\u{17B5}', '\u{2800}', '\u{3164}', '\u{FFA0}',
];

/// `text` with every [`is_hidden`] character written out as `\u{XXXX}`, for showing what
/// someone typed (a user name tried at sign-in, in the audit log) as it was, without letting
/// it reorder or hide what is shown around it.
pub fn reveal_hidden(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hidden(c) {
            shown.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_written_out_and_the_rest_kept() {
        assert_eq!(
            reveal_hidden("x\u{202e}evil\u{7}"),
            "x\\u{202E}evil\\u{0007}"
        );
        assert_eq!(reveal_hidden("adm\u{200b}in"), "adm\\u{200B}in");
        assert_eq!(reveal_hidden("山田 Ève 🙂"), "山田 Ève 🙂");
        for hidden in [
            '\0', '\u{1b}', '\u{200d}', '\u{2066}', '\u{2028}', '\u{2029}', '\u{feff}', '\u{3164}',
            '\u{2800}', '\u{ffa0}',
        ] {
            assert!(is_hidden(hidden), "{hidden:?}");
        }
        for shown in ['a', ' ', 'é', '山', '🙂', 'ㄱ', '⠁'] {
            assert!(!is_hidden(shown), "{shown:?}");
        }
    }
}
