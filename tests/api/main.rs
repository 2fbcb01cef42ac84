//! Black-box tests of the HTTP API: the real server on a fresh database with
//! `../shared/geonames/sample.zip`, accounts made with the real `postal` CLI.

/// `spawn_app()`, the client and the CLI helpers.
mod helpers;

/// /api/city: folding, fuzzy matches, state filters.
mod city;
/// Each endpoint's 200 shape for a US and a non-US code.
mod endpoints;
/// Every error of the contract: status and exact text.
mod errors;
/// What is charged and when; 402 and 429.
mod money;
/// The normalisation table of decisions.md.
mod normalisation;
/// The committed OpenAPI document.
mod openapi;
/// /api/suggest: prefix then substring, ranking, limits, errors, billing.
mod suggest;
