//! The dataset's history in the file (docs/dataset.md): each import's provenance
//! (`imports`, `import_sources`, `import_countries`), the codes it added, removed or moved
//! (`code_changes`), the retired codes (`retired_codes`) and the operator's overrides
//! (`overrides`).
//!
//! `postal-import` writes them through `dataset::replace`: the append-only rows of an
//! import under its new generation before the swap, its `imports` row (which makes them
//! count) in the swap. Readers see an import's rows only once its `imports` row exists.

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

/// One import's row of `imports`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRow {
    pub generation: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub records: i64,
    pub codes: i64,
    pub countries: i64,
    pub bad_lines: i64,
    pub allow_shrink: bool,
    pub overrides: i64,
}

/// A file (or zip entry) an import read.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRow {
    /// `postal`, `country_info`, `gazetteer` or `overrides`.
    pub role: &'static str,
    /// The path or URL as given.
    pub location: String,
    pub bytes: i64,
    /// Lower-case hex.
    pub sha256: String,
    pub last_modified: Option<String>,
    pub etag: Option<String>,
    pub entry: Option<String>,
    pub entry_modified: Option<String>,
}

/// One country of one import: what it holds and how it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountryRow {
    pub country: String,
    pub records: i64,
    pub codes: i64,
    pub added: i64,
    pub removed: i64,
    pub moved: i64,
}

/// `added`, `removed` or `moved`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Moved,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Moved => "moved",
        }
    }

    fn parse(text: &str) -> Change {
        match text {
            "added" => Change::Added,
            "removed" => Change::Removed,
            _ => Change::Moved,
        }
    }
}

/// One code an import added, removed or moved.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRow {
    pub country: String,
    pub postal_code: String,
    pub change: Change,
    /// Its first place: new (added, moved) or last (removed).
    pub city: String,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    /// Moved: the first place before.
    pub previous_city: Option<String>,
    pub previous_latitude: Option<f64>,
    pub previous_longitude: Option<f64>,
}

/// A code an import removed and no later import brought back.
#[derive(Debug, Clone, PartialEq)]
pub struct RetiredRow {
    pub country: String,
    pub compact_key: String,
    pub postal_code: String,
    pub city: String,
    /// Unix seconds of the swap that removed it; 0 for the codes the import writing it
    /// removes (the swap dates them).
    pub since: i64,
}

/// One line of the operator's overrides: `add` or `remove` and the 12 columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideRow {
    pub line: i64,
    pub action: String,
    pub fields: String,
}

/// What an import writes beside the postal data (`dataset::replace`).
#[derive(Debug, Default)]
pub struct History {
    pub started_at: i64,
    pub records: i64,
    pub codes: i64,
    pub countries: i64,
    pub bad_lines: i64,
    pub allow_shrink: bool,
    pub sources: Vec<SourceRow>,
    pub country_rows: Vec<CountryRow>,
    pub changes: Vec<ChangeRow>,
    /// The retired codes after this import (all of them: the table is rebuilt).
    pub retired: Vec<RetiredRow>,
    /// The overrides to store from now on; `None` keeps the stored ones.
    pub new_overrides: Option<Vec<OverrideRow>>,
    /// Override lines applied by this import.
    pub overrides_applied: i64,
}

/// Removes the rows of imports that never swapped (generations above `current`).
pub(crate) fn discard_unfinished(tx: &Transaction, current: i64) -> Result<()> {
    for table in ["import_sources", "import_countries", "code_changes"] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE generation > ?1"),
            [current],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_source(
    tx: &Transaction,
    generation: i64,
    position: usize,
    s: &SourceRow,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO import_sources (generation, position, role, location, bytes, sha256,
             last_modified, etag, entry, entry_modified)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        generation,
        position as i64,
        s.role,
        s.location,
        s.bytes,
        s.sha256,
        s.last_modified,
        s.etag,
        s.entry,
        s.entry_modified
    ])?;
    Ok(())
}

pub(crate) fn insert_country(tx: &Transaction, generation: i64, c: &CountryRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO import_countries (generation, country, records, codes, added, removed, moved)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        generation, c.country, c.records, c.codes, c.added, c.removed, c.moved
    ])?;
    Ok(())
}

pub(crate) fn insert_change(tx: &Transaction, generation: i64, c: &ChangeRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO code_changes (generation, country, postal_code, change, city, latitude,
             longitude, previous_city, previous_latitude, previous_longitude)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        generation,
        c.country,
        c.postal_code,
        c.change.as_str(),
        c.city,
        c.latitude,
        c.longitude,
        c.previous_city,
        c.previous_latitude,
        c.previous_longitude
    ])?;
    Ok(())
}

/// Into the staging copy of `retired_codes` (`dataset::replace`).
pub(crate) fn insert_retired(tx: &Transaction, table: &str, r: &RetiredRow) -> Result<()> {
    tx.prepare_cached(&format!(
        "INSERT INTO \"{table}\" (country, compact_key, postal_code, city, since)
         VALUES (?1, ?2, ?3, ?4, ?5)"
    ))?
    .execute(params![
        r.country,
        r.compact_key,
        r.postal_code,
        r.city,
        r.since
    ])?;
    Ok(())
}

/// In the swap: the import's row, and the overrides it stores.
pub(crate) fn record_import(
    tx: &Transaction,
    generation: i64,
    finished_at: i64,
    h: &History,
) -> Result<()> {
    tx.execute(
        "INSERT INTO imports (generation, started_at, finished_at, records, codes, countries,
             bad_lines, allow_shrink, overrides)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            generation,
            h.started_at,
            finished_at,
            h.records,
            h.codes,
            h.countries,
            h.bad_lines,
            h.allow_shrink,
            h.overrides_applied
        ],
    )?;
    if let Some(overrides) = &h.new_overrides {
        tx.execute("DELETE FROM overrides", [])?;
        let mut insert =
            tx.prepare("INSERT INTO overrides (line, action, fields) VALUES (?1, ?2, ?3)")?;
        for o in overrides {
            insert.execute(params![o.line, o.action, o.fields])?;
        }
    }
    Ok(())
}

/// The overrides every import applies, in line order.
pub fn overrides(conn: &Connection) -> Result<Vec<OverrideRow>> {
    let mut stmt = conn.prepare("SELECT line, action, fields FROM overrides ORDER BY line")?;
    let rows = stmt
        .query_map([], |r| {
            Ok(OverrideRow {
                line: r.get(0)?,
                action: r.get(1)?,
                fields: r.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// The retired codes, in (country, key) order.
pub fn retired(conn: &Connection) -> Result<Vec<RetiredRow>> {
    let mut stmt = conn.prepare(
        "SELECT country, compact_key, postal_code, city, since FROM retired_codes
         ORDER BY country, compact_key",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(RetiredRow {
                country: r.get(0)?,
                compact_key: r.get(1)?,
                postal_code: r.get(2)?,
                city: r.get(3)?,
                since: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// One record of the live data, as the diff of an import reads it.
#[derive(Debug, Clone, Copy)]
pub struct LiveRow<'a> {
    pub country: &'a str,
    pub compact_key: &'a str,
    pub postal_code: &'a str,
    pub place_name: &'a str,
    pub place_folded: &'a str,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
}

/// Calls `each` with every record of the live data in source order (row id: a code's
/// first record comes first). A scan in row order: grouping by code would sort 1.6 M rows.
pub fn for_each_live_record(
    conn: &Connection,
    mut each: impl FnMut(&LiveRow<'_>) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn.prepare(
        "SELECT country, compact_key, postal_code, place_name, place_folded, latitude, longitude
         FROM postal_codes ORDER BY id",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        each(&LiveRow {
            country: r.get_ref(0)?.as_str()?,
            compact_key: r.get_ref(1)?.as_str()?,
            postal_code: r.get_ref(2)?.as_str()?,
            place_name: r.get_ref(3)?.as_str()?,
            place_folded: r.get_ref(4)?.as_str()?,
            latitude: r.get(5)?,
            longitude: r.get(6)?,
        })?;
    }
    Ok(())
}

/// One import as `postal dataset show` and `/api/dataset` tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    pub import: ImportRow,
    pub sources: Vec<SourceRow>,
    pub countries: Vec<CountryRow>,
}

/// The provenance of the import of `generation` (the live dataset's when it is the
/// current generation); `None` when that import left none (made before schema 5).
pub fn provenance(conn: &Connection, generation: i64) -> Result<Option<Provenance>> {
    let import = conn
        .query_row(
            "SELECT generation, started_at, finished_at, records, codes, countries, bad_lines,
                    allow_shrink, overrides
             FROM imports WHERE generation = ?1",
            [generation],
            |r| {
                Ok(ImportRow {
                    generation: r.get(0)?,
                    started_at: r.get(1)?,
                    finished_at: r.get(2)?,
                    records: r.get(3)?,
                    codes: r.get(4)?,
                    countries: r.get(5)?,
                    bad_lines: r.get(6)?,
                    allow_shrink: r.get(7)?,
                    overrides: r.get(8)?,
                })
            },
        )
        .optional()?;
    let Some(import) = import else {
        return Ok(None);
    };
    let sources = conn
        .prepare(
            "SELECT role, location, bytes, sha256, last_modified, etag, entry, entry_modified
             FROM import_sources WHERE generation = ?1 ORDER BY position",
        )?
        .query_map([generation], |r| {
            Ok(SourceRow {
                role: role(&r.get::<_, String>(0)?),
                location: r.get(1)?,
                bytes: r.get(2)?,
                sha256: r.get(3)?,
                last_modified: r.get(4)?,
                etag: r.get(5)?,
                entry: r.get(6)?,
                entry_modified: r.get(7)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let countries = conn
        .prepare(
            "SELECT country, records, codes, added, removed, moved
             FROM import_countries WHERE generation = ?1 ORDER BY country",
        )?
        .query_map([generation], |r| {
            Ok(CountryRow {
                country: r.get(0)?,
                records: r.get(1)?,
                codes: r.get(2)?,
                added: r.get(3)?,
                removed: r.get(4)?,
                moved: r.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(Provenance {
        import,
        sources,
        countries,
    }))
}

fn role(text: &str) -> &'static str {
    match text {
        "postal" => "postal",
        "country_info" => "country_info",
        "gazetteer" => "gazetteer",
        _ => "overrides",
    }
}

/// What an import saw of a postal source it read (`live_postal_sources`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRead {
    pub last_modified: Option<String>,
    pub etag: Option<String>,
    pub sha256: String,
}

/// The postal sources the live data was imported from (the latest import that swapped
/// in), each with the validators upstream sent then and the SHA-256 of what was read, in
/// the order read (`--if-changed`). Empty when no import recorded its sources.
pub fn live_postal_sources(conn: &Connection) -> Result<Vec<(String, LastRead)>> {
    let mut statement = conn.prepare(
        "SELECT s.location, s.last_modified, s.etag, s.sha256 FROM import_sources s
         WHERE s.role = 'postal' AND s.generation = (SELECT MAX(generation) FROM imports)
         ORDER BY s.position",
    )?;
    let rows = statement.query_map([], |r| {
        Ok((
            r.get(0)?,
            LastRead {
                last_modified: r.get(1)?,
                etag: r.get(2)?,
                sha256: r.get(3)?,
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A change with the time of the import that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct DatedChange {
    pub generation: i64,
    /// Unix seconds of the import's swap.
    pub at: i64,
    pub change: ChangeRow,
}

/// Changes of the imports swapped in at or after `since` (unix seconds), of `country` when
/// given, newest import first, then by country and code; at most `limit`.
pub fn changes(
    conn: &Connection,
    since: i64,
    country: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<DatedChange>> {
    let mut stmt = conn.prepare(
        "SELECT c.generation, i.finished_at, c.country, c.postal_code, c.change, c.city,
                c.latitude, c.longitude, c.previous_city, c.previous_latitude,
                c.previous_longitude
         FROM code_changes c JOIN imports i ON i.generation = c.generation
         WHERE i.finished_at >= ?1 AND (?2 IS NULL OR c.country = ?2)
         ORDER BY c.generation DESC, c.country, c.postal_code, c.rowid
         LIMIT ?3",
    )?;
    let limit = limit.map_or(-1, |l| l as i64);
    let rows = stmt
        .query_map(params![since, country, limit], |r| {
            Ok(DatedChange {
                generation: r.get(0)?,
                at: r.get(1)?,
                change: ChangeRow {
                    country: r.get(2)?,
                    postal_code: r.get(3)?,
                    change: Change::parse(&r.get::<_, String>(4)?),
                    city: r.get(5)?,
                    latitude: r.get(6)?,
                    longitude: r.get(7)?,
                    previous_city: r.get(8)?,
                    previous_latitude: r.get(9)?,
                    previous_longitude: r.get(10)?,
                },
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// The imports swapped in at or after `since`, newest first, with their per-country
/// counts (of `country` only, when given).
pub fn imports_since(
    conn: &Connection,
    since: i64,
    country: Option<&str>,
) -> Result<Vec<(ImportRow, Vec<CountryRow>)>> {
    let generations: Vec<i64> = conn
        .prepare("SELECT generation FROM imports WHERE finished_at >= ?1 ORDER BY generation DESC")?
        .query_map([since], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::new();
    for generation in generations {
        if let Some(mut p) = provenance(conn, generation)? {
            if let Some(country) = country {
                p.countries.retain(|c| c.country == country);
            }
            out.push((p.import, p.countries));
        }
    }
    Ok(out)
}

/// Distinct postal codes of the live data (a full scan: for a dataset without provenance).
pub fn distinct_codes(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT count(*) FROM (SELECT DISTINCT country, compact_key FROM postal_codes)",
        [],
        |r| r.get(0),
    )?)
}
