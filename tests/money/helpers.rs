use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Instant, SystemTime};

use postal::billing::{Billing, BillingOptions, Caller};
use postal::db::{self, accounts, keys};
use postal::domain::api_key::hash_presented_key;
use postal::domain::money::Micros;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

pub struct TestDb {
    pub path: PathBuf,
    _dir: TempDir,
}

/// A new account as `postal account create` reports it.
pub struct TestAccount {
    pub account_id: String,
    pub key_id: String,
    pub api_key: String,
}

/// The result of one run of the `postal` binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as the one JSON object (and newline) cli.md promises.
    pub fn json(&self) -> Value {
        assert!(self.stdout.ends_with('\n'), "stdout: {:?}", self.stdout);
        assert_eq!(self.stdout.lines().count(), 1, "stdout: {:?}", self.stdout);
        serde_json::from_str(&self.stdout).expect("stdout is JSON")
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8(o.stdout).unwrap(),
            stderr: String::from_utf8(o.stderr).unwrap(),
        }
    }
}

impl TestDb {
    pub fn new() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("postal.db");
        db::open(&path).unwrap();
        TestDb { path, _dir: dir }
    }

    /// A path in a directory of its own where no file exists yet (a restore's target).
    pub fn at_new_path() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("postal.db");
        TestDb { path, _dir: dir }
    }

    /// The directory the file is in.
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub fn conn(&self) -> Connection {
        db::open(&self.path).unwrap()
    }

    /// Runs `postal --db <this> args...`.
    pub fn postal(&self, args: &[&str]) -> Run {
        self.postal_command(args).output().unwrap().into()
    }

    pub fn postal_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_postal"));
        command.arg("--db").arg(&self.path).args(args);
        command.env_remove("POSTAL_DB");
        command
    }

    /// `postal account create`, checked to succeed.
    pub fn create_account(&self) -> TestAccount {
        let run = self.postal(&["account", "create"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let json = run.json();
        TestAccount {
            account_id: json["accountId"].as_str().unwrap().to_owned(),
            key_id: json["keyId"].as_str().unwrap().to_owned(),
            api_key: json["apiKey"].as_str().unwrap().to_owned(),
        }
    }

    /// A new account topped up with 5 USD by the CLI.
    pub fn funded_account(&self) -> TestAccount {
        let account = self.create_account();
        let run = self.postal(&["account", "topup", &account.account_id, "--usd", "5"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        account
    }

    /// A new account whose balance is exactly `queries` queries.
    pub fn account_worth(&self, queries: i64) -> TestAccount {
        let account = self.create_account();
        let delta = Micros::new(queries * 28 - 28_000).unwrap();
        if delta == Micros::ZERO {
            return account;
        }
        accounts::adjust(
            &mut self.conn(),
            &account.account_id,
            delta,
            "test set-up",
            SystemTime::now(),
        )
        .unwrap();
        postal::billing::notify::announce(&self.conn());
        account
    }

    pub fn caller(&self, api_key: &str) -> Option<Caller> {
        let hash = hash_presented_key(api_key);
        keys::load_active(&self.conn())
            .unwrap()
            .into_iter()
            .find_map(|k| (k.hash == hash).then_some(k.caller))
    }

    pub fn balance(&self, account_id: &str) -> Micros {
        accounts::show(&self.conn(), account_id).unwrap().balance
    }

    pub fn ledger_entries(&self) -> i64 {
        self.conn()
            .query_row("SELECT count(*) FROM ledger", [], |r| r.get(0))
            .unwrap()
    }

    pub fn billing(&self) -> Billing {
        self.billing_with(BillingOptions::default())
    }

    pub fn billing_with(&self, options: BillingOptions) -> Billing {
        Billing::start(&self.path, options).unwrap()
    }

    /// Queries recorded by charge rows of the ledger, all accounts.
    pub fn charged_queries(&self) -> i64 {
        self.conn()
            .query_row(
                "SELECT coalesce(sum(query_count), 0) FROM ledger WHERE kind = 'charge'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// `postal ledger verify` says ok.
    pub fn assert_ledger_ok(&self) {
        let run = self.postal(&["ledger", "verify"]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert_eq!(run.json()["ok"], Value::Bool(true));
    }
}

/// A database with the shared sample imported, built once per test run.
fn postal_template() -> &'static std::path::Path {
    static TEMPLATE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        let db = dir.join("template.db");
        postal::import::run(&postal::import::Options {
            db: db.clone(),
            sources: vec![
                concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/geonames/sample.zip").to_string(),
            ],
            country_info: Some(
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../shared/geonames/countryInfo.txt"
                )
                .to_string(),
            ),
            gazetteer: None,
            progress: false,
            allow_shrink: false,
            overrides: None,
            if_changed: false,
        })
        .expect("importing the sample");
        db
    })
}

impl TestDb {
    /// A fresh database holding the sample postal data (for `postal serve`).
    pub fn with_postal_data() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("postal.db");
        std::fs::copy(postal_template(), &path).unwrap();
        TestDb { path, _dir: dir }
    }

    /// Starts `postal serve` on a free port with `args` (e.g. `--durable-charges`).
    pub fn serve(&self, args: &[&str]) -> Server {
        self.serve_wrapped(None, args)
    }

    /// As `serve`, through `sh -c '<prefix> exec postal ...'` (e.g. `trap "" XFSZ;`).
    pub fn serve_wrapped(&self, shell_prefix: Option<&str>, args: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{port}");
        let mut command = match shell_prefix {
            None => Command::new(env!("CARGO_BIN_EXE_postal")),
            Some(prefix) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("{prefix} exec \"$0\" \"$@\""))
                    .arg(env!("CARGO_BIN_EXE_postal"));
                c
            }
        };
        command
            .arg("--db")
            .arg(&self.path)
            .args(["serve", "--listen", &listen])
            .args(args)
            .env_remove("POSTAL_DB")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let address = format!("http://{listen}");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let server = Server {
            child,
            address,
            agent,
            log,
        };
        // Ready when it answers (it binds the port before loading the postal data).
        for _ in 0..1000 {
            let ready = server
                .agent
                .get(format!("{}/openapi.json", server.address))
                .call()
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("postal serve did not start: {}", server.log());
    }
}

/// A running `postal serve` process.
pub struct Server {
    pub child: std::process::Child,
    pub address: String,
    agent: ureq::Agent,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// POSTs `/api/lookup` of 90210 with `key`: (status, body).
    pub fn lookup(&self, key: &str) -> (u16, Value) {
        self.post(
            "/api/lookup",
            &serde_json::json!({"apiKey": key, "zipcode": "90210"}),
        )
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        post(&self.agent, &format!("{}{path}", self.address), body)
    }

    /// POSTs `body` with an `Idempotency-Key`: (status, its `Idempotent-Replayed`
    /// header, body); a failed connection is status 0.
    pub fn post_keyed(&self, path: &str, body: &Value, key: &str) -> (u16, Option<String>, Value) {
        let request = self
            .agent
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .send(body.to_string().as_bytes());
        match request {
            Ok(mut response) => {
                let replayed = response
                    .headers()
                    .get("idempotent-replayed")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let text = response.body_mut().read_to_string().unwrap_or_default();
                let body = serde_json::from_str(&text).unwrap_or(Value::Null);
                (response.status().as_u16(), replayed, body)
            }
            Err(_) => (0, None, Value::Null),
        }
    }

    /// A client that can move to another thread.
    pub fn client(&self) -> Client {
        Client {
            agent: self.agent.clone(),
            address: self.address.clone(),
        }
    }

    /// Sends `signal` (`TERM`, `KILL`) and waits for the process to end.
    pub fn stop(&mut self, signal: &str) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid()])
            .status()
            .unwrap();
        assert!(sent.success());
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    address: String,
}

impl Client {
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        post(&self.agent, &format!("{}{path}", self.address), body)
    }

    pub fn lookup(&self, key: &str) -> (u16, Value) {
        self.post(
            "/api/lookup",
            &serde_json::json!({"apiKey": key, "zipcode": "90210"}),
        )
    }
}

/// (status, JSON body or Null); a failed connection is status 0.
fn post(agent: &ureq::Agent, url: &str, body: &Value) -> (u16, Value) {
    let request = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body.to_string().as_bytes());
    match request {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// Clients hammering `/api/lookup` with `key` until `stop`; each 200 is recorded with
/// the instant it was received.
pub fn load(
    server: &Server,
    key: &str,
    clients: usize,
) -> (Arc<AtomicBool>, Vec<thread::JoinHandle<Vec<Instant>>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = (0..clients)
        .map(|_| {
            let (client, key, stop) = (server.client(), key.to_string(), stop.clone());
            thread::spawn(move || {
                let mut answered = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match client.lookup(&key).0 {
                        200 => answered.push(Instant::now()),
                        0 => break, // the server is gone
                        _ => {}
                    }
                }
                answered
            })
        })
        .collect();
    (stop, threads)
}

pub fn join(threads: Vec<thread::JoinHandle<Vec<Instant>>>) -> Vec<Instant> {
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}
