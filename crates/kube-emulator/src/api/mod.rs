//! Object lifecycle: create, update, patch and delete with the API server's rules, and the
//! background garbage collector.
//!
//! Rules from <https://kubernetes.io/docs/reference/using-api/api-concepts/>,
//! <https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/> and
//! <https://kubernetes.io/docs/concepts/architecture/garbage-collection/>. Every function
//! runs under the store lock, so each operation is atomic.
//!
//! The public surface is what tests and benchmarks drive directly: [`Ctx`], [`create()`]
//! and [`update()`]. The rest serves the HTTP front and the garbage collector inside the
//! crate.

mod builtin;
mod crd;
mod create;
mod ctx;
mod delete;
mod gc;
mod object;
mod patch;
mod strategic;
mod update;
mod validate;

pub(crate) use crd::register_crd;
pub use create::create;
pub use ctx::Ctx;
pub(crate) use ctx::FieldValidation;
pub(crate) use delete::delete;
pub(crate) use gc::gc_pass;
pub(crate) use object::as_version;
pub(crate) use patch::{PatchType, patch};
pub use update::update;
