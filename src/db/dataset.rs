//! Replacing the postal dataset (written by `postal-import`) without ever holding the write
//! lock for long: staging tables filled in short slices, then one brief swap.
//!
//! SQLite has one write lock per file, and every charge of the server takes it. An import
//! that wrote 1.6 M rows in one transaction held it for about 10 s, and every billed
//! request waited (issue 11). So [`replace`]:
//!
//! 1. creates empty staging tables `postal_codes_next` and `gazetteer_next` (and their
//!    indexes) from the DDL of the live tables as `schema.sql` created them, so
//!    `schema.sql` stays the one place DDL is written;
//! 2. fills them in slices: each slice is one IMMEDIATE transaction of at most
//!    [`SLICE`] of work, followed by a pause of [`PAUSE`] without the lock. A writer that
//!    wants the lock meanwhile (the billing thread, the admin CLI) retries with SQLite's
//!    busy handler, whose retries are at most 25 ms apart during its first 100 ms of
//!    waiting: the pause is longer than that gap, so it gets the lock at the end of the
//!    slice it found running, after at most `SLICE` + 25 ms;
//! 3. swaps them in with one short transaction: `ALTER TABLE ... RENAME` of the two
//!    tables each way (a rewrite of `sqlite_master`, no data moves), the `countries` rows,
//!    and `dataset.generation` + 1. Readers are in WAL snapshots: each read transaction
//!    sees the old tables or the new ones, never a mix, and a server reloads its in-memory
//!    copy when `generation` changes (nothing else changes it);
//! 4. empties the old tables in slices and drops them once empty (dropping a full table
//!    reads every page of it in one statement: 3 s for `postal_codes`).
//!
//! An import that stops half-way leaves staging (or old) tables behind; the next one
//! removes them first. The money tables are never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::db::gazetteer::GazetteerRow;
use crate::db::history::{self, History};
use crate::domain::postal_code::shape;

/// The most work one slice does while holding the write lock (its commit comes on top).
pub const SLICE: Duration = Duration::from_millis(25);
/// The pause after each slice, without the lock: longer than the 25 ms between two retries
/// of a writer that has been waiting less than 100 ms (SQLite's default busy handler).
pub const PAUSE: Duration = Duration::from_millis(30);

/// The tables the import owns and replaces as a whole (`countries` is rewritten in the swap).
const OWNED: [&str; 3] = ["postal_codes", "gazetteer", "retired_codes"];
const NEXT: &str = "_next";
const OLD: &str = "_old";

/// A country: the columns of its `countryInfo.txt` line the service keeps, and `data`,
/// what `countries` adds once its records are loaded (`db::postal::CountryRow`); nothing
/// on the way in.
#[derive(Debug, Clone)]
pub struct CountryRow<D = ()> {
    pub code: String,
    pub name: String,
    /// countryInfo.txt's `Postal Code Format` and `Postal Code Regex` ('' when none).
    pub postal_format: String,
    pub postal_regex: String,
    pub data: D,
}

/// One postal-code record, ready to store (see `postal_codes` in schema.sql).
#[derive(Debug, Clone, Default)]
pub struct PostalRecord {
    pub country: String,
    pub postal_code: String,
    pub compact_key: String,
    pub place_name: String,
    pub place_folded: String,
    /// admin name1, code1, name2, code2, name3, code3; `None` where the source is empty.
    pub admin: [Option<String>; 6],
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub accuracy: Option<i64>,
    pub timezone: Option<&'static str>,
}

/// What a [`replace`] did, for `POSTAL_IMPORT_TIMINGS`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Replaced {
    /// The dataset generation the swap committed.
    pub generation: i64,
    /// Write transactions taken (slices, the swap, the removal of the old data).
    pub transactions: u64,
    /// The longest time the write lock was held by one of them, commit included.
    pub longest_hold: Duration,
    /// How long the swap transaction held it.
    pub swap_hold: Duration,
}

/// Replaces the whole dataset with `records` (in source order), the gazetteer with
/// `gazetteer` (empty: none), the retired codes with `history.retired` and the country
/// table's rows with `countries`, and records the import's history (`db::history`),
/// holding the write lock only in short slices (module doc).
/// `progress` is called with the number of records written so far, `phase` with the name
/// of each step as it ends (for `POSTAL_IMPORT_TIMINGS`).
pub fn replace(
    conn: &mut Connection,
    countries: &[CountryRow],
    records: &[PostalRecord],
    gazetteer: &[GazetteerRow],
    history: &History,
    mut progress: impl FnMut(u64),
    mut phase: impl FnMut(&str),
) -> Result<Replaced> {
    let summary = Summary::of(records);
    let mut writer = Sliced::new(conn);
    // Slices need no fsync each: an interrupted import is cleaned up by the next one.
    // The swap is committed with FULL (below).
    writer.conn.pragma_update(None, "synchronous", "NORMAL")?;

    discard(&mut writer, NEXT).context("removing the staging tables of an interrupted import")?;
    discard(&mut writer, OLD).context("removing the old tables of an interrupted import")?;
    let generation = writer.once(|tx| {
        let current: i64 = tx.query_row("SELECT generation FROM dataset", [], |r| r.get(0))?;
        history::discard_unfinished(tx, current)?;
        Ok(current + 1)
    })?;
    writer
        .once(|tx| create_staging(tx, generation))
        .context("creating the staging tables")?;
    phase("staging tables created");

    let mut next = 0;
    writer.slices(|tx, deadline| {
        let mut insert = tx.prepare_cached(
            "INSERT INTO postal_codes_next (id, country, postal_code, compact_key, place_name,
                 place_folded, admin_name1, admin_code1, admin_name2, admin_code2, admin_name3,
                 admin_code3, latitude, longitude, accuracy, timezone)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?;
        while next < records.len() {
            let r = &records[next];
            let [n1, c1, n2, c2, n3, c3] = &r.admin;
            insert.execute(params![
                next as i64 + 1,
                r.country,
                r.postal_code,
                r.compact_key,
                r.place_name,
                r.place_folded,
                n1,
                c1,
                n2,
                c2,
                n3,
                c3,
                r.latitude,
                r.longitude,
                r.accuracy,
                r.timezone,
            ])?;
            next += 1;
            if next % 64 == 0 && Instant::now() >= deadline {
                break;
            }
        }
        progress(next as u64);
        Ok(next < records.len())
    })?;
    phase("postal_codes_next filled (with its indexes)");

    let mut next = 0;
    writer.slices(|tx, deadline| {
        let mut insert = tx.prepare_cached(
            "INSERT INTO gazetteer_next (id, country, name, alternate_names, latitude,
                 longitude, admin1, population, timezone)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        while next < gazetteer.len() {
            let g = &gazetteer[next];
            insert.execute(params![
                g.id,
                g.country,
                g.name,
                g.alternate_names,
                g.latitude,
                g.longitude,
                g.admin1,
                g.population,
                g.timezone,
            ])?;
            next += 1;
            if next % 64 == 0 && Instant::now() >= deadline {
                break;
            }
        }
        Ok(next < gazetteer.len())
    })?;
    phase("gazetteer_next filled");

    let table = format!("retired_codes{NEXT}");
    sliced_inserts(&mut writer, &history.retired, |tx, r| {
        history::insert_retired(tx, &table, r)
    })?;
    for (position, source) in history.sources.iter().enumerate() {
        writer.once(|tx| history::insert_source(tx, generation, position, source))?;
    }
    sliced_inserts(&mut writer, &history.country_rows, |tx, c| {
        history::insert_country(tx, generation, c)
    })?;
    sliced_inserts(&mut writer, &history.changes, |tx, c| {
        history::insert_change(tx, generation, c)
    })?;
    phase("retired codes and the import's history written");

    writer.conn.pragma_update(None, "synchronous", "FULL")?;
    writer
        .once(|tx| swap(tx, countries, &summary, generation, history))
        .context("swapping the new dataset in")?;
    writer.swap_hold = writer.last_hold;
    writer.conn.pragma_update(None, "synchronous", "NORMAL")?;
    phase("new dataset swapped in");

    discard(&mut writer, OLD).context("removing the old dataset")?;
    writer.conn.pragma_update(None, "synchronous", "FULL")?;
    phase("old dataset removed");
    Ok(Replaced {
        generation,
        transactions: writer.transactions,
        longest_hold: writer.longest_hold,
        swap_hold: writer.swap_hold,
    })
}

/// What the `countries` rows need from the records: per country its record count and
/// key shapes.
struct Summary<'r> {
    shapes: BTreeMap<&'r str, BTreeSet<String>>,
    record_counts: BTreeMap<&'r str, i64>,
}

impl<'r> Summary<'r> {
    fn of(records: &'r [PostalRecord]) -> Summary<'r> {
        let mut summary = Summary {
            shapes: BTreeMap::new(),
            record_counts: BTreeMap::new(),
        };
        for r in records {
            *summary.record_counts.entry(&r.country).or_default() += 1;
            summary
                .shapes
                .entry(&r.country)
                .or_default()
                .insert(shape(&r.compact_key));
        }
        summary
    }
}

/// The one short transaction that makes the staging tables the live ones.
fn swap(
    tx: &Transaction,
    countries: &[CountryRow],
    summary: &Summary,
    generation: i64,
    history: &History,
) -> Result<()> {
    let stored: i64 = tx.query_row("SELECT generation FROM dataset", [], |r| r.get(0))?;
    if stored + 1 != generation {
        bail!("another import replaced the dataset meanwhile");
    }
    for table in OWNED {
        tx.execute_batch(&format!(
            "ALTER TABLE \"{table}\" RENAME TO \"{table}{OLD}\";
             ALTER TABLE \"{table}{NEXT}\" RENAME TO \"{table}\";"
        ))?;
    }
    tx.execute("DELETE FROM countries", [])?;
    let mut insert = tx.prepare(
        "INSERT INTO countries (code, name, postal_format, postal_regex, record_count, key_shapes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for c in countries {
        let code = c.code.as_str();
        let key_shapes = summary
            .shapes
            .get(code)
            .map(|s| s.iter().map(String::as_str).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        insert.execute(params![
            code,
            c.name,
            c.postal_format,
            c.postal_regex,
            summary.record_counts.get(code).copied().unwrap_or(0),
            key_shapes,
        ])?;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    tx.execute(
        "UPDATE dataset SET generation = ?1, imported_at = ?2",
        params![generation, now],
    )?;
    // The codes this import retired were written with `since` 0: they date from now.
    tx.execute("UPDATE retired_codes SET since = ?1 WHERE since = 0", [now])?;
    history::record_import(tx, generation, now, history)?;
    Ok(())
}

/// Inserts `rows` with `insert` in slices of the write lock.
fn sliced_inserts<T>(
    writer: &mut Sliced,
    rows: &[T],
    mut insert: impl FnMut(&Transaction, &T) -> Result<()>,
) -> Result<()> {
    let mut next = 0;
    writer.slices(|tx, deadline| {
        while next < rows.len() {
            insert(tx, &rows[next])?;
            next += 1;
            if next % 64 == 0 && Instant::now() >= deadline {
                break;
            }
        }
        Ok(next < rows.len())
    })
}

/// Creates `<table>_next` for every owned table, and the indexes of each, from the DDL of
/// the live tables. An index is named after its `schema.sql` name with the generation it
/// is built for (`postal_codes_by_key_g3`): SQLite cannot rename an index, and the live
/// table's indexes keep their names until it is dropped.
fn create_staging(tx: &Transaction, generation: i64) -> Result<()> {
    for table in OWNED {
        let sql: String = tx
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = ?1 AND type = 'table'",
                [table],
                |r| r.get(0),
            )
            .with_context(|| format!("reading the definition of {table}"))?;
        tx.execute_batch(&renamed(&sql, &format!("{table}{NEXT}"), None)?)?;
        let indexes: Vec<(String, String)> = tx
            .prepare(
                "SELECT name, sql FROM sqlite_master
                 WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL",
            )?
            .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (name, sql) in indexes {
            let name = format!("{}_g{generation}", base_index_name(&name));
            tx.execute_batch(&renamed(&sql, &name, Some(&format!("{table}{NEXT}")))?)?;
        }
    }
    Ok(())
}

/// An index's name as `schema.sql` writes it: without the `_g<generation>` an import adds.
fn base_index_name(name: &str) -> &str {
    match name.rsplit_once("_g") {
        Some((base, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// `sql` (a `CREATE [VIRTUAL] TABLE name ...` or `CREATE [UNIQUE] INDEX name ON table ...`
/// as `sqlite_master` stores it) creating `name` instead, and for an index on `on_table`.
fn renamed(sql: &str, name: &str, on_table: Option<&str>) -> Result<String> {
    let mut rest = sql.trim_start();
    let mut out = String::new();
    // Keywords up to the name: CREATE, VIRTUAL or UNIQUE, TABLE or INDEX.
    loop {
        let (word, after) = identifier(rest).context("unexpected DDL")?;
        out.push_str(word);
        out.push(' ');
        rest = after;
        if word.eq_ignore_ascii_case("TABLE") || word.eq_ignore_ascii_case("INDEX") {
            break;
        }
        if out.len() > 32 {
            bail!("unexpected DDL: {sql}");
        }
    }
    let (_, after) = identifier(rest).context("a DDL statement without a name")?;
    out.push_str(&format!("\"{name}\""));
    rest = after;
    if let Some(table) = on_table {
        let (on, after) = identifier(rest).context("an index without ON")?;
        if !on.eq_ignore_ascii_case("ON") {
            bail!("unexpected index DDL: {sql}");
        }
        let (_, after) = identifier(after).context("an index without a table")?;
        out.push_str(&format!(" ON \"{table}\""));
        rest = after;
    }
    out.push(' ');
    out.push_str(rest.trim_start());
    Ok(out)
}

/// The first token of `s` (a bare word or a quoted identifier) and what follows it.
fn identifier(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let close = match s.chars().next()? {
        '"' => '"',
        '`' => '`',
        '[' => ']',
        _ => {
            let end = s
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(s.len());
            return (end > 0).then(|| s.split_at(end));
        }
    };
    let end = s[1..].find(close)? + 2;
    Some(s.split_at(end))
}

/// Empties the owned tables named `<table><suffix>` in slices, then drops them.
fn discard(writer: &mut Sliced, suffix: &str) -> Result<()> {
    for table in OWNED {
        let name = format!("{table}{suffix}");
        let exists = writer
            .conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE name = ?1 AND type = 'table'",
                [&name],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !exists {
            continue;
        }
        {
            let target = &name;
            let mut batch = 256_i64;
            writer.slices(|tx, deadline| {
                let mut delete = tx.prepare_cached(&format!(
                    "DELETE FROM \"{target}\" WHERE rowid IN (SELECT rowid FROM \"{target}\" LIMIT ?1)"
                ))?;
                loop {
                    let started = Instant::now();
                    let deleted = delete.execute([batch])? as i64;
                    if deleted < batch {
                        return Ok(false);
                    }
                    // Aim at about a tenth of a slice per statement.
                    if started.elapsed() < SLICE / 20 {
                        batch *= 2;
                    } else if started.elapsed() > SLICE / 5 && batch > 16 {
                        batch /= 2;
                    }
                    if Instant::now() >= deadline {
                        return Ok(true);
                    }
                }
            })?;
        }
        writer.once(|tx| Ok(tx.execute_batch(&format!("DROP TABLE \"{name}\""))?))?;
    }
    Ok(())
}

/// A connection that writes in short IMMEDIATE transactions with pauses between them.
struct Sliced<'c> {
    conn: &'c mut Connection,
    transactions: u64,
    longest_hold: Duration,
    last_hold: Duration,
    swap_hold: Duration,
    last_commit: Option<Instant>,
}

impl<'c> Sliced<'c> {
    fn new(conn: &'c mut Connection) -> Sliced<'c> {
        Sliced {
            conn,
            transactions: 0,
            longest_hold: Duration::ZERO,
            last_hold: Duration::ZERO,
            swap_hold: Duration::ZERO,
            last_commit: None,
        }
    }

    /// One write transaction running `work`, after the pause that follows the previous one.
    fn once<R>(&mut self, work: impl FnOnce(&Transaction) -> Result<R>) -> Result<R> {
        if let Some(last) = self.last_commit {
            std::thread::sleep(PAUSE.saturating_sub(last.elapsed()));
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let taken = Instant::now();
        let result = work(&tx)?;
        tx.commit()?;
        self.last_hold = taken.elapsed();
        self.last_commit = Some(Instant::now());
        self.transactions += 1;
        self.longest_hold = self.longest_hold.max(self.last_hold);
        Ok(result)
    }

    /// Runs `step` in successive transactions until it answers `false`; each call gets the
    /// deadline of its slice and should stop by then.
    fn slices(
        &mut self,
        mut step: impl FnMut(&Transaction, Instant) -> Result<bool>,
    ) -> Result<()> {
        while self.once(|tx| step(tx, Instant::now() + SLICE))? {}
        Ok(())
    }
}

/// The dataset generation stored in the file: `postal-import` adds 1 in the transaction
/// that swaps a new dataset in, and nothing else changes it.
pub fn generation(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT generation FROM dataset", [], |r| r.get(0))?)
}

/// Unix seconds of the swap that made the file's dataset the live one; `None` when no
/// import has swapped one in since the column exists (a version-1 file's data).
pub fn imported_at(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn.query_row("SELECT imported_at FROM dataset", [], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_definition_is_renamed_whatever_the_quoting() {
        assert_eq!(
            renamed(
                "CREATE TABLE postal_codes (id INTEGER PRIMARY KEY) STRICT",
                "postal_codes_next",
                None
            )
            .unwrap(),
            "CREATE TABLE \"postal_codes_next\" (id INTEGER PRIMARY KEY) STRICT"
        );
        assert_eq!(
            renamed(
                "CREATE TABLE \"postal_codes\" (id INTEGER)",
                "postal_codes_next",
                None
            )
            .unwrap(),
            "CREATE TABLE \"postal_codes_next\" (id INTEGER)"
        );
        assert_eq!(
            renamed(
                "CREATE VIRTUAL TABLE \"places_trigram\" USING fts5(name_folded, content = 'places')",
                "places_trigram_next",
                None
            )
            .unwrap(),
            "CREATE VIRTUAL TABLE \"places_trigram_next\" USING fts5(name_folded, content = 'places')"
        );
    }

    #[test]
    fn an_index_definition_gets_its_new_name_and_table() {
        assert_eq!(
            renamed(
                "CREATE INDEX postal_codes_by_key_g2 ON \"postal_codes\" (country, compact_key)",
                "postal_codes_by_key_g3",
                Some("postal_codes_next")
            )
            .unwrap(),
            "CREATE INDEX \"postal_codes_by_key_g3\" ON \"postal_codes_next\" (country, compact_key)"
        );
    }

    #[test]
    fn an_index_name_loses_only_a_generation_suffix() {
        assert_eq!(
            base_index_name("postal_codes_by_key"),
            "postal_codes_by_key"
        );
        assert_eq!(
            base_index_name("postal_codes_by_key_g12"),
            "postal_codes_by_key"
        );
        assert_eq!(base_index_name("by_g"), "by_g");
        assert_eq!(base_index_name("by_gx1"), "by_gx1");
    }
}
