//! What the service tells its operator: Prometheus metrics and one access log line per
//! request, each request carrying an id (`X-Request-Id`).
//!
//! Why `prometheus-client` (a registry per server) rather than a process-global recorder:
//! a test binary runs many servers at once, and the metrics test checks exact counter
//! values of its own server.
//!
//! Charges are counted where they happen (`State::charge`) without handing a metrics
//! handle through the billed path: [`Telemetry`] wraps every request's future in a
//! task-local scope holding its server's [`Metrics`], and [`count_charge`] adds to
//! whatever server the current request belongs to. Everything else (requests, statuses,
//! refusals, shed requests, latency) is read off the response here.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use poem::http::{HeaderMap, HeaderValue, Method};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::domain::charge::Endpoint as ApiOperation;
use crate::domain::money::PRICE_PER_QUERY;

/// The header a request id comes in and goes out with.
pub const REQUEST_ID: &str = "x-request-id";

/// Labels of a request: fixed strings and a number, so counting a request allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NodeLabel {
    pub(crate) node_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DatasetLabel {
    pub(crate) sha256: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    status: u16,
    reason: &'static str,
}

type HistogramFamily = Family<OperationLabel, Histogram, fn() -> Histogram>;

/// Every series this server exports. Gauges of the dataset, the index, the ledger writer
/// and the process are set when `/metrics` is read (`api::ops`).
pub struct Metrics {
    pub(crate) registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily,
    refusals: Family<RefusalLabels, Counter>,
    /// Each API operation's series of a 200 (its count, its latency), taken from the
    /// families at its first 200 and kept: a family's `get_or_create` (a lock and a
    /// SipHash of the labels) twice a request was about 1% of a lookup (issue 37).
    answered: [OnceLock<(Counter, Histogram)>; ApiOperation::ALL.len()],
    shed: Counter,
    queries_charged: Counter,
    micros_charged: Counter,
    pub(crate) ledger_flushes: Counter,
    pub(crate) ledger_flush_seconds: Counter<f64, AtomicU64>,
    pub(crate) ledger_last_flush_seconds: Gauge<f64, AtomicU64>,
    pub(crate) ledger_lag_seconds: Gauge<f64, AtomicU64>,
    pub(crate) ledger_pending: Gauge,
    pub(crate) ledger_flush_failures: Counter,
    pub(crate) billing_reloads: Counter,
    pub(crate) account_store_calls: Counter,
    /// Cluster mode only (docs/cluster.md): registered when the server charges a shared
    /// ledger, so the single file's scrape does not change.
    pub(crate) cluster: Option<ClusterMetrics>,
    pub(crate) dataset_records: Gauge,
    pub(crate) dataset_countries: Gauge,
    pub(crate) dataset_loaded: Gauge,
    pub(crate) dataset_imported: Gauge,
    pub(crate) index_codes: Gauge,
    pub(crate) index_countries: Gauge,
    pub(crate) resident_bytes: Gauge,
    pub(crate) ready: Gauge,
}

/// What a node of a cluster tells about its grants and its part of the ledger.
pub(crate) struct ClusterMetrics {
    pub(crate) node: Family<NodeLabel, Gauge>,
    pub(crate) dataset: Family<DatasetLabel, Gauge>,
    pub(crate) grants_held: Gauge,
    pub(crate) granted_micros: Gauge,
    pub(crate) grant_requests: Counter,
    pub(crate) recalls: Counter,
    pub(crate) handbacks: Counter,
    pub(crate) last_flush_age: Gauge<f64, AtomicU64>,
}

impl ClusterMetrics {
    fn register(registry: &mut Registry) -> ClusterMetrics {
        let node = Family::<NodeLabel, Gauge>::default();
        registry.register(
            "cluster_node",
            "1, labelled with this node's id on the shared ledger (a restart is a new node)",
            node.clone(),
        );
        let dataset = Family::<DatasetLabel, Gauge>::default();
        registry.register(
            "cluster_dataset",
            "1, labelled with the SHA-256 of the postal file this node's dataset was imported from (nodes serving different data differ)",
            dataset.clone(),
        );
        let grants_held = Gauge::default();
        registry.register(
            "cluster_grants_held",
            "Accounts this node holds a live grant of",
            grants_held.clone(),
        );
        let granted_micros = Gauge::default();
        registry.register(
            "cluster_granted_micro_dollars",
            "What is left of this node's live grants, in micro-dollars",
            granted_micros.clone(),
        );
        let grant_requests = Counter::default();
        registry.register(
            "cluster_grant_requests",
            "Grants this node asked the ledger for (a request short of its grant)",
            grant_requests.clone(),
        );
        let recalls = Counter::default();
        registry.register(
            "cluster_recalls",
            "Recalls heard from other nodes (NOTIFY postal_recall): another node lacked money this node may hold",
            recalls.clone(),
        );
        let handbacks = Counter::default();
        registry.register(
            "cluster_handbacks",
            "Grants this node handed back to the ledger (recalled, idle, expired or at a clean stop)",
            handbacks.clone(),
        );
        let last_flush_age = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "cluster_last_flush_age_seconds",
            "Seconds since this node's last committed flush; -1 before the first",
            last_flush_age.clone(),
        );
        ClusterMetrics {
            node,
            dataset,
            grants_held,
            granted_micros,
            grant_requests,
            recalls,
            handbacks,
            last_flush_age,
        }
    }
}

fn latency_histogram() -> Histogram {
    // 50 µs .. about 3.3 s
    Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::for_node(false)
    }

    /// A server's metrics; `cluster`: it charges a shared ledger (the cluster series too).
    pub fn for_node(cluster: bool) -> Metrics {
        let mut registry = Registry::with_prefix("postal");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by operation and status",
            requests.clone(),
        );
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time from request to response, by operation",
            latency.clone(),
        );
        let refusals = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "refusals",
            "Requests refused: 401 (key), 402 (balance), 429 (rate limit)",
            refusals.clone(),
        );
        let shed = Counter::default();
        registry.register(
            "requests_shed",
            "Requests answered 503 (overload or not ready)",
            shed.clone(),
        );
        let queries_charged = Counter::default();
        registry.register(
            "queries_charged",
            "Billed queries charged",
            queries_charged.clone(),
        );
        let micros_charged = Counter::default();
        registry.register(
            "charged_micro_dollars",
            "Money charged for those queries, in micro-dollars (1 USD = 1,000,000)",
            micros_charged.clone(),
        );
        let ledger_flushes = Counter::default();
        registry.register(
            "ledger_flushes",
            "Ledger transactions committed by the billing writer",
            ledger_flushes.clone(),
        );
        let ledger_flush_seconds = Counter::<f64, AtomicU64>::default();
        registry.register(
            "ledger_flush_seconds",
            "Time spent in ledger transactions, BEGIN to end of COMMIT (divide by ledger_flushes for the mean)",
            ledger_flush_seconds.clone(),
        );
        let ledger_last_flush_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "ledger_last_flush_seconds",
            "Duration of the last ledger transaction",
            ledger_last_flush_seconds.clone(),
        );
        let ledger_lag_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "ledger_lag_seconds",
            "Seconds since the last ledger commit while charges wait for one; 0 when none waits",
            ledger_lag_seconds.clone(),
        );
        let ledger_pending = Gauge::default();
        registry.register(
            "ledger_pending_charges",
            "Charges sent to the billing writer and not answered yet",
            ledger_pending.clone(),
        );
        let ledger_flush_failures = Counter::default();
        registry.register(
            "ledger_flush_failures",
            "Ledger transactions of the billing writer that failed (kept and retried)",
            ledger_flush_failures.clone(),
        );
        let billing_reloads = Counter::default();
        registry.register(
            "billing_reloads",
            "Times the billing writer reloaded every account and key after a change made elsewhere (CLI, dashboard, another node)",
            billing_reloads.clone(),
        );
        let account_store_calls = Counter::default();
        registry.register(
            "account_store_calls",
            "Calls of the account store by the dashboard, the sign-in and the Stripe webhook",
            account_store_calls.clone(),
        );
        let cluster = cluster.then(|| ClusterMetrics::register(&mut registry));
        let dataset_records = Gauge::default();
        registry.register(
            "dataset_records",
            "Postal-code records of the served dataset",
            dataset_records.clone(),
        );
        let dataset_countries = Gauge::default();
        registry.register(
            "dataset_countries",
            "Countries with postal data in the served dataset",
            dataset_countries.clone(),
        );
        let dataset_loaded = Gauge::default();
        registry.register(
            "dataset_loaded_timestamp_seconds",
            "Unix time the served dataset was loaded (at start, or when an import committed a new one)",
            dataset_loaded.clone(),
        );
        // The age alert's signal: the load time above restarts with the process.
        let dataset_imported = Gauge::default();
        registry.register(
            "dataset_imported_timestamp_seconds",
            "Unix time postal-import swapped the served dataset in; 0 when the file does not say",
            dataset_imported.clone(),
        );
        let index_codes = Gauge::default();
        registry.register(
            "index_postal_codes",
            "Distinct postal codes held in memory",
            index_codes.clone(),
        );
        let index_countries = Gauge::default();
        registry.register(
            "index_countries",
            "Countries held in memory",
            index_countries.clone(),
        );
        let resident_bytes = Gauge::default();
        registry.register(
            "process_resident_memory_bytes",
            "Resident set size of the server process",
            resident_bytes.clone(),
        );
        // A scrape is the one look an alert gets: /readyz is read by load balancers, not
        // by Prometheus.
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 when /readyz answers 200 (postal data loaded, billing writer flushing, database readable), else 0",
            ready.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            refusals,
            answered: Default::default(),
            shed,
            queries_charged,
            micros_charged,
            ledger_flushes,
            ledger_flush_seconds,
            ledger_last_flush_seconds,
            ledger_lag_seconds,
            ledger_pending,
            ledger_flush_failures,
            billing_reloads,
            account_store_calls,
            cluster,
            dataset_records,
            dataset_countries,
            dataset_loaded,
            dataset_imported,
            index_codes,
            index_countries,
            resident_bytes,
            ready,
        }
    }

    /// One answered request, of `api` when it is an API operation.
    fn observe(&self, operation: Operation, status: u16, seconds: f64) {
        let Operation { name, api } = operation;
        // `Endpoint::ALL` is in the order of the variants (a test says so); a variant
        // missing from it is counted through the families below.
        if let (200, Some(kept)) = (status, api.and_then(|api| self.answered.get(api as usize))) {
            let (count, latency) = kept.get_or_init(|| {
                (
                    self.requests
                        .get_or_create(&RequestLabels {
                            operation: name,
                            status,
                        })
                        .clone(),
                    self.latency
                        .get_or_create(&OperationLabel { operation: name })
                        .clone(),
                )
            });
            count.inc();
            latency.observe(seconds);
            return;
        }
        self.requests
            .get_or_create(&RequestLabels {
                operation: name,
                status,
            })
            .inc();
        self.latency
            .get_or_create(&OperationLabel { operation: name })
            .observe(seconds);
        let billed_api = api.is_some();
        match status {
            401 | 402 | 429 if billed_api => {
                let reason = match status {
                    401 => "invalid_key",
                    402 => "insufficient_balance",
                    _ => "rate_limited",
                };
                self.refusals
                    .get_or_create(&RefusalLabels { status, reason })
                    .inc();
            }
            503 => {
                self.shed.inc();
            }
            _ => {}
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// What the code of a request can reach without it being handed down: its server's
/// metrics and its id.
struct RequestScope {
    metrics: Arc<Metrics>,
    id: HeaderValue,
}

tokio::task_local! {
    static CURRENT: RequestScope;
}

/// Counts `queries` charged (and their price) to the server of the current request; a
/// no-op outside a request (CLI, benchmarks).
pub(crate) fn count_charge(queries: u64) {
    let _ = CURRENT.try_with(|r| {
        r.metrics.queries_charged.inc_by(queries);
        r.metrics
            .micros_charged
            .inc_by(queries.saturating_mul(PRICE_PER_QUERY.get().unsigned_abs()));
    });
}

/// The id of the current request, for a log line written while it is answered; `-`
/// outside a request.
pub(crate) fn current_request_id() -> Arc<str> {
    CURRENT
        .try_with(|r| Arc::from(r.id.to_str().unwrap_or("-")))
        .unwrap_or_else(|_| Arc::from("-"))
}

/// What a request is counted as: its label, and its API operation when it is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Operation {
    name: &'static str,
    api: Option<ApiOperation>,
}

/// The operation a path belongs to, from a fixed list (every API operation by its ledger
/// name, `Endpoint`), so that a scan of random paths cannot make new series.
fn operation(path: &str) -> Operation {
    match path.strip_prefix("/api/").and_then(ApiOperation::parse) {
        Some(api) => Operation {
            name: api.as_str(),
            api: Some(api),
        },
        None => Operation {
            name: other_operation(path),
            api: None,
        },
    }
}

/// The label of a request that is no API operation.
fn other_operation(path: &str) -> &'static str {
    match path {
        "/healthz" => "healthz",
        "/readyz" => "readyz",
        "/metrics" => "metrics",
        "/openapi.json" => "openapi",
        p if p == "/docs" || p.starts_with("/docs/") => "docs",
        p if p.starts_with("/api/") => "other-api",
        _ => "other",
    }
}

/// A request id as sent by the client when it is reasonable (1 to 128 visible ASCII
/// characters), else a new one. Kept as the header value it goes out as: the client's is
/// shared, not copied.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(REQUEST_ID)
        .filter(|v| {
            let v = v.as_bytes();
            !v.is_empty() && v.len() <= 128 && v.iter().all(|b| b.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(new_request_id)
}

/// 32 hex digits: a random half drawn once per thread, and that thread's count of ids.
/// Unique unless two threads draw the same 64 random bits; not secret (an id is a
/// label for logs, never a credential); cheaper than drawing 128 random bits and `format!`-ing them per request (perf put
/// that at 0.6% of a lookup's CPU).
fn new_request_id() -> HeaderValue {
    thread_local! {
        static NEXT: std::cell::Cell<(u64, u64)> = std::cell::Cell::new((rand::random(), 0));
    }
    let (prefix, count) = NEXT.with(|next| {
        let (prefix, count) = next.get();
        next.set((prefix, count.wrapping_add(1)));
        (prefix, count)
    });
    let mut hex = [0u8; 32];
    let bits = (u128::from(prefix) << 64) | u128::from(count);
    // 16 bytes make 32 digits: the buffer fits, and hex digits are a valid header value.
    let _ = hex::encode_to_slice(bits.to_be_bytes(), &mut hex);
    HeaderValue::from_bytes(&hex).unwrap_or(HeaderValue::from_static("-"))
}

/// One answered request, as the access log records it. The path only (never the query
/// string), and never the body: the API key travels in the body.
#[derive(Debug)]
pub struct AccessLine<'a> {
    pub request_id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    /// Time from request to response.
    pub micros: u64,
}

/// Where the access lines go: one call per answered request, on the request's thread,
/// so it must not block.
pub trait AccessLog: Send + Sync + std::fmt::Debug {
    fn record(&self, line: &AccessLine<'_>);
}

/// Access lines as `tracing` events (`INFO`, message `access`, the line's fields), for a
/// server embedded in a program with a subscriber of its own (and the tests). `postal
/// serve` writes its lines itself (`cli::access_log`): the subscriber's formatting of one
/// event per request cost about 5% of the lookup throughput.
#[derive(Debug)]
pub struct TracingAccessLog;

impl AccessLog for TracingAccessLog {
    fn record(&self, line: &AccessLine<'_>) {
        tracing::info!(
            request_id = %line.request_id,
            method = %line.method,
            path = %line.path,
            status = line.status,
            micros = line.micros,
            "access"
        );
    }
}

/// Where a server's requests are told: its metrics and its access log. One per server,
/// shared by the middleware ([`Telemetry`]) and the routes answered before poem
/// (`api::hot`), so that both observe a request the same way.
#[derive(Clone)]
pub struct Observer {
    pub metrics: Arc<Metrics>,
    pub access_log: Arc<dyn AccessLog>,
}

/// A request being answered: when it came, its id, its operation.
pub(crate) struct Observed {
    started: Instant,
    id: HeaderValue,
    operation: Operation,
}

impl Observer {
    /// Starts observing a request with these headers and path.
    pub(crate) fn begin(&self, headers: &HeaderMap, path: &str) -> Observed {
        Observed {
            started: Instant::now(),
            id: request_id(headers),
            operation: operation(path),
        }
    }

    /// `answer` run with the request's scope: [`count_charge`] counts on this server and
    /// [`current_request_id`] is the request's id.
    ///
    /// No tracing span around the request: entering and leaving one at every poll cost
    /// about a sixth of the lookup throughput (bench/api.sh, docs/money.md). The id is a
    /// field of the access line, and `current_request_id` gives it to the few lines
    /// written while a request is answered.
    pub(crate) fn scope<F: Future>(
        &self,
        observed: &Observed,
        answer: F,
    ) -> impl Future<Output = F::Output> {
        CURRENT.scope(
            RequestScope {
                metrics: self.metrics.clone(),
                id: observed.id.clone(),
            },
            answer,
        )
    }

    /// The request answered with `response`: its id on the response, its metrics, its
    /// access line.
    pub(crate) fn end(
        &self,
        observed: Observed,
        method: &Method,
        path: &str,
        response: &mut Response,
    ) {
        let status = response.status().as_u16();
        let elapsed = observed.started.elapsed();
        self.metrics
            .observe(observed.operation, status, elapsed.as_secs_f64());
        self.access_log.record(&AccessLine {
            // Visible ASCII only (`request_id`).
            request_id: observed.id.to_str().unwrap_or("-"),
            method: method.as_str(),
            path,
            status,
            micros: elapsed.as_micros() as u64,
        });
        response.headers_mut().insert(REQUEST_ID, observed.id);
    }
}

/// The middleware: request id, access log line, metrics.
pub struct Telemetry(pub Observer);

impl<E: Endpoint> Middleware<E> for Telemetry {
    type Output = TelemetryEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        TelemetryEndpoint {
            inner,
            observer: self.0.clone(),
        }
    }
}

pub struct TelemetryEndpoint<E> {
    inner: E,
    observer: Observer,
}

impl<E: Endpoint> Endpoint for TelemetryEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        let observed = self.observer.begin(req.headers(), req.uri().path());
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let answered = self.observer.scope(&observed, self.inner.call(req)).await;
        let mut response = match answered {
            Ok(output) => output.into_response(),
            Err(e) => e.into_response(),
        };
        self.observer.end(observed, &method, &path, &mut response);
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_share_one_operation_label() {
        assert_eq!(operation("/api/lookup").name, "lookup");
        assert_eq!(operation("/api/nearest-bulk").name, "nearest-bulk");
        assert_eq!(operation("/api/verify").name, "verify");
        assert_eq!(operation("/api/countries").name, "countries");
        assert_eq!(operation("/api/nope").name, "other-api");
        assert_eq!(operation("/api/Lookup").name, "other-api");
        assert_eq!(operation("/wp-admin/x.php").name, "other");
        assert_eq!(operation("/docs/").name, "docs");
    }

    #[test]
    fn a_200_counts_in_the_same_series_as_every_other_answer() {
        let metrics = Metrics::default();
        let lookup = operation("/api/lookup");
        assert_eq!(lookup.api, Some(ApiOperation::Lookup));
        assert_eq!(operation("/healthz").api, None);
        metrics.observe(lookup, 200, 0.001);
        metrics.observe(lookup, 404, 0.001);
        metrics.observe(lookup, 200, 0.002);
        metrics.observe(operation("/healthz"), 200, 0.001);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &metrics.registry).unwrap();
        for line in [
            "postal_http_requests_total{operation=\"lookup\",status=\"200\"} 2\n",
            "postal_http_requests_total{operation=\"lookup\",status=\"404\"} 1\n",
            "postal_http_requests_total{operation=\"healthz\",status=\"200\"} 1\n",
            "postal_http_request_duration_seconds_count{operation=\"lookup\"} 3\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // No series of an operation before its first answer.
        assert!(!text.contains("operation=\"city\""), "{text}");
    }

    #[test]
    fn new_request_ids_are_32_hex_digits_and_differ() {
        let a = new_request_id().to_str().unwrap().to_owned();
        let b = new_request_id().to_str().unwrap().to_owned();
        assert_ne!(a, b);
        for id in [&a, &b] {
            assert_eq!(id.len(), 32);
            assert!(id.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        // The same thread's ids share their random half and count up.
        assert_eq!(a[..16], b[..16]);
        let (n, m) = (
            u64::from_str_radix(&a[16..], 16).unwrap(),
            u64::from_str_radix(&b[16..], 16).unwrap(),
        );
        assert_eq!(m, n + 1);
    }
}
