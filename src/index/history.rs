//! The dataset's history in memory, loaded and swapped with the postal data: the retired
//! codes (what lookup, validation and bulk say of a code an import removed), the live
//! import's provenance and the latest changes (`/api/dataset`).

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use crate::db;
pub use crate::db::history::{ChangeRow, CountryRow, DatedChange, OverrideRow, Provenance};
use crate::domain::{CountryCode, PostalQuery};

/// How many of the latest code changes `/api/dataset` shows.
pub const RECENT_CHANGES: usize = 100;

/// A code an import removed: its last first place and when it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retired {
    /// As the data wrote it.
    pub postal_code: Box<str>,
    pub city: Box<str>,
    /// Unix seconds of the import's swap.
    pub since: i64,
}

#[derive(Default)]
pub struct DatasetHistory {
    /// Per country, by compact key.
    retired: HashMap<CountryCode, HashMap<Box<str>, Retired>>,
    provenance: Option<Provenance>,
    recent: Vec<DatedChange>,
    overrides: Vec<OverrideRow>,
}

impl DatasetHistory {
    /// Reads the history of the dataset of `generation` (inside the load's transaction).
    pub fn load(conn: &Connection, generation: i64) -> Result<DatasetHistory> {
        let mut retired: HashMap<CountryCode, HashMap<Box<str>, Retired>> = HashMap::new();
        for row in db::history::retired(conn)? {
            let Some(country) = CountryCode::parse(&row.country) else {
                continue;
            };
            retired.entry(country).or_default().insert(
                row.compact_key.into(),
                Retired {
                    postal_code: row.postal_code.into(),
                    city: row.city.into(),
                    since: row.since,
                },
            );
        }
        Ok(DatasetHistory {
            retired,
            provenance: db::history::provenance(conn, generation)?,
            recent: db::history::changes(conn, 0, None, Some(RECENT_CHANGES))?,
            overrides: db::history::overrides(conn)?,
        })
    }

    /// The retired code `query` names, if it names one.
    pub fn retired(&self, country: CountryCode, query: &PostalQuery) -> Option<&Retired> {
        let of_country = self.retired.get(&country)?;
        query.candidates().find_map(|key| of_country.get(key))
    }

    /// How many codes are retired.
    pub fn retired_count(&self) -> usize {
        self.retired.values().map(HashMap::len).sum()
    }

    /// The live import's provenance; `None` when it left none (before schema 5).
    pub fn provenance(&self) -> Option<&Provenance> {
        self.provenance.as_ref()
    }

    /// The latest changes, newest import first.
    pub fn recent_changes(&self) -> &[DatedChange] {
        &self.recent
    }

    /// The overrides the live import applied.
    pub fn overrides(&self) -> &[OverrideRow] {
        &self.overrides
    }
}
