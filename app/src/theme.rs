//! The colour theme: the system's (the browser's `prefers-color-scheme`), or light or dark
//! as the person chose, remembered in a cookie like the language. The server puts the
//! choice on `<html>`, where the stylesheet's `dark` variant reads it (style/main.css), so
//! it holds without JavaScript and from the first paint.

use serde::{Deserialize, Serialize};

/// A theme the person may choose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Theme {
    /// Light or dark as the browser prefers.
    #[default]
    System,
    Light,
    Dark,
}

impl Theme {
    pub const ALL: [Theme; 3] = [Theme::System, Theme::Light, Theme::Dark];

    /// The name the cookie and the theme switch's form carry.
    pub fn tag(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Light => "light",
            Self::Dark => "dark",
        }
    }

    /// Reads a tag as stored in the cookie or posted by the switch.
    pub fn from_tag(tag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.tag() == tag)
    }

    /// The class of `<html>`: `light` or `dark` override the browser's preference, none
    /// follows it.
    pub fn class(self) -> &'static str {
        match self {
            Self::System => "",
            Self::Light => "light",
            Self::Dark => "dark",
        }
    }

    /// The symbol of the theme switch's button: a half-filled circle (the system's,
    /// either), a sun, a crescent moon.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::System => "◐",
            Self::Light => "☀",
            Self::Dark => "☾",
        }
    }

    /// The page's `color-scheme` (form controls, scroll bars): both, or the one chosen.
    pub fn color_scheme(self) -> &'static str {
        match self {
            Self::System => "light dark",
            Self::Light => "light",
            Self::Dark => "dark",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_theme_reads_back_from_its_tag() {
        for theme in Theme::ALL {
            assert_eq!(Theme::from_tag(theme.tag()), Some(theme));
        }
        assert_eq!(Theme::from_tag("Dark"), None);
        assert_eq!(Theme::from_tag(""), None);
    }
}
