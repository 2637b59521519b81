//! One module per page.

mod account;
mod audit;
mod authorize;
mod change_password;
mod claim;
mod dashboard;
mod not_found;
mod pools;
mod roles;
mod sign_in;
mod user_detail;
mod users;

pub use account::Account;
pub use audit::Audit;
pub use authorize::Authorize;
pub use change_password::ChangePassword;
pub use claim::ClaimDetail;
pub use dashboard::Dashboard;
pub use not_found::NotFound;
pub use pools::Pools;
pub use roles::Roles;
pub use sign_in::SignIn;
pub use user_detail::UserDetail;
pub use users::Users;

/// Classes of a text input.
pub(crate) const INPUT_CLASS: &str = "mt-1 block w-full rounded-lg border border-slate-300 bg-white px-3 py-2 shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-2 focus:ring-indigo-500/30 dark:border-slate-700 dark:bg-slate-950";

/// Classes of a card holding one form.
pub(crate) const CARD_CLASS: &str = "w-full max-w-sm rounded-2xl border border-slate-200 bg-white p-8 shadow-sm dark:border-slate-800 dark:bg-slate-900";

pub(crate) use users::{DANGER_BUTTON, PRIMARY_BUTTON, SECONDARY_BUTTON, encode};
