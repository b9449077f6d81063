//! Each verb as a type of its own (the [`crate::VerbSpec`] and a face's rendering of its
//! outcome are impls for it), and the verbs that have a module of their own.
//!
//! A new verb is one file here: its options and outcome, its `Engine` method, its `verb!`
//! block and its `impl VerbSpec`. `build.rs` declares every file of this folder as a module
//! and re-exports its public items at the crate's root, so nothing else names it by hand.

pub use crate::spec::verbs::*;

include!(concat!(env!("OUT_DIR"), "/verb_modules.rs"));
