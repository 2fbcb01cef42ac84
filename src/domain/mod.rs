//! The rules of the service, free of I/O: parse, don't validate.

#[macro_use]
mod words;

pub mod admin;
pub mod alerts;
pub mod api_key;
pub mod charge;
pub(crate) mod cidr;
pub mod city_match;
pub mod country;
pub mod dashboard;
pub(crate) mod date;
pub mod geo;
pub mod grant;
pub(crate) mod idempotency;
pub mod ids;
pub mod money;
pub(crate) mod origin;
pub mod outside;
pub mod payments;
pub mod postal_code;
pub mod rate_limit;
pub mod regions;
pub mod text;
pub(crate) mod word;

pub use country::CountryCode;
pub use postal_code::PostalQuery;
