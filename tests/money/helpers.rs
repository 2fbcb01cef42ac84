use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Instant, SystemTime};

use postal::billing::{Billing, BillingOptions};
use postal::db::{self, sqlite::accounts, sqlite::keys};
use postal::domain::admin::BalanceChange;
use postal::domain::api_key::hash_presented_key;
use postal::domain::charge::Caller;
use postal::domain::ids::AccountId;
use postal::domain::money::Micros;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

pub use testkit::Client;

const POSTAL: &str = env!("CARGO_BIN_EXE_postal");

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
        let mut command = Command::new(POSTAL);
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
        let adjustment = BalanceChange::adjustment(delta, "test set-up").unwrap();
        accounts::change_balance(
            &mut self.conn(),
            &AccountId::new(account.account_id.as_str()),
            &adjustment,
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
        accounts::show(&self.conn(), &AccountId::new(account_id))
            .unwrap()
            .balance
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

/// The postal data of `postal serve` here: `tests/fixtures/tiny.txt` (these tests only
/// look up 90210), imported once per run.
fn postal_template() -> &'static std::path::Path {
    static TEMPLATE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| testkit::tiny_dataset(env!("CARGO_BIN_EXE_postal-import")))
}

impl TestDb {
    /// A fresh database holding the tiny fixture's postal data (for `postal serve`).
    pub fn with_postal_data() -> TestDb {
        let dir = testkit::tempdir();
        let path = testkit::template::copy(postal_template(), &dir.path().join("postal.db"));
        TestDb { path, _dir: dir }
    }

    /// Starts `postal serve` on a free port with `args` (e.g. `--durable-charges`).
    pub fn serve(&self, args: &[&str]) -> Server {
        self.serve_wrapped(None, args)
    }

    /// As `serve`, through `sh -c '<prefix> exec postal ...'` (e.g. `trap "" XFSZ;`).
    pub fn serve_wrapped(&self, shell_prefix: Option<&str>, args: &[&str]) -> Server {
        let serve_args = testkit::serve::args(&self.path, args);
        let command = match shell_prefix {
            None => testkit::serve::command(POSTAL, &serve_args),
            Some(prefix) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("{prefix} exec \"$0\" \"$@\""))
                    .arg(POSTAL)
                    .args(&serve_args)
                    .env_remove("POSTAL_DB");
                c
            }
        };
        Server {
            serve: testkit::Serve::spawn(command),
        }
    }
}

/// A running `postal serve` process.
pub struct Server {
    serve: testkit::Serve,
}

impl Server {
    pub fn pid(&self) -> String {
        self.serve.pid().to_string()
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        self.serve.log()
    }

    /// POSTs `/api/lookup` of 90210 with `key`: (status, body).
    pub fn lookup(&self, key: &str) -> (u16, Value) {
        self.client().lookup(key)
    }

    /// POSTs `body` with an `Idempotency-Key`: (status, its `Idempotent-Replayed`
    /// header, body); a failed connection is status 0.
    pub fn post_keyed(&self, path: &str, body: &Value, key: &str) -> (u16, Option<String>, Value) {
        let (status, replayed, text) = self.client().post_keyed(path, body, key);
        (
            status,
            replayed,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }

    /// A client that can move to another thread.
    pub fn client(&self) -> Client {
        self.serve.client()
    }

    /// Sends `signal` (`TERM`, `KILL`) and waits for the process to end.
    pub fn stop(&mut self, signal: &str) -> std::process::ExitStatus {
        self.serve.stop(signal)
    }
}

/// Clients hammering `/api/lookup` with `key` until `stop`; each 200 is recorded with
/// the instant it was received.
pub fn load(
    server: &Server,
    key: &str,
    clients: usize,
) -> (Arc<AtomicBool>, testkit::load::Threads) {
    testkit::load::load(&[server.client()], key, clients)
}

/// The instants of the 200s every client received.
pub fn join(threads: testkit::load::Threads) -> Vec<Instant> {
    testkit::load::join(threads, 1).ok
}
