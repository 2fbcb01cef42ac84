//! The operator's routes, outside the billed API (no key, no charge, no rate limit):
//! `GET /healthz` (the process answers), `GET /readyz` (it can serve: postal data in
//! memory, billing writer alive, database readable) and `GET /metrics` (Prometheus).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use poem::http::{StatusCode, header};
use poem::web::Data;
use poem::{Response, handler};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use super::State;
use super::telemetry::Metrics;
use crate::billing::Billing;
use crate::index::postal::PostalIndex;

/// How long `/readyz` waits for the billing writer and for the database.
const READY_PATIENCE: Duration = Duration::from_secs(2);

/// The operator's settings of a server (`postal serve` flags).
#[derive(Debug, Clone, Default)]
pub struct Operations {
    /// When set, `/metrics` answers only `Authorization: Bearer <token>`.
    pub metrics_token: Option<SecretString>,
}

/// What the operator's routes look at: handles shared with the API's `State`.
#[derive(Clone)]
pub(super) struct Ops {
    postal: crate::index::loader::Slot,
    file: crate::index::loader::FileCheck,
    billing: Billing,
    metrics: Arc<Metrics>,
    metrics_token: Option<Arc<str>>,
    /// One scrape at a time sets the scrape-time series.
    scraping: Arc<Mutex<()>>,
}

impl Ops {
    pub(super) fn new(state: &State, operations: Operations, metrics: Arc<Metrics>) -> Ops {
        Ops {
            postal: state.postal.clone(),
            file: state.file.clone(),
            billing: state.billing.clone(),
            metrics,
            metrics_token: operations
                .metrics_token
                .map(|token| Arc::from(token.expose_secret())),
            scraping: Arc::new(Mutex::new(())),
        }
    }

    fn postal(&self) -> Arc<PostalIndex> {
        crate::index::loader::current(&self.postal)
    }
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(body.to_string())
}

/// The process answers HTTP.
#[handler]
pub(super) fn healthz() -> Response {
    json_response(StatusCode::OK, json!({"status": "ok"}))
}

/// 200 when every check passes; 503 with the first failing check's reason otherwise.
#[handler]
pub(super) async fn readyz(ops: Data<&Ops>, req: &poem::Request) -> Response {
    let reasons = unready_reasons(&ops).await;
    // The reason and a cluster node's figures are the operator's: with a metrics token
    // set, only its bearer reads them (the log has the reason either way).
    let detailed = ops.metrics_token.is_none() || operator(&ops, req);
    let (status, mut body) = if reasons.is_empty() {
        (StatusCode::OK, json!({"status": "ready"}))
    } else {
        let request_id = super::telemetry::current_request_id();
        tracing::warn!(request_id = %request_id, "not ready: {}", reasons.join("; "));
        let mut body = json!({"status": "not ready"});
        if detailed {
            body["reason"] = json!(reasons.join("; "));
        }
        (StatusCode::SERVICE_UNAVAILABLE, body)
    };
    if let (Some(node_id), true) = (ops.billing.node_id(), detailed) {
        body["cluster"] = cluster_facts(&ops.billing, node_id);
        body["cluster"]["datasetSha256"] = json!(postal_sha256(&ops.postal()));
    }
    json_response(status, body)
}

/// Whether the request carries the metrics token (`Authorization: Bearer <token>`);
/// false when none is set.
fn operator(ops: &Ops, req: &poem::Request) -> bool {
    let Some(token) = &ops.metrics_token else {
        return false;
    };
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|presented| same_secret(presented, token))
}

/// A cluster node's part of `/readyz` (docs/cluster.md): its id (a string: it does not
/// fit a JSON number's exact range), its grants and its flushes.
fn cluster_facts(billing: &Billing, node_id: i64) -> serde_json::Value {
    let stats = billing.stats();
    json!({
        "nodeId": node_id.to_string(),
        "grantsHeld": stats.grants_held,
        "grantedMicroDollars": stats.granted.get(),
        "grantRequests": stats.grant_requests,
        "recalls": stats.recalls,
        "handbacks": stats.handbacks,
        "flushes": stats.flushes,
        "flushFailures": stats.failed_flushes,
        "lastFlushAgeSeconds": last_flush_age(&stats),
    })
}

/// The SHA-256 of the postal file the served dataset was imported from (`None` for an
/// import that left no provenance): nodes of a cluster that serve different data show
/// different ones.
fn postal_sha256(postal: &PostalIndex) -> Option<String> {
    let provenance = postal.history().provenance()?;
    let source = provenance.sources.iter().find(|s| s.role == "postal")?;
    Some(source.sha256.clone())
}

/// Why the server cannot serve now (`/readyz`, and `postal_ready` at each scrape); empty
/// when it can.
async fn unready_reasons(ops: &Ops) -> Vec<String> {
    let mut reasons = Vec::new();
    // Not held across the waits below: the loader frees an old index once nothing holds it.
    if ops.postal().coverage().records == 0 {
        reasons.push("postal index: no postal data loaded".to_string());
    }
    if !ops.billing.writer_running() {
        reasons.push("billing writer: not running".to_string());
    }
    if let Some(why) = ops.billing.flush_state().failing {
        reasons.push(format!("billing writer: flushes failing: {why}"));
    }
    let file = ops.file.clone();
    let read = crate::api::server::spawn_blocking(move || file.read());
    match tokio::time::timeout(READY_PATIENCE, read).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => reasons.push(format!("database: {e:#}")),
        Ok(Err(e)) => reasons.push(format!("database: {e}")),
        Err(_) => reasons.push(format!(
            "database: no answer within {} s",
            READY_PATIENCE.as_secs()
        )),
    }
    reasons
}

/// Prometheus metrics (OpenMetrics text), behind the bearer token when one is set.
/// Whether `presented` is `secret`, in a time that does not depend on where they differ
/// (their SHA-256 digests compared byte for byte, every byte): a caller timing wrong
/// tokens learns nothing of the right one.
fn same_secret(presented: &str, secret: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (Sha256::digest(presented), Sha256::digest(secret));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |diff, (x, y)| diff | (x ^ y))
        == 0
}

#[handler]
pub(super) async fn scrape(ops: Data<&Ops>, req: &poem::Request) -> Response {
    if ops.metrics_token.is_some() && !operator(&ops, req) {
        let mut response = json_response(
            StatusCode::UNAUTHORIZED,
            json!({"error": "Missing or wrong metrics token"}),
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    // Before the lock: the database check may wait (READY_PATIENCE), the lock is held
    // across no await.
    let ready = unready_reasons(&ops).await.is_empty();
    let _one_at_a_time = ops.scraping.lock();
    ops.metrics.ready.set(i64::from(ready));
    refresh(ops.0);
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &ops.metrics.registry) {
        tracing::error!("encoding metrics: {e}");
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": "Internal server error"}),
        );
    }
    Response::builder()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(text)
}

/// Sets the series read at scrape time: dataset, index, ledger writer, process.
fn refresh(ops: &Ops) {
    let m = &ops.metrics;
    let index = ops.postal();
    let coverage = index.coverage();
    m.dataset_records.set(coverage.records);
    m.dataset_countries.set(coverage.countries);
    m.dataset_loaded
        .set(crate::domain::date::unix_secs(index.loaded_at()));
    m.dataset_imported.set(index.imported_at().unwrap_or(0));
    let (countries, codes) = index.size();
    m.index_countries.set(countries as i64);
    m.index_codes.set(codes as i64);
    drop(index);

    let stats = ops.billing.stats();
    let flushes = m.ledger_flushes.get();
    m.ledger_flushes
        .inc_by(stats.flushes.saturating_sub(flushes));
    let busy = m.ledger_flush_seconds.get();
    let delta = stats.flush_busy.as_secs_f64() - busy;
    if delta > 0.0 {
        m.ledger_flush_seconds.inc_by(delta);
    }
    m.ledger_last_flush_seconds
        .set(stats.last_flush.as_secs_f64());
    m.ledger_pending
        .set(i64::try_from(stats.pending).unwrap_or(i64::MAX));
    let lag = match (stats.pending, stats.last_commit) {
        (0, _) => 0.0,
        (_, Some(at)) => SystemTime::now()
            .duration_since(at)
            .unwrap_or_default()
            .as_secs_f64(),
        (_, None) => 0.0,
    };
    m.ledger_lag_seconds.set(lag);
    let failures = m.ledger_flush_failures.get();
    m.ledger_flush_failures
        .inc_by(stats.failed_flushes.saturating_sub(failures));
    let reloads = m.billing_reloads.get();
    m.billing_reloads
        .inc_by(stats.reloads.saturating_sub(reloads));
    let calls = m.account_store_calls.get();
    m.account_store_calls
        .inc_by(stats.account_calls.saturating_sub(calls));
    if let (Some(cluster), Some(node_id)) = (&m.cluster, ops.billing.node_id()) {
        cluster
            .node
            .get_or_create(&super::telemetry::NodeLabel {
                node_id: node_id.to_string(),
            })
            .set(1);
        // One series, of the dataset served now (a reload may have changed it).
        let sha256 = postal_sha256(&ops.postal()).unwrap_or_default();
        let label = super::telemetry::DatasetLabel { sha256 };
        if cluster.dataset.get(&label).is_none() {
            cluster.dataset.clear();
        }
        cluster.dataset.get_or_create(&label).set(1);
        cluster
            .grants_held
            .set(i64::try_from(stats.grants_held).unwrap_or(i64::MAX));
        cluster.granted_micros.set(stats.granted.get());
        for (counter, total) in [
            (&cluster.grant_requests, stats.grant_requests),
            (&cluster.recalls, stats.recalls),
            (&cluster.handbacks, stats.handbacks),
        ] {
            counter.inc_by(total.saturating_sub(counter.get()));
        }
        cluster
            .last_flush_age
            .set(last_flush_age(&stats).unwrap_or(-1.0));
    }
    if let Some(rss) = resident_bytes() {
        m.resident_bytes.set(rss);
    }
}

/// Seconds since the last committed flush; `None` before the first.
fn last_flush_age(stats: &crate::billing::BillingStats) -> Option<f64> {
    let at = stats.last_commit?;
    Some(
        SystemTime::now()
            .duration_since(at)
            .unwrap_or_default()
            .as_secs_f64(),
    )
}

/// `VmRSS` of `/proc/self/status` (Linux); `None` elsewhere.
fn resident_bytes() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_matches_only_itself() {
        assert!(same_secret("t0ken", "t0ken"));
        assert!(!same_secret("t0ken", "t0keN"));
        assert!(!same_secret("t0ke", "t0ken"));
        assert!(!same_secret("", "t0ken"));
    }
}
