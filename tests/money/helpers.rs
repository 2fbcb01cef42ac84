use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::SystemTime;

use postal::db::{self, Billing, Caller, accounts};
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
        account
    }

    pub fn caller(&self, api_key: &str) -> Option<Caller> {
        accounts::authenticate(&self.conn(), &hash_presented_key(api_key)).unwrap()
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
        Billing::start(&self.path).unwrap()
    }

    /// `postal ledger verify` says ok.
    pub fn assert_ledger_ok(&self) {
        let run = self.postal(&["ledger", "verify"]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert_eq!(run.json()["ok"], Value::Bool(true));
    }
}
