//! The GeoNames formats and where they come from; `postal-import` and `postal serve` run it.
//!
//! [`run`] reads every source into memory (parsing, folding place names, the timezone of
//! each record's coordinates), checks the share of bad lines, applies the operator's
//! overrides, compares the result with the live data (what it adds, removes and moves;
//! refused when a country would lose more than a tenth of its codes), then hands the
//! whole dataset and its history to `db::dataset::replace`, which writes it beside the
//! live data in short slices and swaps it in with one brief transaction; then it empties
//! the WAL. docs/dataset.md tells the history and the guards.

pub(crate) mod country_info;
pub(crate) mod gazetteer;
pub(crate) mod geonames;
pub(crate) mod history;
pub(crate) mod overrides;
pub(crate) mod source;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::db;

/// Upstream locations (`../shared/geonames/README.md`).
pub const UPSTREAM_POSTAL_CODES: &str = "https://download.geonames.org/export/zip/allCountries.zip";
pub const UPSTREAM_COUNTRY_INFO: &str = "https://download.geonames.org/export/dump/countryInfo.txt";
pub const UPSTREAM_GAZETTEER: &str = "https://download.geonames.org/export/dump/cities500.zip";

/// More than this share of bad lines fails the import (cli.md).
pub const MAX_BAD_SHARE: f64 = 0.01;
/// At most this many bad lines are reported one by one.
pub const MAX_REPORTED: usize = 20;

pub struct Options {
    pub db: PathBuf,
    /// Files, zips, directories or URLs; empty means upstream `allCountries.zip`.
    pub sources: Vec<String>,
    /// `countryInfo.txt` path or URL; `None`: beside the first source, else upstream.
    pub country_info: Option<String>,
    /// The gazetteer (`cities500.zip` or its `.txt`), path or URL; `None`: `cities500.zip`
    /// beside the first source when there is one, upstream's when the postal data is
    /// downloaded from upstream, else none.
    pub gazetteer: Option<String>,
    /// Draw progress bars on stderr (they are hidden anyway when it is not a terminal).
    pub progress: bool,
    /// Import even when a country would lose more than a tenth of its codes, or vanish.
    pub allow_shrink: bool,
    /// An overrides file (path or URL) to store and apply from this import on; `None`:
    /// apply the stored ones.
    pub overrides: Option<String>,
    /// Do nothing when the postal sources have not changed since the last import that read
    /// them (a conditional request for a URL, the SHA-256 for a file).
    pub if_changed: bool,
}

impl Options {
    /// Import `sources` into `db`, with everything else as the command line defaults it.
    pub fn new(db: PathBuf, sources: Vec<String>) -> Options {
        Options {
            db,
            sources,
            country_info: None,
            gazetteer: None,
            progress: false,
            allow_shrink: false,
            overrides: None,
            if_changed: false,
        }
    }
}

#[derive(Debug)]
pub struct Summary {
    pub records: usize,
    pub countries: usize,
    pub bad_lines: usize,
    pub seconds: f64,
    /// `--if-changed` found nothing new: nothing was imported.
    pub unchanged: bool,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.unchanged {
            return write!(
                f,
                "unchanged: the postal sources are those of the last import; nothing imported"
            );
        }
        write!(
            f,
            "imported {} records, {} countries in {:.1} s",
            self.records, self.countries, self.seconds
        )
    }
}

/// How long the import tries to empty the WAL once the old data is gone, and how long each
/// try may hold the write lock while it waits for readers (`db::truncate_wal`).
const TRUNCATE_FOR: Duration = Duration::from_secs(10);
const TRUNCATE_WAIT: Duration = Duration::from_millis(20);

/// Imports `options.sources` into `options.db`, replacing the postal data with one brief
/// swap. Bad lines are reported on stderr; over [`MAX_BAD_SHARE`] of them the import fails
/// and the database keeps its old data, as it does when a country would shrink
/// (`history::SHRINK_KEPT`) without `allow_shrink`.
pub fn run(options: &Options) -> Result<Summary> {
    let started = Instant::now();
    let started_at = unix_now();
    let mut clock = PhaseClock::from_env();
    let mut conn = db::open(&options.db)?;
    let _lock = lock(&options.db)?;
    // A large page cache keeps the index rebuild of 1.6 M rows in memory.
    conn.pragma_update(None, "cache_size", -1_000_000)?;
    clock.lap("database opened");
    let staging = tempfile::tempdir().context("creating a directory for downloads")?;
    let changed = if options.if_changed {
        Some(&conn)
    } else {
        None
    };
    let Some(inputs) = postal_inputs(options, staging.path(), changed)? else {
        return Ok(Summary {
            records: 0,
            countries: 0,
            bad_lines: 0,
            seconds: started.elapsed().as_secs_f64(),
            unchanged: true,
        });
    };
    let (countries, mut sources, mut parsed) = parse_sources(options, staging.path(), &inputs)?;
    clock.lap("sources read and parsed (timezones, folding)");
    report_bad_lines(&parsed);
    let lines = parsed.records.len() + parsed.bad_count;
    if too_many_bad(&parsed) {
        bail!(
            "{} of {} lines are bad (more than {}%): import abandoned, the database keeps its old data",
            parsed.bad_count,
            lines,
            MAX_BAD_SHARE * 100.0
        );
    }
    if parsed.records.is_empty() {
        bail!(
            "the sources hold no postal-code records: import abandoned, the database keeps its old data"
        );
    }

    let known: HashSet<String> = countries.iter().map(|c| c.code.clone()).collect();
    let (stored, new_overrides) =
        read_overrides(options, staging.path(), &conn, &known, &mut sources)?;
    let applied = overrides::apply(&mut parsed.records, &stored);
    for (o, (line, matched)) in stored.iter().zip(&applied.matched) {
        if o.remove && *matched == 0 {
            eprintln!("overrides line {line}: remove matched no record");
        }
    }
    if parsed.records.is_empty() {
        bail!(
            "the overrides removed every record: import abandoned, the database keeps its old data"
        );
    }
    clock.lap("overrides applied");

    let diff = history::diff(&conn, &parsed.records)?;
    clock.lap("compared with the live data");
    let shrinks = diff.shrinks();
    if !shrinks.is_empty() && !options.allow_shrink {
        let list: Vec<String> = shrinks.iter().map(ToString::to_string).collect();
        bail!(
            "import refused: {}; the database keeps its old data (--allow-shrink imports anyway)",
            list.join(", ")
        );
    }

    let record_countries = countries_of(&parsed);
    let gazetteer = read_gazetteer(options, staging.path(), &record_countries, &mut sources);
    clock.lap("gazetteer read");

    let history = db::history::History {
        started_at,
        records: parsed.records.len() as i64,
        codes: diff.codes,
        countries: record_countries.len() as i64,
        bad_lines: parsed.bad_count as i64,
        allow_shrink: options.allow_shrink,
        sources,
        country_rows: diff.countries,
        changes: diff.changes,
        retired: diff.retired,
        new_overrides,
        overrides_applied: stored.len() as i64,
    };
    let bar = bar(
        options.progress,
        parsed.records.len() as u64,
        "writing {pos}/{len} rows",
    );
    let replaced = db::dataset::replace(
        &mut conn,
        &countries,
        &parsed.records,
        &gazetteer,
        &history,
        |n| bar.set_position(n),
        |phase| clock.lap(phase),
    )?;
    bar.finish_and_clear();
    clock.report("longest write-lock hold", replaced.longest_hold);
    clock.report("write lock held by the swap", replaced.swap_hold);
    clock.note(&format!(
        "{} write transactions, generation {}",
        replaced.transactions, replaced.generation
    ));
    let deadline = Instant::now() + TRUNCATE_FOR;
    while !db::truncate_wal(&conn, TRUNCATE_WAIT)? && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    clock.lap("WAL truncated (or given up)");
    drop(conn);
    clock.lap("database closed");
    clock.report("total", started.elapsed());
    Ok(Summary {
        records: parsed.records.len(),
        countries: record_countries.len(),
        bad_lines: parsed.bad_count,
        seconds: started.elapsed().as_secs_f64(),
        unchanged: false,
    })
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The postal sources as given, or upstream's.
fn postal_sources(options: &Options) -> Vec<String> {
    if options.sources.is_empty() {
        vec![UPSTREAM_POSTAL_CODES.to_string()]
    } else {
        options.sources.clone()
    }
}

/// The postal-code files of the sources, on local disk. With `if_changed` (the database
/// of `--if-changed`), `None` when the postal sources are those the live data was
/// imported from, the same places and each unchanged: upstream answers 304 Not Modified
/// to a request with the validators it sent then, or the file (downloaded or local) has
/// the same SHA-256. Another import swapped in since (another file, fewer or more
/// sources) is a change.
fn postal_inputs(
    options: &Options,
    staging: &std::path::Path,
    if_changed: Option<&rusqlite::Connection>,
) -> Result<Option<Vec<source::Input>>> {
    let sources = postal_sources(options);
    let mut fetched: HashMap<String, source::Fetched> = HashMap::new();
    if let Some(conn) = if_changed {
        let live: HashMap<String, db::history::LastRead> = db::history::live_postal_sources(conn)?
            .into_iter()
            .collect();
        let locations: Vec<String> = sources.iter().map(|s| source::location(s)).collect();
        let mut changed = options.overrides.is_some()
            || live.len() != locations.len()
            || locations.iter().any(|l| !live.contains_key(l));
        for (s, location) in sources.iter().zip(&locations) {
            let Some(last) = live.get(location).cloned() else {
                changed = true;
                continue;
            };
            let validators = source::Validators {
                last_modified: last.last_modified,
                etag: last.etag,
            };
            let conditional = source::is_url(s).then_some(&validators);
            match source::fetch(s, staging, options.progress, conditional)? {
                None => {} // 304 Not Modified
                Some(file) => {
                    let same = file.path.is_file() && source::digest(&file.path)?.1 == last.sha256;
                    changed |= !same;
                    fetched.insert(s.clone(), file);
                }
            }
        }
        if !changed {
            return Ok(None);
        }
    }
    let mut inputs = Vec::new();
    for s in &sources {
        let file = match fetched.remove(s) {
            Some(file) => file,
            None => source::fetch(s, staging, options.progress, None)?
                .context("an unconditional download")?,
        };
        inputs.extend(source::resolve(s, file)?);
    }
    if inputs.is_empty() {
        bail!(
            "no postal-code files (.txt or .zip) found in {}",
            sources.join(", ")
        );
    }
    Ok(Some(inputs))
}

/// A provenance row for each file (or zip entry) read.
fn source_rows(
    role: &'static str,
    origin: &source::Origin,
    path: &std::path::Path,
    entries: &[source::EntryRead],
) -> Result<Vec<db::history::SourceRow>> {
    let (bytes, sha256) = source::digest(path)?;
    let row = |entry: Option<&source::EntryRead>| db::history::SourceRow {
        role,
        location: origin.location.clone(),
        bytes,
        sha256: sha256.clone(),
        last_modified: origin.last_modified.clone(),
        etag: origin.etag.clone(),
        entry: entry.map(|e| e.0.clone()),
        entry_modified: entry.and_then(|e| e.1.clone()),
    };
    Ok(if entries.is_empty() {
        vec![row(None)]
    } else {
        entries.iter().map(|e| row(Some(e))).collect()
    })
}

/// The overrides this import applies: `--overrides FILE`'s (then also stored, in the swap),
/// else the stored ones.
fn read_overrides(
    options: &Options,
    staging: &std::path::Path,
    conn: &rusqlite::Connection,
    known: &HashSet<String>,
    sources: &mut Vec<db::history::SourceRow>,
) -> Result<(
    Vec<overrides::Override>,
    Option<Vec<db::history::OverrideRow>>,
)> {
    let Some(from) = &options.overrides else {
        let stored = db::history::overrides(conn)?
            .iter()
            .map(|row| {
                overrides::parse(row, known).with_context(|| {
                    format!(
                        "the stored overrides, line {} (replace them with --overrides FILE)",
                        row.line
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        return Ok((stored, None));
    };
    let file = source::fetch(from, staging, options.progress, None)?
        .context("an unconditional download")?;
    let opened =
        std::fs::File::open(&file.path).with_context(|| format!("opening the overrides {from}"))?;
    // Read whole: bounded as the other files read whole are (and its lines as every file's).
    let mut reader = source::Bounded::at_most(opened, from, source::MAX_WHOLE_FILE_BYTES);
    let read = overrides::read(from, &mut reader, known)?;
    sources.extend(source_rows("overrides", &file.origin, &file.path, &[])?);
    let rows = read.iter().map(overrides::Override::row).collect();
    Ok((read, Some(rows)))
}

/// Holds `<db>.import-lock` for the import's life: two imports at once would remove each
/// other's staging tables. The lock is the OS's (released when the process ends, however
/// it ends), so a file left behind means nothing.
fn lock(db: &Path) -> Result<File> {
    let mut path = db.as_os_str().to_owned();
    path.push(".import-lock");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(&path)
        .with_context(|| format!("creating {}", Path::new(&path).display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            bail!("another postal-import is running on {}", db.display())
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", Path::new(&path).display()))
        }
    }
}

/// What `postal-import --check` found: the sources parsed as an import would, nothing
/// written.
#[derive(Debug)]
pub struct CheckReport {
    pub records: usize,
    pub countries: usize,
    pub bad_lines: usize,
    pub seconds: f64,
    /// Whether an import of these sources would be refused (too many bad lines, or none good).
    pub would_fail: bool,
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checked {} records, {} countries, {} bad lines in {:.1} s: {}",
            self.records,
            self.countries,
            self.bad_lines,
            self.seconds,
            if self.would_fail {
                "an import would fail"
            } else {
                "an import would succeed"
            }
        )
    }
}

/// Parses `options.sources` as [`run`] would and reports counts and bad lines (on
/// stderr, as an import does), without opening the database.
pub fn check(options: &Options) -> Result<CheckReport> {
    let started = Instant::now();
    let staging = tempfile::tempdir().context("creating a directory for downloads")?;
    let inputs = postal_inputs(options, staging.path(), None)?.context("no sources")?;
    let (_, _, parsed) = parse_sources(options, staging.path(), &inputs)?;
    report_bad_lines(&parsed);
    Ok(CheckReport {
        records: parsed.records.len(),
        countries: parsed.countries,
        bad_lines: parsed.bad_count,
        seconds: started.elapsed().as_secs_f64(),
        would_fail: too_many_bad(&parsed) || parsed.records.is_empty(),
    })
}

/// Reads countryInfo.txt and every postal-code file of `inputs` into memory, with a
/// provenance row for each file read.
fn parse_sources(
    options: &Options,
    staging: &std::path::Path,
    inputs: &[source::Input],
) -> Result<(
    Vec<db::dataset::CountryRow>,
    Vec<db::history::SourceRow>,
    geonames::Parsed,
)> {
    let mut sources = Vec::new();
    let country_info_source = match &options.country_info {
        Some(s) => s.clone(),
        None => source::country_info_beside(&postal_sources(options)[0])
            .unwrap_or_else(|| UPSTREAM_COUNTRY_INFO.to_string()),
    };
    let (mut text, file) = source::open_text(&country_info_source, staging, options.progress)?;
    let countries =
        country_info::read(&mut text).with_context(|| format!("reading {country_info_source}"))?;
    let mut reader = geonames::Reader::new(&countries);
    for input in inputs {
        let entries = input.read_each(options.progress, |name, r| reader.read(name, r))?;
        sources.extend(source_rows("postal", &input.origin, &input.path, &entries)?);
    }
    sources.extend(source_rows("country_info", &file.origin, &file.path, &[])?);
    Ok((countries, sources, reader.finish()))
}

/// The countries the records hold.
fn countries_of(parsed: &geonames::Parsed) -> HashSet<String> {
    let mut seen = HashSet::new();
    for r in &parsed.records {
        if !seen.contains(&r.country) {
            seen.insert(r.country.clone());
        }
    }
    seen
}

/// Where the gazetteer comes from (`Options::gazetteer`), if anywhere.
fn gazetteer_source(options: &Options) -> Option<String> {
    if let Some(explicit) = &options.gazetteer {
        return Some(explicit.clone());
    }
    match options.sources.first() {
        None => Some(UPSTREAM_GAZETTEER.to_string()),
        Some(first) => source::gazetteer_beside(first),
    }
}

/// The gazetteer's places of `countries`, or none: a gazetteer that is missing, cannot be
/// read or is not in the gazetteer format is said on stderr and not used (city search
/// then answers from the postal data alone); it never fails the import.
fn read_gazetteer(
    options: &Options,
    staging: &std::path::Path,
    countries: &HashSet<String>,
    sources: &mut Vec<db::history::SourceRow>,
) -> Vec<db::gazetteer::GazetteerRow> {
    let Some(from) = gazetteer_source(options) else {
        eprintln!(
            "no gazetteer (no {} beside the postal data, no --gazetteer): city search answers \
             from the postal data alone",
            source::GAZETTEER_FILE
        );
        return Vec::new();
    };
    let read = source::read_gazetteer(&from, staging, options.progress, countries);
    let (gazetteer, file) = match read {
        Ok(g) => g,
        Err(e) => {
            eprintln!(
                "gazetteer {from} not used: {e:#}; city search answers from the postal data alone"
            );
            return Vec::new();
        }
    };
    for bad in gazetteer.bad.iter().take(MAX_REPORTED) {
        eprintln!("{bad}");
    }
    if let Some(why) = gazetteer.unusable() {
        eprintln!(
            "gazetteer {from} not used: {why}; city search answers from the postal data alone"
        );
        return Vec::new();
    }
    if gazetteer.bad_count > 0 {
        eprintln!(
            "gazetteer {from}: {} bad lines skipped",
            gazetteer.bad_count
        );
    }
    match source_rows("gazetteer", &file.origin, &file.path, &[]) {
        Ok(rows) => sources.extend(rows),
        Err(e) => eprintln!("gazetteer {from}: not in the provenance: {e:#}"),
    }
    gazetteer.places
}

/// The first [`MAX_REPORTED`] bad lines on stderr, and how many more there were.
fn report_bad_lines(parsed: &geonames::Parsed) {
    for bad in parsed.bad.iter().take(MAX_REPORTED) {
        eprintln!("{bad}");
    }
    if parsed.bad_count > MAX_REPORTED {
        eprintln!("... and {} more bad lines", parsed.bad_count - MAX_REPORTED);
    }
}

/// More than [`MAX_BAD_SHARE`] of the lines are bad.
fn too_many_bad(parsed: &geonames::Parsed) -> bool {
    let lines = parsed.records.len() + parsed.bad_count;
    parsed.bad_count as f64 > lines as f64 * MAX_BAD_SHARE
}

/// `POSTAL_IMPORT_TIMINGS=1`: the seconds each phase of an import took, on stderr, to see
/// where the time goes without a profiler.
struct PhaseClock {
    enabled: bool,
    last: Instant,
}

impl PhaseClock {
    fn from_env() -> PhaseClock {
        PhaseClock {
            enabled: std::env::var_os("POSTAL_IMPORT_TIMINGS").is_some_and(|v| v != "0"),
            last: Instant::now(),
        }
    }

    /// Reports the time since the previous lap under `phase`.
    fn lap(&mut self, phase: &str) {
        let now = Instant::now();
        self.report(phase, now - self.last);
        self.last = now;
    }

    fn report(&self, phase: &str, elapsed: std::time::Duration) {
        if self.enabled {
            eprintln!("timing: {:7.3} s  {phase}", elapsed.as_secs_f64());
        }
    }

    fn note(&self, text: &str) {
        if self.enabled {
            eprintln!("timing:            {text}");
        }
    }
}

/// A progress bar on stderr, drawn only when asked for and stderr is a terminal.
pub(crate) fn bar(enabled: bool, len: u64, template: &str) -> ProgressBar {
    let target = if enabled {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let style = ProgressStyle::with_template(&format!(
        "{{spinner}} {template} [{{bar:30}}] {{per_sec}} ETA {{eta}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(len), target).with_style(style)
}
