//! Running `postal-import` and reading back what it wrote.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rusqlite::Connection;

/// The binary under test, built by cargo for this test run.
pub const POSTAL_IMPORT: &str = env!("CARGO_BIN_EXE_postal-import");

/// Rows of `sample.zip` per country, counted with
/// `awk -F'\t' '{c[$1]++} END {for (k in c) print k, c[k]}'` on its `sample.txt`.
pub const SAMPLE_COUNTS: [(&str, i64); 9] = [
    ("AD", 7),
    ("CA", 1657),
    ("DE", 23297),
    ("GB", 27450),
    ("JP", 146883),
    ("LV", 6101),
    ("MD", 1753),
    ("MT", 73),
    ("US", 41490),
];
pub const SAMPLE_ROWS: i64 = 248_711;

/// A file of the offline GeoNames copy beside the repository (`../shared/geonames/`).
pub fn geonames(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/geonames")
        .join(name)
}

/// A hand-made file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    #[track_caller]
    pub fn assert_success(&self) -> &Run {
        assert_eq!(
            self.exit_code,
            Some(0),
            "postal-import failed\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self
    }
}

fn command<I, S>(db: &Path, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(POSTAL_IMPORT);
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("POSTAL_DB")
        .env_remove("POSTAL_IMPORT_TIMINGS")
        .stdin(Stdio::null());
    command
}

/// Runs `postal-import --db DB ARGS...` to the end.
pub fn import<I, S>(db: &Path, args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = command(db, args).output().expect("running postal-import");
    Run {
        exit_code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Imports `source` with the shared `countryInfo.txt`: for files that have none beside
/// them (the default would be the upstream URL, and tests run offline).
pub fn import_with_country_info(db: &Path, source: &Path) -> Run {
    import(
        db,
        [
            OsStr::new("--country-info"),
            geonames("countryInfo.txt").as_os_str(),
            source.as_os_str(),
        ],
    )
}

/// Starts `postal-import --db DB ARGS...` without waiting for it.
pub fn spawn_import<I, S>(db: &Path, args: I) -> Child
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    command(db, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting postal-import")
}

/// `sample.zip` imported once per test process, for the tests that only read it.
pub struct SampleImport {
    pub db: PathBuf,
    pub run: Run,
}

pub fn sample() -> &'static SampleImport {
    static SAMPLE: OnceLock<SampleImport> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        // Under cargo's per-target scratch directory: a static is never dropped, so a
        // TempDir here would leave a database in /tmp after every run.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import-sample");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating the sample directory");
        let db = dir.join("sample.db");
        let run = import(&db, [geonames("sample.zip")]);
        run.assert_success();
        SampleImport { db, run }
    })
}

/// A read-write connection, as a server would hold (the tests only read through it).
pub fn open(db: &Path) -> Connection {
    let conn = Connection::open(db).expect("opening the database");
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn
}

/// `SELECT count(*) ...` and other single-number queries.
pub fn number(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Stored rows per country, ascending by country code.
pub fn counts_by_country(conn: &Connection) -> Vec<(String, i64)> {
    conn.prepare("SELECT country, count(*) FROM postal_codes GROUP BY country ORDER BY country")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// `countries.record_count` of every country that has records, ascending by code.
pub fn record_counts(conn: &Connection) -> Vec<(String, i64)> {
    conn.prepare("SELECT code, record_count FROM countries WHERE record_count > 0 ORDER BY code")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

pub fn owned(counts: &[(&str, i64)]) -> Vec<(String, i64)> {
    counts.iter().map(|(c, n)| (c.to_string(), *n)).collect()
}

/// One stored row of `postal_codes`, every column but the ids and the folded name.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub country: String,
    pub postal_code: String,
    pub compact_key: String,
    pub place_name: String,
    pub admin_name1: Option<String>,
    pub admin_code1: Option<String>,
    pub admin_name2: Option<String>,
    pub admin_code2: Option<String>,
    pub admin_name3: Option<String>,
    pub admin_code3: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub accuracy: Option<i64>,
    pub timezone: Option<String>,
}

/// The rows stored for `postal_code` (as the data writes it) in `country`, in source order.
pub fn records(conn: &Connection, country: &str, postal_code: &str) -> Vec<Record> {
    conn.prepare(
        "SELECT country, postal_code, compact_key, place_name,
                admin_name1, admin_code1, admin_name2, admin_code2, admin_name3, admin_code3,
                latitude, longitude, accuracy, timezone
         FROM postal_codes WHERE country = ?1 AND postal_code = ?2 ORDER BY id",
    )
    .unwrap()
    .query_map([country, postal_code], |r| {
        Ok(Record {
            country: r.get(0)?,
            postal_code: r.get(1)?,
            compact_key: r.get(2)?,
            place_name: r.get(3)?,
            admin_name1: r.get(4)?,
            admin_code1: r.get(5)?,
            admin_name2: r.get(6)?,
            admin_code2: r.get(7)?,
            admin_name3: r.get(8)?,
            admin_code3: r.get(9)?,
            latitude: r.get(10)?,
            longitude: r.get(11)?,
            accuracy: r.get(12)?,
            timezone: r.get(13)?,
        })
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// The one row stored for `postal_code` in `country` with this place name.
#[track_caller]
pub fn record(conn: &Connection, country: &str, postal_code: &str, place_name: &str) -> Record {
    let mut found: Vec<Record> = records(conn, country, postal_code)
        .into_iter()
        .filter(|r| r.place_name == place_name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{country} {postal_code} {place_name}: {found:?}"
    );
    found.remove(0)
}

/// `Some(text)`, to write expected columns briefly.
pub fn text(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// A well-formed US line, unique per `i`.
pub fn us_line(i: usize) -> String {
    format!(
        "US\t{:05}\tPlace {i}\tCalifornia\tCA\tLos Angeles\t037\t\t\t34.0901\t-118.4065\t",
        i % 100_000
    )
}

/// Asserts the summary line of cli.md, exactly: `imported <rows> records, <countries>
/// countries in <seconds> s`, one line, nothing else on stdout.
#[track_caller]
pub fn assert_summary(run: &Run, rows: i64, countries: i64) {
    let pattern = regex::Regex::new(&format!(
        r"\Aimported {rows} records, {countries} countries in \d+(\.\d+)? s\n\z"
    ))
    .unwrap();
    assert!(
        pattern.is_match(&run.stdout),
        "stdout {:?} is not the summary line for {rows} records, {countries} countries",
        run.stdout
    );
}
