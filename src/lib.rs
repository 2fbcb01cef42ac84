//! postal: a self-hosted postal-code data service, billed per query.
//!
//! One SQLite file holds everything (postal data, accounts, keys, ledger, rate-limit
//! counters; its schema is `schema.sql`), or, in cluster mode (docs/cluster.md), each node
//! its own file of postal data and one PostgreSQL ledger the accounts, keys and money. Two binaries use this library: `postal`
//! (`src/main.rs`: serve the HTTP API, administer accounts) and `postal-import`
//! (`src/bin/postal-import.rs`: load or refresh the GeoNames dataset).
//!
//! The path of a request, and where each step lives:
//!
//! 1. **accept**: `api::server` accepts the connection (a cap below the open-files
//!    limit; head, body and idle timeouts; JSON bodies on hyper's own errors) and reads
//!    the body; `api` (poem + poem-openapi) routes `POST /api/<operation>`; the contract
//!    extractor turns any body into either the endpoint's request type or the
//!    contract's `400 {"error": ...}` / `413`.
//! 2. **parse**: the handler turns fields into `domain` types (`CountryCode`,
//!    `PostalQuery`, ...): once built they are valid.
//! 3. **authenticate**: `domain::api_key` hashes the key; the books in memory
//!    (`billing`) find the account behind the hash (401 when unknown or revoked), then
//!    pre-check 402 / 429 (`domain::charge`) before any work.
//! 4. **answer**: the in-memory read models of `index` answer (lookup, validation, city
//!    search, suggestions, geography); the file is not read on a request.
//! 5. **bill**: `billing` charges the account in memory, exactly, and a writer thread
//!    commits the charges behind (deltas, one ledger row per account and endpoint per
//!    flush; `billing::store`, SQL in `db::sqlite::ledger`). Nothing is charged for an error. The
//!    order of steps 2-6 lives once, in `api::billed`. The bulk operations add one step
//!    there (`api::once`): with an `Idempotency-Key`, a retry replays the stored answer,
//!    uncharged; the first answer is stored in the flush that writes its charge
//!    (`billing::answers`, SQL in `db::sqlite::idempotency`).
//! 6. **respond**: `api` maps the result and the envelope (balance, performance,
//!    rateLimit) to JSON; every error leaves through one `ApiError`. On the way out,
//!    `api::server::gzip` compresses any answer over 1 KiB for a client that accepts gzip.
//!
//! The path of a customer's request (the account dashboard, docs/account.md), and where
//! each step lives:
//!
//! 1. **sign in**: `api::account` (HTTP only) sends the browser to a provider, and
//!    `accounts::flow` checks what comes back (`accounts::oidc` for OpenID Connect,
//!    Google and Microsoft; `accounts::github` for GitHub's OAuth); `accounts` finds the
//!    identity's account, or makes one with the free allowance.
//! 2. **session**: `accounts` stores the session (its id only hashed); every call of
//!    `/account/api` finds it, and a change also carries its CSRF token.
//! 3. **keys and limits**: `accounts::Admin`, the CLI's own interface, makes, rolls and
//!    revokes keys and sets limits, each change checked by `domain::admin`, written by
//!    `db`, written to the audit log, and held by `billing`'s books (every node's) before
//!    it returns.
//! 4. **top-up**: `accounts` opens a top-up and `accounts::stripe` its Stripe Checkout
//!    Session; `api::account` sends the browser to its page.
//! 5. **webhook credit**: Stripe's signed event (`accounts::stripe` checks it), read back
//!    from Stripe's API, credits the top-up once (`accounts`), and the books hold the new
//!    balance.
//!
//! The dashboard's work and its calls to providers and Stripe run on the account store's
//! own threads (`accounts::store`), a bounded number at once, never on the API's.
//!
//! Modules (rooms), each using only the ones to its right:
//!
//! ```text
//! cli (src/cli, src/bin) -> api -> accounts -> { billing, index, alerts } -> db -> domain
//!                  import --------------------------------------------------^
//! ```
//!
//! - [`domain`]: the rules, no I/O: country codes, postal-code normalisation, text
//!   folding, money, rate-limit windows, API keys, admin changes, a cluster flush's
//!   settlement.
//! - [`db`]: tables and SQL (connections, pragmas, migrations, dataset tables, copies of
//!   the file); the only code with SQL strings. The account side (accounts, keys, ledger,
//!   reports, idempotent answers) is written once per dialect, twins file for file:
//!   `db::sqlite` (the file) and `db::pg` (cluster mode's PostgreSQL ledger, which adds
//!   grants, numbered flushes and the nodes' confirmation of a change); what both take and
//!   answer is `db::admin`'s and `db::rows`'.
//! - [`index`]: the read models in memory (postal codes, place names, geography), built
//!   from the rows `db` reads, and the loader thread that builds, swaps and frees them.
//! - [`billing`]: the books in memory, their writer thread, the `ChargeStore` trait and
//!   its stores (the SQLite file; `billing::pg`, cluster mode's PostgreSQL ledger, which
//!   leases each node grants: docs/cluster.md), the serve lock and the CLI-to-server
//!   notifier (changes and flush requests). Money only.
//! - [`accounts`]: the customer's side: the one admin interface over the file and the
//!   ledger (`accounts::Admin`, whose rules are `domain::admin`'s), by area (accounts,
//!   keys, sign-in and identities, sessions, payments, the audit log), the account
//!   store the server opens once (`accounts::Accounts`: pooled connections, threads of
//!   its own), and the clients of the sign-in providers (`accounts::flow` over
//!   `accounts::oidc` and `accounts::github`) and of Stripe (`accounts::stripe`).
//! - [`alerts`]: the outside services of alerts (docs/alerts.md), as `accounts::stripe`
//!   is Stripe's: the operator's mail relay (`alerts::mail`: settings checked, messages
//!   sent with lettre) and customers' webhooks (`alerts::webhook`: signed as Standard
//!   Webhooks do, sent only to public addresses, checked again at connect time). What an
//!   event says is `domain::alerts`; the database decides events (schema.sql's triggers)
//!   and `accounts::sender` delivers them.
//! - [`import`]: the GeoNames file formats (postal-code files, countryInfo.txt, the
//!   gazetteer) and their sources (file, zip, directory, URL), the diff of an import
//!   against the live data (changes, retired codes, the shrink guard) and the operator's
//!   overrides; writes through `db::dataset`.
//! - [`api`]: HTTP, JSON shapes, OpenAPI, status codes, one file per operation in
//!   `api::routes`; what operations share (the billed path, the envelope, the one error
//!   type, the app and its state) beside them; the operator's routes (`/healthz`,
//!   `/readyz`, `/metrics`) and request telemetry; the dashboard's pages and
//!   `/account/api` in `api::account` (HTTP only: its words and work are `accounts`').
//! - [`alloc`]: the allocator of every binary (mimalloc, measured) and handing a load's
//!   freed memory back to the OS (a leaf: any room may use it).
//!
//! No room uses one to its left.

pub mod accounts;
pub mod alerts;
pub mod alloc;
pub mod api;
pub mod billing;
pub mod cli;
pub mod db;
pub mod domain;
pub mod import;
pub mod index;
