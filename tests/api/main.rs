//! Black-box tests of the HTTP API: the real server on a fresh database with
//! `../shared/geonames/sample.zip`, accounts made with the real `postal` CLI.

/// `spawn_app()`, the client and the CLI helpers.
mod helpers;

/// The account dashboard: sign-in with three real OpenID providers, keys, limits, attacks.
mod account;
/// The account dashboard, continued: providers, cluster, rolls, Chromium, timeouts.
mod account_flows;
/// Alerts by e-mail and signed webhook (issue 51).
mod alerts;

/// The callback's error: the state first, a fixed text per code, no description shown.
mod callback;
/// Only https to the outside (provider add, payments stripe, discovery), ID tokens only
/// in asymmetric algorithms.
mod outside;
/// Sign-in with GitHub (OAuth) and Microsoft (any tenant), against local stand-ins.
mod signin_kinds;

/// Pages in browsers: publishable keys, CORS, keys in headers.
mod browser;
/// A publishable key's budget over every client IP: CLI, dashboard, the 429.
mod budgets;
/// /api/city: folding, fuzzy matches, state filters.
mod city;
/// /api/city v3 on allCountries.zip: MX, TR, KR, RU admin cities; 404 in every country.
mod city_full;
/// /api/city v3 on the sample with the gazetteer: admin cities, other languages, forms.
mod city_v3;
mod city_v4;
mod city_v5;
/// gzip of answers over 1 KiB, read off the wire.
mod compression;
/// The dashboard under load on a cluster node: lookups and /readyz unharmed.
mod dashboard_load;
/// A dashboard GET changes nothing; the ledger a page at a time; the audit log's CSV whole.
mod dashboard_reads;
/// The dataset's history: retired codes on every operation after a live import,
/// /api/dataset.
mod dataset;
/// deploy/: systemd units, alert rules and dashboard checked with systemd-analyze and
/// promtool; every metric they name is exported.
mod deploy;
/// Review L8: disputes freeze top-ups, amounts compared, refunds found by their payment,
/// only https payment pages.
mod disputes;
/// Each endpoint's 200 shape for a US and a non-US code.
mod endpoints;
/// Every error of the contract: status and exact text.
mod errors;
/// Checkout forms: /api/places, /api/verify, verify-bulk, the GET forms.
mod forms;
/// nearest, radius, distance, autocomplete, countries, nearest-bulk on the sample.
mod geo;
/// /api/nearest and /api/radius against a brute-force scan of allCountries.zip (slow).
mod geo_full;
/// The hot path answers POST /api/lookup exactly as poem's route does.
mod hot;
/// The HTTP layer: JSON errors from hyper and the router, 405 Allow, 413 at once.
mod http;
/// `Idempotency-Key` on the bulk operations: replays uncharged, reused keys refused.
mod idempotency;
/// `postal mail`: the operator's SMTP relay, `mail test` through a local sink.
mod mail;
/// `postal ledger migrate`: a file deployment's customers of every kind on a cluster's node.
mod migrate;
/// What is charged and when; 402 and 429.
mod money;
/// At most N new accounts per client address and UTC day (`--max-new-accounts-per-ip-day`).
mod new_accounts;
/// The normalisation table of decisions.md.
mod normalisation;
/// The committed OpenAPI document.
mod openapi;
/// /healthz, /readyz, /metrics (exact counters), request ids.
mod ops;
/// Top-ups by card against a stand-in of Stripe: credited once, refunds, cluster, Chromium.
mod payments;
/// Secrets from private files or the environment, never the command line; full Stripe
/// keys warned about.
mod secrets;
/// Slow and half-open connections under a 1,024-descriptor limit (the real binary).
mod slow_clients;
/// Links confirmed, sessions following identities, changes after a recent sign-in (and
/// the `Browser`'s link helpers).
mod stepup;
/// Strangers cost nothing: unsigned webhooks and junk cookies make no store call.
mod strangers;
/// /api/suggest: prefix then substring, ranking, limits, errors, billing.
mod suggest;
/// Swagger UI in headless Chromium: try /api/lookup.
mod swagger_ui;
/// Cookie tossing: a __Host- state on https; a link completes only in its session.
mod tossing;
/// Usage per key: the keys list, usage, CSV and CLI per key, restart, two nodes.
mod usage_per_key;
/// Alerts' webhooks, one delivery: signed as `standardwebhooks` verifies, 2xx only, no
/// redirects, 10 s, only public addresses.
mod webhooks;
/// The checkout widget in headless Chromium, on pages of other origins.
mod widget;
