//! Text one person typed and others read: the characters that would hide or reorder it.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Whether `c` is a character others would not see, or one that changes how the text
/// around it is shown: General_Category Cc (controls: NUL, escape sequences), Cf (format:
/// zero-width spaces and joiners, bidirectional overrides and isolates such as U+202E,
/// U+2066, the byte order mark), Zl and Zp (line and paragraph separators), Co (private
/// use: any font may draw anything) and Cn (unassigned: U+2065, U+FFF0 and the like, which
/// fonts draw as nothing), and the [`BLANK_LETTERS`].
pub fn is_hidden(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
    ) || BLANK_LETTERS.contains(&c)
}

/// Marks stacked on one character beyond which text is refused ("zalgo" that covers the
/// text around it); Vietnamese, the most mark-laden common script, needs two.
pub const MAX_STACKED_MARKS: usize = 3;

/// The first character of `text` that would let it pass for other text when shown to
/// other people, with its offset in characters: an [`is_hidden`] one; a variation
/// selector (U+FE00–U+FE0F, U+E0100–U+E01EF, the Mongolian U+180B–U+180F) that does not
/// follow a non-ASCII character (after `Alice` it shows as nothing; after an emoji or a
/// kanji it picks its form, as Japanese names' ideographic variants need); a combining
/// mark (General_Category Mn, Me) at the start or after a space, or beyond
/// [`MAX_STACKED_MARKS`] on one character.
pub fn disguising_character(text: &str) -> Option<(usize, char)> {
    let mut previous: Option<char> = None;
    let mut stacked = 0;
    for (at, c) in text.chars().enumerate() {
        let mark = matches!(
            c.general_category(),
            GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
        );
        let disguises = if is_hidden(c) {
            true
        } else if is_variation_selector(c) {
            !previous.is_some_and(|p| !p.is_ascii() && !is_variation_selector(p))
        } else if mark {
            stacked += 1;
            previous.is_none_or(char::is_whitespace) || stacked > MAX_STACKED_MARKS
        } else {
            stacked = 0;
            false
        };
        if disguises {
            return Some((at, c));
        }
        previous = Some(c);
    }
    None
}

fn is_variation_selector(c: char) -> bool {
    matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' | '\u{180B}'..='\u{180D}' | '\u{180F}')
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

    #[test]
    fn text_that_would_pass_for_other_text_is_found() {
        for (text, at) in [
            ("Alice\u{FE0F}", 5),
            ("Ali\u{E0100}ce", 3),
            ("a\u{180B}", 1),
            ("x\u{2065}", 1),
            ("\u{E000}", 0),
            ("\u{20E3}", 0),
            ("a \u{0301}", 2),
            ("e\u{0300}\u{0300}\u{0300}\u{0300}", 4),
            ("adm\u{200B}in", 3),
            ("🙂\u{FE0F}\u{FE0F}", 2),
        ] {
            assert_eq!(
                disguising_character(text).map(|(at, _)| at),
                Some(at),
                "{text:?}"
            );
        }
        for text in [
            "Alice Martin",
            "❤\u{FE0F} Ève",
            "葛\u{E0100}飾 北斎",
            "Nguyễn Văn Thưởng",
            "e\u{0301}",
            "Ти\u{0306}ша",
            "",
        ] {
            assert_eq!(disguising_character(text), None, "{text:?}");
        }
    }
}
