//! Black-box tests of cluster mode (docs/cluster.md): a throwaway PostgreSQL, three
//! `postal serve --ledger` nodes on a copy of a tiny dataset each (147 real US lines),
//! racing clients. They assert invariants, not throughput (two cores run all of it), one
//! scenario at a time. Without PostgreSQL's binaries they print "skipped" and pass, unless
//! `POSTAL_REQUIRE_TOOLS` (or `POSTAL_REQUIRE_PG`) is set (CI sets it).

/// The throwaway PostgreSQL, the nodes, the CLI against the ledger, and checks.
mod helpers;

/// Racing requests over three nodes on a balance of exactly 50 queries.
mod race;

/// A node killed under load; PostgreSQL crashed and restarted under load.
mod failures;

/// A node paused past its grant's TTL, PostgreSQL down past the TTL, a node stopped
/// cleanly under load.
mod outages;

/// Top-up and revocation under load hold on every node once the command returns.
mod admin;

/// Rate-limit windows across nodes: a window admits its limit, not one more.
mod limits;

/// `postal ledger migrate` from a single file.
mod migrate;

/// A flush whose COMMIT answer was lost, retried under its number: applied once.
mod replay;

/// `Idempotency-Key` across nodes: claimed in the ledger, replayed by every node.
mod once;

/// The ledger over TLS verified against a throwaway CA, its password from a file, and the
/// connection strings refused before any connection.
mod tls;
