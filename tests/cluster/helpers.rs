use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

/// One scenario at a time: each starts its own PostgreSQL and three nodes.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where PostgreSQL's binaries are: `POSTAL_PG_BINDIR`, else the newest
/// `/usr/lib/postgresql/*/bin`.
fn bindir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("POSTAL_PG_BINDIR") {
        return Some(PathBuf::from(dir));
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    dirs.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
}

/// A PostgreSQL of the test's own in a temporary directory, on a free loopback port,
/// started as a child whose pid the test holds; `fsync=off` (the tests crash processes,
/// not the machine). As root it runs as the `postgres` user (PostgreSQL refuses root).
pub struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

fn is_root() -> bool {
    rustix_uid() == 0
}

fn rustix_uid() -> u32 {
    // `id -u`: no libc binding needed in the tests.
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// `program` run as the `postgres` user when we are root (setpriv execs, so the pid is
/// the program's own).
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--clear-groups",
            "--",
        ])
        .arg(program);
        c
    } else {
        Command::new(program)
    }
}

impl PgCluster {
    /// `None` (the test is skipped) when PostgreSQL is not installed and
    /// `POSTAL_REQUIRE_PG` is not set.
    pub fn start() -> Option<PgCluster> {
        let Some(bin) = bindir() else {
            assert!(
                std::env::var_os("POSTAL_REQUIRE_PG").is_none(),
                "POSTAL_REQUIRE_PG is set but no PostgreSQL binaries were found"
            );
            eprintln!("skipped: no PostgreSQL (set POSTAL_PG_BINDIR or install postgresql)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let owner = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(owner.success(), "chown to postgres");
        }
        let initdb = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args([
                "-A",
                "trust",
                "-U",
                "postal",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            initdb.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let mut cluster = PgCluster {
            dir,
            bin,
            port: free_port(),
            child: None,
        };
        cluster.run();
        Some(cluster)
    }

    fn run(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.path().join("postgres.log"))
            .unwrap();
        let child = as_postgres(&self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-k")
            .arg(self.dir.path())
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=60"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if self.query_i64("SELECT 1").is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        panic!("PostgreSQL did not start: {}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("postgres://postal@127.0.0.1:{}/postgres", self.port)
    }

    fn signal(&mut self, signal: &str) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// An immediate shutdown (SIGQUIT): no checkpoint, recovery at the next start. Never
    /// SIGKILL the postmaster: it leaves its backends behind.
    pub fn crash(&mut self) {
        self.signal("QUIT");
    }

    /// Starts again on the same data and port.
    pub fn restart(&mut self) {
        self.run();
    }

    /// One number from `sql` (e.g. a balance), on a connection of its own.
    pub fn query_i64(&self, sql: &str) -> Result<i64, String> {
        let url = self.url();
        let sql = sql.to_owned();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            let row = client
                .query_one(&sql, &[])
                .await
                .map_err(|e| e.to_string())?;
            row.try_get::<_, i64>(0)
                .or_else(|_| row.try_get::<_, i32>(0).map(i64::from))
                .map_err(|e| e.to_string())
        })
    }

    pub fn i64(&self, sql: &str) -> i64 {
        self.query_i64(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // A fast shutdown (SIGINT); the directory goes with `dir`.
        self.signal("INT");
    }
}

/// The sample database (postal data only), imported once per test binary.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
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
    let out = Command::new(env!("CARGO_BIN_EXE_postal"))
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

/// A running `postal serve --ledger` node on a copy of the sample database.
pub struct Node {
    child: Child,
    pub address: String,
    agent: ureq::Agent,
    log: Arc<Mutex<String>>,
    _db: TempDir,
}

impl Node {
    pub fn start(url: &str) -> Node {
        let db = tempfile::tempdir().unwrap();
        let path = db.path().join("postal.db");
        std::fs::copy(template(), &path).unwrap();
        let listen = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_postal"))
            .arg("--db")
            .arg(&path)
            .args(["serve", "--listen", &listen, "--ledger", url])
            .env_remove("POSTAL_DB")
            .env_remove("POSTAL_LEDGER")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        thread::spawn(move || {
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
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let node = Node {
            child,
            address: format!("http://{listen}"),
            agent,
            log,
            _db: db,
        };
        for _ in 0..1500 {
            let ready = node
                .agent
                .get(format!("{}/healthz", node.address))
                .call()
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return node;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("postal serve did not start: {}", node.log());
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn client(&self) -> Client {
        Client {
            agent: self.agent.clone(),
            address: self.address.clone(),
        }
    }

    /// Sends `signal` (`TERM`, `KILL`) and waits for the process to end.
    pub fn stop(&mut self, signal: &str) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        self.child.wait().unwrap()
    }

    /// Sends `signal` (`STOP`, `CONT`) without waiting.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// `GET /readyz`: (status, body).
    pub fn readyz(&self) -> (u16, Value) {
        let mut response = self
            .agent
            .get(format!("{}/readyz", self.address))
            .call()
            .unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `GET /metrics` (OpenMetrics text).
    pub fn metrics(&self) -> String {
        let mut response = self
            .agent
            .get(format!("{}/metrics", self.address))
            .call()
            .unwrap();
        response.body_mut().read_to_string().unwrap_or_default()
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

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three nodes on one ledger.
pub fn three_nodes(url: &str) -> Vec<Node> {
    (0..3).map(|_| Node::start(url)).collect()
}

#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    address: String,
}

impl Client {
    /// (status, JSON body or Null); a failed connection is status 0.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let request = self
            .agent
            .post(format!("{}{path}", self.address))
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

    pub fn lookup(&self, key: &str) -> (u16, Value) {
        self.post("/api/lookup", &json!({"apiKey": key, "zipcode": "90210"}))
    }

    /// POSTs `body` with an `Idempotency-Key`: (status, its `Idempotent-Replayed`
    /// header, the body as sent); a failed connection is status 0.
    pub fn post_keyed(&self, path: &str, body: &Value, key: &str) -> (u16, Option<String>, String) {
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
                (response.status().as_u16(), replayed, text)
            }
            Err(_) => (0, None, String::new()),
        }
    }

    /// The free operation (`/api/countries`): (status).
    pub fn countries(&self, key: &str) -> u16 {
        self.post("/api/countries", &json!({"apiKey": key})).0
    }
}

/// What load clients saw.
#[derive(Default, Debug, Clone)]
pub struct Seen {
    /// The instants of the 200s; per node once joined.
    pub ok: Vec<Instant>,
    pub ok_per_node: Vec<Vec<Instant>>,
    pub payment: u64,
    pub unavailable: u64,
    pub other: Vec<u16>,
    pub failed: u64,
}

/// `per_node` clients per node looking up with `key` until `stop`.
pub fn load(
    nodes: &[&Node],
    key: &str,
    per_node: usize,
) -> (Arc<AtomicBool>, Vec<thread::JoinHandle<(usize, Seen)>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        for _ in 0..per_node {
            let (client, key, stop) = (node.client(), key.to_owned(), stop.clone());
            threads.push(thread::spawn(move || {
                let mut seen = Seen::default();
                while !stop.load(Ordering::Relaxed) {
                    match client.lookup(&key).0 {
                        200 => seen.ok.push(Instant::now()),
                        402 => seen.payment += 1,
                        503 => seen.unavailable += 1,
                        0 => {
                            seen.failed += 1;
                            thread::sleep(Duration::from_millis(20));
                        }
                        s => seen.other.push(s),
                    }
                }
                (i, seen)
            }));
        }
    }
    (stop, threads)
}

/// Every client's counts together, the 200s also per node index.
pub fn join(threads: Vec<thread::JoinHandle<(usize, Seen)>>, nodes: usize) -> Seen {
    let mut total = Seen {
        ok_per_node: vec![Vec::new(); nodes],
        ..Seen::default()
    };
    for t in threads {
        let (i, seen) = t.join().unwrap();
        total.ok.extend(&seen.ok);
        total.ok_per_node[i].extend(seen.ok);
        total.payment += seen.payment;
        total.unavailable += seen.unavailable;
        total.failed += seen.failed;
        total.other.extend(seen.other);
    }
    total
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
