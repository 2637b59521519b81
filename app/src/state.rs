//! What the server tells a page about the request: language, who is signed in, and the
//! outcome of the form just posted.

use banlieue_domain::SignedInUser;
use serde::{Deserialize, Serialize};

use crate::AppError;
use crate::i18n::Locale;

/// Per-request page state. The server puts it in the request extensions; the page reads it
/// during SSR and the browser receives the same value for hydration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageState {
    pub locale: Locale,
    pub user: Option<SignedInUser>,
    /// Set when a form post is answered with the page itself (not a redirect).
    pub feedback: Option<FormFeedback>,
}

/// The result of a refused form post, and what to put back into the form so nothing
/// typed (except passwords) is lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormFeedback {
    pub error: AppError,
    pub user_name: String,
}
