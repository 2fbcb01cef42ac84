//! The cluster's harness on testkit: a throwaway PostgreSQL (`testkit::pg`), nodes
//! (`postal serve --ledger`, `testkit::Serve`) on a copy of the tiny fixture, the CLI
//! against the ledger, the ledger's checks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;

use serde_json::Value;
use tempfile::TempDir;

pub use testkit::Client;
pub use testkit::load::Seen;
pub use testkit::pg::PgCluster;

const POSTAL: &str = env!("CARGO_BIN_EXE_postal");

/// One scenario at a time: each starts its own PostgreSQL and three nodes.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// What every node serves: `tests/fixtures/tiny.txt` (the nodes only ever look up 90210),
/// imported once per run.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| testkit::tiny_dataset(env!("CARGO_BIN_EXE_postal-import")))
}

/// The result of one run of the `postal` binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        assert_eq!(
            self.code, 0,
            "stdout {} stderr {}",
            self.stdout, self.stderr
        );
        serde_json::from_str(&self.stdout).expect("stdout is JSON")
    }
}

/// `postal --ledger <url> args...` (the admin CLI against the cluster).
pub fn postal(url: &str, args: &[&str]) -> Run {
    let out = Command::new(POSTAL)
        .args(["--ledger", url])
        .args(args)
        .env_remove("POSTAL_DB")
        .env_remove("POSTAL_LEDGER")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A new account as `postal account create` reports it.
pub struct Account {
    pub account_id: String,
    pub api_key: String,
}

/// A new account whose balance is exactly `queries` queries (the free grant adjusted).
pub fn account_worth(url: &str, queries: i64) -> Account {
    let created = postal(url, &["account", "create"]).json();
    let account = Account {
        account_id: created["accountId"].as_str().unwrap().to_owned(),
        api_key: created["apiKey"].as_str().unwrap().to_owned(),
    };
    let delta = queries * 28 - 28_000;
    if delta != 0 {
        let usd = format!(
            "{}{}.{:06}",
            if delta < 0 { "-" } else { "" },
            delta.abs() / 1_000_000,
            delta.abs() % 1_000_000
        );
        postal(
            url,
            &[
                "account",
                "adjust",
                &account.account_id,
                "--usd",
                &usd,
                "--reason",
                "test",
            ],
        )
        .json();
    }
    account
}

/// A running `postal serve --ledger` node on a copy of the tiny fixture.
pub struct Node {
    serve: testkit::Serve,
    _db: TempDir,
}

impl Node {
    pub fn start(url: &str) -> Node {
        let db = testkit::tempdir();
        let path = testkit::template::copy(template(), &db.path().join("postal.db"));
        let serve = testkit::Serve::start(POSTAL, &path, &["--ledger", url]);
        Node { serve, _db: db }
    }

    pub fn log(&self) -> String {
        self.serve.log()
    }

    pub fn client(&self) -> Client {
        self.serve.client()
    }

    /// Sends `signal` (`TERM`, `KILL`) and waits for the process to end.
    pub fn stop(&mut self, signal: &str) -> std::process::ExitStatus {
        self.serve.stop(signal)
    }

    /// Sends `signal` (`STOP`, `CONT`) without waiting.
    pub fn signal(&self, signal: &str) {
        self.serve.signal(signal)
    }

    /// `GET /readyz`: (status, body).
    pub fn readyz(&self) -> (u16, Value) {
        let (status, text) = self.client().get("/readyz");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `GET /metrics` (OpenMetrics text).
    pub fn metrics(&self) -> String {
        self.client().get("/metrics").1
    }

    /// This node's id on the ledger, as `/readyz` tells it.
    pub fn node_id(&self) -> i64 {
        let (_, body) = self.readyz();
        body["cluster"]["nodeId"]
            .as_str()
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("no node id in /readyz: {body}"))
    }
}

/// Three nodes on one ledger, started side by side.
pub fn three_nodes(url: &str) -> Vec<Node> {
    let starting: Vec<_> = (0..3)
        .map(|_| {
            let url = url.to_string();
            thread::spawn(move || Node::start(&url))
        })
        .collect();
    starting.into_iter().map(|t| t.join().unwrap()).collect()
}

/// `per_node` clients per node looking up with `key` until `stop`.
pub fn load(
    nodes: &[&Node],
    key: &str,
    per_node: usize,
) -> (Arc<AtomicBool>, testkit::load::Threads) {
    let clients: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    testkit::load::load(&clients, key, per_node)
}

/// Every client's counts together, the 200s also per node index.
pub fn join(threads: testkit::load::Threads, nodes: usize) -> Seen {
    testkit::load::join(threads, nodes)
}

/// The ledger's checks: `postal ledger verify --ledger` ok, every `leased` within its
/// balance and equal to the sum of its grants.
pub fn assert_ledger_ok(pg: &PgCluster) {
    let verified = postal(&pg.url(), &["ledger", "verify"]);
    assert_eq!(verified.code, 0, "{} {}", verified.stdout, verified.stderr);
    assert_eq!(verified.json()["ok"], true);
    assert_eq!(
        pg.i64("SELECT count(*) FROM accounts WHERE leased < 0 OR leased > balance"),
        0
    );
}

/// Queries charged to the account in the ledger.
pub fn charged_queries(pg: &PgCluster, account_id: &str) -> i64 {
    pg.i64(&format!(
        "SELECT coalesce(sum(query_count), 0)::bigint FROM ledger l JOIN accounts a
         ON a.id = l.account_id WHERE a.public_id = '{account_id}' AND kind = 'charge'"
    ))
}

pub fn balance(pg: &PgCluster, account_id: &str) -> i64 {
    pg.i64(&format!(
        "SELECT balance FROM accounts WHERE public_id = '{account_id}'"
    ))
}
