//! `spawn_app()`: the real server on a fresh database holding `sample.zip`, on a free
//! port, with one method per endpoint; accounts are made with the real `postal` CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use postal::api::Dataset;
use serde_json::{Value, json};
use testkit::geonames;

const POSTAL: &str = env!("CARGO_BIN_EXE_postal");
const POSTAL_IMPORT: &str = env!("CARGO_BIN_EXE_postal-import");

static SAMPLE: OnceLock<PathBuf> = OnceLock::new();
static FULL: OnceLock<PathBuf> = OnceLock::new();
static CITIES: OnceLock<PathBuf> = OnceLock::new();
static TINY: OnceLock<PathBuf> = OnceLock::new();

/// The sample (AD, CA, DE, GB, JP, LV, MD, MT, US) and hand-picked real lines of the
/// countries it lacks (`extra-countries.txt`, the normalisation table), imported once per
/// run (testkit::template).
pub fn template() -> &'static Path {
    SAMPLE.get_or_init(|| {
        testkit::template::imported(
            "api-sample",
            POSTAL_IMPORT,
            &[
                geonames("sample.zip"),
                testkit::fixture("extra-countries.txt"),
            ],
        )
    })
}

/// The whole `allCountries.zip` with `cities500.zip` beside it, for the tests on the full
/// dataset: the import `tests/import/full_dataset.rs` checks (one import per run).
pub fn full_template() -> &'static Path {
    FULL.get_or_init(|| testkit::full_dataset(POSTAL_IMPORT))
}

/// The tiny fixture (147 US lines, 90210 among them; `testkit::tiny`), for the `postal
/// serve` processes of tests that only look up 90210: such a server is ready in
/// milliseconds, not after the 3 s of CPU that loading the sample takes in a debug build.
pub fn tiny_template() -> &'static Path {
    TINY.get_or_init(|| testkit::tiny_dataset(POSTAL_IMPORT))
}

/// The sample plus real lines of FR (Paris, Lyon and their districts) and IT (Milano,
/// Milanino) for the city tests (`cities.txt`); only `spawn_city_app` loads them, so other
/// tests keep the sample's counts.
fn city_template() -> &'static Path {
    CITIES.get_or_init(|| {
        testkit::template::imported(
            "api-cities",
            POSTAL_IMPORT,
            &[
                geonames("sample.zip"),
                testkit::fixture("extra-countries.txt"),
                testkit::fixture("cities.txt"),
            ],
        )
    })
}

/// The dataset of a template, loaded once and shared by every server started on a copy
/// of it (`Settings::dataset`): a server then starts in milliseconds, not the seconds of
/// a load. Other databases (a test's own) are loaded by their server as in production.
fn dataset_of(source: &Path) -> Option<Dataset> {
    static LOADED: Mutex<Vec<(PathBuf, Dataset)>> = Mutex::new(Vec::new());
    let is_template = [&SAMPLE, &FULL, &CITIES]
        .iter()
        .any(|t| t.get().is_some_and(|t| t.as_path() == source));
    if !is_template {
        return None;
    }
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, dataset)) = loaded.iter().find(|(path, _)| path == source) {
        return Some(dataset.clone());
    }
    let dataset = Dataset::load(source).expect("loading a template's dataset");
    loaded.push((source.to_path_buf(), dataset.clone()));
    Some(dataset)
}

/// Held by the test that times its answers under 1,100 slow connections and by the tests
/// that start a browser or a PostgreSQL with its nodes, so that these never run beside it
/// (a CI run saw a 13 s wait past the connection cap with them beside it).
pub fn timing_sensitive() -> std::sync::RwLockWriteGuard<'static, ()> {
    HEAVY.write().unwrap_or_else(|p| p.into_inner())
}

/// Held by the tests that import or load the whole dataset (seconds of CPU each): they run
/// beside each other, never beside the holders of `timing_sensitive` (a CI run saw a real
/// request wait over 16 s past the connection cap with them and the ledgers' lane beside it).
pub fn loads_the_full_dataset() -> std::sync::RwLockReadGuard<'static, ()> {
    HEAVY.read().unwrap_or_else(|p| p.into_inner())
}

static HEAVY: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub struct TestApp {
    pub address: String,
    pub db: PathBuf,
    agent: ureq::Agent,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// A response: status, JSON body (Null when not JSON), `Retry-After` header.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<String>,
    pub content_type: Option<String>,
}

pub fn spawn_app() -> TestApp {
    spawn_app_on_with(template(), postal::api::Settings::default())
}

/// `spawn_app` with other serve settings (durable charges, flush interval).
pub fn spawn_app_with(settings: postal::api::Settings) -> TestApp {
    spawn_app_on_with(template(), settings)
}

/// The app on the sample plus FR and IT city lines (`tests/fixtures/cities.txt`).
pub fn spawn_city_app() -> TestApp {
    spawn_app_on(city_template())
}

/// The real server on a copy of the database `source`.
pub fn spawn_app_on(source: &Path) -> TestApp {
    spawn_app_on_with(source, postal::api::Settings::default())
}

/// The real server on a copy of the database `source`, with `settings`; a template's
/// dataset comes loaded (`dataset_of`).
pub fn spawn_app_on_with(source: &Path, mut settings: postal::api::Settings) -> TestApp {
    let dir = testkit::tempdir();
    let db = testkit::template::copy(source, &dir.path().join("postal.db"));
    if settings.dataset.is_none() {
        settings.dataset = dataset_of(source);
    }
    // Every test's requests come from 127.0.0.1: the dashboard's per-address limit (120 a
    // minute) is raised unless a test sets it (tests/api/strangers.rs checks it).
    if settings.dashboard.requests_per_minute.is_none() {
        settings.dashboard.requests_per_minute = Some(1_000_000);
    }
    let (address, shutdown, server) = start_server(&db, settings);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    TestApp {
        address: format!("http://{address}"),
        db,
        agent,
        shutdown: Some(shutdown),
        server: Some(server),
        _dir: dir,
    }
}

/// A server on `db` answering /healthz: its address (`host:port`), its stop signal, its
/// thread.
fn start_server(
    db: &Path,
    settings: postal::api::Settings,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let server_db = db.to_path_buf();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .and_then(tokio::net::TcpListener::into_std)
                .expect("binding a port");
            let address = listener
                .local_addr()
                .expect("the bound address")
                .to_string();
            tx.send(address).expect("reporting the address");
            postal::api::serve_with(listener, &server_db, settings, async move {
                let _ = shutdown_rx.await;
            })
            .await
            .expect("server");
        });
    });
    let address = rx.recv().expect("server address");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    // The listener is bound before the postal data is loaded (3 s for the sample, more on
    // a loaded machine); connections wait in the backlog meanwhile. Tests that time their
    // requests (raw sockets with a read timeout) start once the server answers.
    let health = agent
        .get(format!("http://{address}/healthz"))
        .config()
        .timeout_global(Some(std::time::Duration::from_secs(300)))
        .build()
        .call()
        .expect("the server answering /healthz");
    assert_eq!(health.status(), 200, "/healthz");
    (address, shutdown, server)
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.stop();
    }
}

impl TestApp {
    /// Stops the server cleanly (every charge flushed) and waits for it.
    fn stop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }

    /// Stops the server, runs `offline` on its database file, and starts a new server
    /// on the same file (default settings, another port).
    pub fn restart_after(&mut self, offline: impl FnOnce(&Path)) {
        self.stop();
        offline(&self.db);
        let (address, shutdown, server) = start_server(&self.db, postal::api::Settings::default());
        self.address = format!("http://{address}");
        self.shutdown = Some(shutdown);
        self.server = Some(server);
    }

    /// POSTs raw bytes with `headers` over a socket of its own and reads the answer
    /// whole, as it came on the wire (no decoding: ureq would gunzip it).
    pub fn post_wire(&self, path: &str, body: &[u8], headers: &[(&str, &str)]) -> Wire {
        let address = self.address.trim_start_matches("http://");
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        let mut request = request.into_bytes();
        request.extend_from_slice(body);
        raw_bytes(address, &request)
    }

    /// POSTs raw bytes to `path`.
    pub fn post_raw(&self, path: &str, body: &[u8], content_type: Option<&str>) -> Reply {
        let mut request = self.agent.post(format!("{}{path}", self.address));
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        let response = request.send(body).expect("sending the request");
        reply(response)
    }

    pub fn post(&self, path: &str, body: &Value) -> Reply {
        self.post_raw(path, body.to_string().as_bytes(), Some("application/json"))
    }

    pub fn get(&self, path: &str) -> Reply {
        let response = self
            .agent
            .get(format!("{}{path}", self.address))
            .call()
            .expect("sending the request");
        reply(response)
    }

    /// GETs `path` with `headers`: status, response headers, body text.
    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Raw {
        let mut request = self.agent.get(format!("{}{path}", self.address));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        raw(request.call().expect("sending the request"))
    }

    /// POSTs `body` as it is to `path` with `headers` (no content type unless given).
    pub fn post_bytes_with(&self, path: &str, body: &[u8], headers: &[(&str, &str)]) -> Raw {
        let mut request = self.agent.post(format!("{}{path}", self.address));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        raw(request.send(body).expect("sending the request"))
    }

    /// POSTs JSON to `path` with `headers`.
    pub fn post_with(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Raw {
        let mut request = self
            .agent
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        raw(request
            .send(body.to_string().as_bytes())
            .expect("sending the request"))
    }

    pub fn lookup(&self, body: Value) -> Reply {
        self.post("/api/lookup", &body)
    }
    pub fn city(&self, body: Value) -> Reply {
        self.post("/api/city", &body)
    }

    pub fn suggest(&self, body: Value) -> Reply {
        self.post("/api/suggest", &body)
    }
    pub fn metacode(&self, body: Value) -> Reply {
        self.post("/api/metacode", &body)
    }
    pub fn metazip(&self, body: Value) -> Reply {
        self.post("/api/metazip", &body)
    }
    pub fn validate(&self, body: Value) -> Reply {
        self.post("/api/validate", &body)
    }
    pub fn validate_bulk(&self, body: Value) -> Reply {
        self.post("/api/validate-bulk", &body)
    }
    pub fn aboutapi(&self, body: Value) -> Reply {
        self.post("/api/aboutapi", &body)
    }
    pub fn nearest(&self, body: Value) -> Reply {
        self.post("/api/nearest", &body)
    }
    pub fn radius(&self, body: Value) -> Reply {
        self.post("/api/radius", &body)
    }
    pub fn distance(&self, body: Value) -> Reply {
        self.post("/api/distance", &body)
    }
    pub fn autocomplete(&self, body: Value) -> Reply {
        self.post("/api/autocomplete", &body)
    }
    pub fn countries(&self, body: Value) -> Reply {
        self.post("/api/countries", &body)
    }
    pub fn nearest_bulk(&self, body: Value) -> Reply {
        self.post("/api/nearest-bulk", &body)
    }

    /// Runs the real `postal` CLI on this app's database; its stdout as JSON.
    pub fn cli(&self, args: &[&str]) -> Value {
        let output = Command::new(POSTAL)
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .output()
            .expect("running postal");
        assert!(
            output.status.success(),
            "postal {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("postal prints JSON")
    }

    /// A new account (balance 0.028 USD); returns (account id, API key).
    pub fn create_account(&self) -> (String, String) {
        let created = self.cli(&["account", "create", "--name", "test"]);
        (
            created["accountId"]
                .as_str()
                .expect("accountId")
                .to_string(),
            created["apiKey"].as_str().expect("apiKey").to_string(),
        )
    }

    /// A new account's API key.
    pub fn api_key(&self) -> String {
        self.create_account().1
    }

    /// The account's balance in micro-dollars, read through `postal account show`.
    pub fn balance_micros(&self, account: &str) -> i64 {
        let shown = self.cli(&["account", "show", account]);
        usd_to_micros(&shown["balance"])
    }

    /// Sets the balance to exactly `micros` with an adjustment.
    pub fn set_balance(&self, account: &str, micros: i64) {
        let delta = micros - self.balance_micros(account);
        if delta != 0 {
            let usd = micros_to_usd(delta);
            self.cli(&[
                "account", "adjust", account, "--usd", &usd, "--reason", "test",
            ]);
        }
        assert_eq!(self.balance_micros(account), micros);
    }
}

/// Writes `request` (which asks `Connection: close`) to `address` (`host:port`) and reads
/// the answer until the server closes: the bytes as they came.
pub fn raw_bytes(address: &str, request: &[u8]) -> Wire {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("connecting");
    stream.write_all(request).expect("sending the request");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("reading the answer");
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&bytes[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("")[9..12].parse().expect("a status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Wire {
        status,
        headers,
        body: bytes[split + 4..].to_vec(),
    }
}

/// A response as it came on the wire: status, headers (names lower-cased, in order),
/// body bytes.
#[derive(Debug)]
pub struct Wire {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Wire {
    /// The values of header `name`, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The only value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        match self.all(name)[..] {
            [] => None,
            [one] => Some(one),
            _ => panic!("several {name} headers: {:?}", self.headers),
        }
    }

    /// The body, gunzipped when `Content-Encoding: gzip`.
    pub fn decoded(&self) -> Vec<u8> {
        use std::io::Read;
        match self.header("content-encoding") {
            None => self.body.clone(),
            Some("gzip") => {
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&self.body[..])
                    .read_to_end(&mut plain)
                    .expect("a gzip body");
                plain
            }
            Some(other) => panic!("unexpected Content-Encoding {other}"),
        }
    }

    /// The decoded body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.decoded()).expect("a JSON body")
    }
}

/// A response as it came: status, headers, body text.
pub struct Raw {
    pub status: u16,
    pub headers: ureq::http::HeaderMap,
    pub text: String,
}

impl Raw {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

fn raw(mut response: ureq::http::Response<ureq::Body>) -> Raw {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    Raw {
        status,
        headers,
        text,
    }
}

fn reply(mut response: ureq::http::Response<ureq::Body>) -> Reply {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let retry_after = header("retry-after");
    let content_type = header("content-type");
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        body,
        retry_after,
        content_type,
    }
}

/// A JSON USD number as micro-dollars, exactly (the number's text is parsed as a decimal).
pub fn usd_to_micros(value: &Value) -> i64 {
    let text = value.to_string();
    let negative = text.starts_with('-');
    let text = text.trim_start_matches('-');
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    assert!(fraction.len() <= 6, "more than 6 decimals: {value}");
    let micros = whole.parse::<i64>().expect("whole dollars") * 1_000_000
        + format!("{fraction:0<6}").parse::<i64>().expect("decimals");
    if negative { -micros } else { micros }
}

pub fn micros_to_usd(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

/// `{"error": text}`.
pub fn error(text: &str) -> Value {
    json!({ "error": text })
}

/// The request body of a single-record endpoint.
pub fn code(key: &str, zipcode: Value, country: Option<&str>) -> Value {
    let mut body = json!({ "apiKey": key, "zipcode": zipcode });
    if let Some(c) = country {
        body["country"] = json!(c);
    }
    body
}

/// A response read off a raw socket: status, lower-cased head, body.
#[derive(Debug)]
pub struct RawReply {
    pub status: u16,
    pub head: String,
    pub body: Value,
}

/// Writes `request` as-is to `address` (`host:port`) and reads the response until the
/// server closes the connection or `timeout` passes.
pub fn raw_request(address: &str, request: &[u8], timeout: std::time::Duration) -> RawReply {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("connecting");
    stream
        .set_read_timeout(Some(timeout))
        .expect("read timeout");
    // The server may answer and close before taking the whole request (413, 431).
    let _ = stream.write_all(request);
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
        }
        if let Some(reply) = parse_raw(&bytes) {
            return reply;
        }
    }
    parse_raw(&bytes).unwrap_or_else(|| {
        panic!(
            "no complete response in {:?}",
            String::from_utf8_lossy(&bytes)
        )
    })
}

/// The first complete response in `bytes` (a head and `content-length` bytes of body).
fn parse_raw(bytes: &[u8]) -> Option<RawReply> {
    let text = String::from_utf8_lossy(bytes);
    let (head, rest) = text.split_once("\r\n\r\n")?;
    let head = head.to_ascii_lowercase();
    let status = head.get(9..12)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(Some(0), |v| v.trim().parse().ok())?;
    if rest.len() < length {
        return None;
    }
    Some(RawReply {
        status,
        body: serde_json::from_str(&rest[..length]).unwrap_or(Value::Null),
        head,
    })
}

/// `postal serve`, the binary (not in process), on a copy of the tiny fixture, run
/// through `wrapper` when it is not empty (`prlimit --nofile=1024:1024`); killed when
/// dropped.
pub struct ServeProcess {
    /// `host:port`.
    pub address: String,
    /// The key of the account `postal serve` created (the tiny database has none).
    pub api_key: String,
    _serve: testkit::Serve,
    _dir: tempfile::TempDir,
}

pub fn spawn_postal_serve(wrapper: &[&str]) -> ServeProcess {
    let dir = testkit::tempdir();
    let db = testkit::template::copy(tiny_template(), &dir.path().join("postal.db"));
    let args = testkit::serve::args(&db, &[]);
    let command = match wrapper {
        [] => testkit::serve::command(POSTAL, &args),
        [program, rest @ ..] => {
            let mut command = Command::new(program);
            command.args(rest).arg(POSTAL).args(&args);
            command.env_remove("POSTAL_DB");
            command
        }
    };
    let serve = testkit::Serve::spawn(command);
    let api_key = serve.created_key();
    assert!(api_key.starts_with("sk_"), "no API key printed");
    ServeProcess {
        address: serve.host_port().to_string(),
        api_key,
        _serve: serve,
        _dir: dir,
    }
}
