//! Integration tests for the `cas` crate, one module per area of `src/`.

mod attestation;
mod budget;
mod frames;
mod maintenance;
mod object;
mod side;
mod store;
mod transfer;
mod upgrade;
mod util;
mod verify;
