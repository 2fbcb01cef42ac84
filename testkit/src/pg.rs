//! A PostgreSQL of the test's own: a copy of a data directory made once per run (initdb
//! takes a second, the copy a tenth), started on a free loopback port as a child whose
//! pid the test holds, stopped and removed with the value; `fsync=off` (the tests crash
//! processes, not the machine). As root it runs as the `postgres` user (PostgreSQL
//! refuses root).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

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

fn is_root() -> bool {
    // `id -u`: no libc binding needed in the tests.
    let out = Command::new("id").arg("-u").output().expect("running id");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
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

/// A new temporary directory PostgreSQL may write in (in the system's temporary
/// directory: every user can reach it, which a checkout under a private home may not).
fn postgres_dir() -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix("postal-pg-")
        .tempdir()
        .expect("a temporary directory");
    if is_root() {
        let owner = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir.path())
            .status()
            .expect("running chown");
        assert!(owner.success(), "chown to postgres");
    }
    dir
}

/// `cp -a from to` (keeps the owner and the 0700 mode PostgreSQL demands).
fn copy_dir(from: &Path, to: &Path) {
    let copied = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("running cp");
    assert!(
        copied.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// A fresh data directory (`initdb`), made once per run and cached under the tests'
/// scratch directory.
fn data_template(bin: &Path) -> PathBuf {
    let dir = crate::template::cached("pg-data", &[&bin.join("initdb")], |dir| {
        let made = postgres_dir();
        let initdb = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(made.path().join("data"))
            .args(["-A", "trust", "-U", "postal", "-E", "UTF8"])
            .args(["--locale=C.UTF-8", "--no-sync"])
            .stdout(Stdio::null())
            .output()
            .expect("running initdb");
        assert!(
            initdb.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        copy_dir(&made.path().join("data"), &dir.join("data"));
    });
    dir.join("data")
}

pub struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl PgCluster {
    /// `None` (the test is skipped, with one line saying why) when PostgreSQL is not
    /// installed, unless `POSTAL_REQUIRE_PG` or `POSTAL_REQUIRE_TOOLS` is set (CI): then
    /// the test fails.
    pub fn start() -> Option<PgCluster> {
        PgCluster::start_with(|_| {})
    }

    /// As [`start`](Self::start), with `setup` run on the data directory first (what
    /// PostgreSQL reads at start: certificates, `pg_hba.conf`, lines appended to
    /// `postgresql.conf`); its files are then the `postgres` user's.
    pub fn start_with(setup: impl FnOnce(&Path)) -> Option<PgCluster> {
        let Some(bin) = bindir() else {
            assert!(
                std::env::var_os("POSTAL_REQUIRE_PG").is_none()
                    && std::env::var_os("POSTAL_REQUIRE_TOOLS").is_none(),
                "POSTAL_REQUIRE_PG is set but no PostgreSQL binaries were found"
            );
            eprintln!(
                "skipped: no PostgreSQL (install Debian's postgresql, or set POSTAL_PG_BINDIR)"
            );
            return None;
        };
        let template = data_template(&bin);
        let dir = postgres_dir();
        copy_dir(&template, &dir.path().join("data"));
        setup(&dir.path().join("data"));
        if is_root() {
            let owner = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path().join("data"))
                .status()
                .expect("running chown");
            assert!(owner.success(), "chown to postgres");
        }
        let mut cluster = PgCluster {
            dir,
            bin,
            port: crate::free_port(),
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
            .expect("postgres.log");
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
            .expect("running postgres");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if self.query_i64("SELECT 1").is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("PostgreSQL did not start: {}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Runs the statements of `sql` (no answer), on a connection of its own.
    pub fn execute(&self, sql: &str) {
        self.on_connection(async |client| {
            client.batch_execute(sql).await.map_err(|e| e.to_string())
        })
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// `work` on a connection of its own to this PostgreSQL, in a runtime of its own.
    fn on_connection<T>(
        &self,
        work: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T, String>,
    ) -> Result<T, String> {
        let url = self.url();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            work(&client).await
        })
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
        self.on_connection(async |client| {
            let row = client
                .query_one(sql, &[])
                .await
                .map_err(|e| e.to_string())?;
            row.try_get::<_, i64>(0)
                .or_else(|_| row.try_get::<_, i32>(0).map(i64::from))
                .map_err(|e| e.to_string())
        })
    }

    /// One number from `sql`; panics on an error.
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
