//! `spawn_app()`: the real server on a fresh database holding `sample.zip`, on a free
//! port, with one method per endpoint; accounts are made with the real `postal` CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

/// The shared sample dataset: AD, CA, DE, GB, JP, LV, MD, MT, US.
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/geonames/sample.zip");
/// Hand-picked real lines of the countries the sample lacks (normalisation table).
const EXTRA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/extra-countries.txt"
);
const COUNTRY_INFO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/geonames/countryInfo.txt"
);

/// Real lines of FR (Paris, Lyon and their districts) and IT (Milano, Milanino) for the
/// city tests; only `spawn_city_app` loads them, so other tests keep the sample's counts.
const CITIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cities.txt");

/// A database with the sample imported, built once per test run and copied per app.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| imported(&[SAMPLE, EXTRA]))
}

/// The sample plus `cities.txt`, built once per test run.
fn city_template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| imported(&[SAMPLE, EXTRA, CITIES]))
}

fn imported(sources: &[&str]) -> PathBuf {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let db = dir.join("template.db");
    postal::import::run(&postal::import::Options {
        db: db.clone(),
        sources: sources.iter().map(|s| s.to_string()).collect(),
        country_info: Some(COUNTRY_INFO.to_string()),
        progress: false,
    })
    .expect("importing the sample");
    db
}

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
    spawn_app_on(template())
}

/// The app on the sample plus FR and IT city lines (`tests/fixtures/cities.txt`).
pub fn spawn_city_app() -> TestApp {
    spawn_app_on(city_template())
}

fn spawn_app_on(template: &Path) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("postal.db");
    std::fs::copy(template, &db).expect("copying the template database");
    let (tx, rx) = std::sync::mpsc::channel();
    let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let server_db = db.clone();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            use poem::listener::{Acceptor, Listener};
            let acceptor = poem::listener::TcpListener::bind("127.0.0.1:0")
                .into_acceptor()
                .await
                .expect("binding a port");
            let address = acceptor.local_addr()[0].to_string();
            let address = address.trim_start_matches("socket://").to_string();
            tx.send(address).expect("reporting the address");
            postal::api::serve_with(acceptor, &server_db, async move {
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
    TestApp {
        address: format!("http://{address}"),
        db,
        agent,
        shutdown: Some(shutdown),
        server: Some(server),
        _dir: dir,
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}

impl TestApp {
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

    /// Runs the real `postal` CLI on this app's database; its stdout as JSON.
    pub fn cli(&self, args: &[&str]) -> Value {
        let output = Command::new(env!("CARGO_BIN_EXE_postal"))
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
