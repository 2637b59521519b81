//! The console's vocabulary, shared by the server and the browser (wasm-safe: no I/O).
//!
//! Every type here validates on construction, so holding a value proves it is well formed.

pub mod claim;
pub mod form;
mod names;
pub mod object_names;
mod password;
pub mod text;
mod user;
pub mod views;

pub use names::{NameError, RoleName, Roles, UserName};
pub use password::{Password, PasswordError};
pub use user::{BuiltinRole, SignedInUser};
