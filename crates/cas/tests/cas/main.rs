//! Integration tests for the `cas` crate, one module per area of `src/`.

mod maintenance;
mod object;
mod store;
mod util;
mod verify;
