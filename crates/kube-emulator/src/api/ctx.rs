//! Per-request options of a write: the caller, `dryRun`, `fieldValidation`, the field
//! manager and `force`, and the warnings the write collects.

use crate::auth::UserInfo;

/// `fieldValidation` query parameter (how unknown fields are reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    /// Drop silently.
    Ignore,
    /// Drop with a `Warning` header (the server default).
    #[default]
    Warn,
    /// Refuse with 400.
    Strict,
}

/// Per-request options.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The (possibly impersonated) caller.
    pub(crate) user: &'a UserInfo,
    /// `dryRun=All`.
    pub(crate) dry_run: bool,
    /// `fieldValidation`.
    pub(crate) field_validation: FieldValidation,
    /// Warnings collected for the `Warning` header.
    pub(crate) warnings: Vec<String>,
    /// The field manager of the write: the `fieldManager` parameter, else (for non-apply
    /// writes) the `User-Agent` up to its first `/`, as the real server derives it. Empty
    /// for internal writes, which then record no `managedFields` entry.
    pub(crate) field_manager: String,
    /// `force=true` (server-side apply takes conflicting fields).
    pub(crate) force: bool,
}

impl<'a> Ctx<'a> {
    /// Options for an internal caller: no dry run, unknown fields dropped silently.
    pub fn new(user: &'a UserInfo) -> Self {
        Self {
            user,
            dry_run: false,
            field_validation: FieldValidation::Ignore,
            warnings: Vec::new(),
            field_manager: String::new(),
            force: false,
        }
    }
}
