//! The read models of the postal data, in memory: built from the rows `db` reads (no SQL
//! here), swapped whole when an import commits, freed once no request holds them.
//!
//! - [`postal`]: every code's first record (lookup, validation, bulk) and the owner of the
//!   other two, so that one swap replaces all three;
//! - [`by_country`]: a table of each country's data, by its code (not hashed);
//! - [`city`]: place names (city search, suggestions);
//! - [`geo`]: coordinates in k-d trees (nearest, radius, distance, autocomplete, countries);
//! - [`history`]: retired codes, the live import's provenance, the latest changes;
//! - [`loader`]: the thread that builds, swaps and frees them.

pub(crate) mod by_country;
pub(crate) mod city;
pub mod geo;
pub(crate) mod history;
pub(crate) mod loader;
pub(crate) mod postal;
pub(crate) mod verify;
