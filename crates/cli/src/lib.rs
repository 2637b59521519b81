//! `banlieue`: the command-line tool of banlieue-console.
//!
//! It signs a person in to the console's OpenID Connect issuer (authorization code + PKCE
//! S256 on a loopback redirect, RFC 8252), caches the session per (issuer, client id,
//! audience), and serves kubectl as an exec credential plugin (`banlieue auth token`). See
//! SPEC §4.
//!
//! The library exists so that tests can drive the pieces; the binary is `src/main.rs`.

#![warn(missing_docs)]

pub mod cache;
pub mod callback;
pub mod commands;
pub mod error;
pub mod exec;
pub mod flow;
pub mod http;
pub mod oidc;
pub mod urls;
