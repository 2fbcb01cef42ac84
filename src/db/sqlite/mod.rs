//! The account side of the SQLite file: accounts, keys, the ledger, the admin's reports
//! and idempotent answers. Each file has its twin of the same name and functions in
//! `db::pg` (a cluster's ledger), so that a review of one against the other is a diff of
//! dialect only; the shapes they share are `db::admin`'s and `db::rows`'.

pub mod accounts;
pub(crate) mod alerts;
pub(crate) mod dashboard;
pub(crate) mod decode;
pub(crate) mod idempotency;
pub mod keys;
pub(crate) mod ledger;
pub(crate) mod mail;
pub(crate) mod payments;
pub(crate) mod reports;
