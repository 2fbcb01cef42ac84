//! Black-box tests of the money layer: accounts, keys, ledger, billing and the admin CLI.
//! One test binary; each module is one topic.

/// A fresh database per test, the real `postal` binary, and shortcuts.
mod helpers;

/// Charging under concurrency: exactness, all-or-nothing batches, revocation, restarts.
mod charging;

/// Every `postal account|key|ledger` command through the real binary, exact JSON shapes.
mod cli;

/// `postal ledger verify` against a tampered database.
mod ledger;

/// The admin's daily reads: `account list`, `ledger show`, `usage`, `key list`.
mod daily;
/// `postal serve` as a process: stops, crashes, CLI under load, races, failing flushes.
mod serve;

/// `postal backup` under billed load (every charge answered before it is in the copy),
/// `postal restore`, and each of their refusals.
mod backup;
