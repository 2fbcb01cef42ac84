//! `postal dataset show` and `postal dataset changes`: the live dataset's provenance, and
//! the codes imports added, removed or moved (docs/dataset.md).

use std::path::Path;

use clap::Subcommand;
use serde::Serialize;

use crate::api::routes::dataset::{self, CodeChange, CountryChanges, DatasetBody, Facts};
use crate::db::{self, history};
use crate::domain::CountryCode;
use crate::domain::date::{UtcDate, rfc3339};
use crate::index::history::DatasetHistory;

use super::{Format, Verdict, print, print_csv};

#[derive(Subcommand)]
pub(super) enum DatasetCommand {
    /// Where the live dataset came from: each file's location, bytes, SHA-256, upstream
    /// validators and zip entry time; per country its codes and what the import changed;
    /// the overrides; the latest 100 changes (the object /api/dataset answers). CSV: the
    /// countries.
    Show {
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// The codes added, removed or moved by the imports swapped in on or after DATE (UTC),
    /// newest import first. CSV: one line per code.
    Changes {
        /// YYYY-MM-DD (UTC).
        #[arg(long, value_name = "DATE")]
        since: String,
        /// Only this country (ISO 3166-1 alpha-2).
        #[arg(long, value_name = "CC")]
        country: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

pub(super) fn run(db_path: &Path, command: DatasetCommand) -> anyhow::Result<Verdict> {
    match command {
        DatasetCommand::Show { format } => show(db_path, format),
        DatasetCommand::Changes {
            since,
            country,
            format,
        } => {
            let since = UtcDate::parse(&since)?;
            let country = country
                .map(|c| {
                    CountryCode::parse(&c.to_ascii_uppercase()).ok_or_else(|| {
                        super::BadInput(format!("{c:?} is not an ISO 3166-1 alpha-2 country code"))
                    })
                })
                .transpose()?;
            changes(db_path, since, country, format)
        }
    }
}

fn show(db_path: &Path, format: Format) -> anyhow::Result<Verdict> {
    let conn = db::open(db_path)?;
    let generation = db::dataset::generation(&conn)?;
    let history = DatasetHistory::load(&conn, generation)?;
    let coverage = db::postal::coverage(&conn)?;
    let codes = match history.provenance() {
        Some(p) => p.import.codes,
        None => history::distinct_codes(&conn)?,
    };
    let body: DatasetBody = dataset::describe(
        Facts {
            generation,
            imported_at: db::dataset::imported_at(&conn)?,
            records: coverage.records,
            codes,
            countries: coverage.countries,
        },
        &history,
    );
    match format {
        Format::Json => print(&body)?,
        Format::Csv => print_csv(
            &["country", "records", "codes", "added", "removed", "moved"],
            body.provenance
                .iter()
                .flat_map(|p| p.per_country.iter())
                .map(|c: &CountryChanges| {
                    [c.records, c.codes, c.added, c.removed, c.moved]
                        .iter()
                        .fold(vec![c.country.clone()], |mut row, n| {
                            row.push(n.to_string());
                            row
                        })
                }),
        )?,
    }
    Ok(Verdict::Success)
}

/// `dataset changes`: the imports of the period (with their per-country counts, which
/// also tell a country's first import, whose codes are not listed one by one) and the
/// changes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Changes {
    since: String,
    country: Option<String>,
    imports: Vec<ImportLine>,
    changes: Vec<CodeChange>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImportLine {
    generation: i64,
    imported_at: String,
    countries: Vec<CountryChanges>,
}

fn changes(
    db_path: &Path,
    since: UtcDate,
    country: Option<CountryCode>,
    format: Format,
) -> anyhow::Result<Verdict> {
    let conn = db::open(db_path)?;
    let country = country.map(|c| c.as_str().to_string());
    let rows = history::changes(&conn, since.start_unix(), country.as_deref(), None)?;
    let changes: Vec<CodeChange> = rows.iter().map(dataset::change).collect();
    match format {
        Format::Json => {
            let imports = history::imports_since(&conn, since.start_unix(), country.as_deref())?
                .into_iter()
                .map(|(import, countries)| ImportLine {
                    generation: import.generation,
                    imported_at: rfc3339(import.finished_at),
                    countries: countries.iter().map(CountryChanges::from).collect(),
                })
                .collect();
            print(&Changes {
                since: since.to_string(),
                country,
                imports,
                changes,
            })?
        }
        Format::Csv => {
            let number = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            print_csv(
                &[
                    "importedAt",
                    "generation",
                    "country",
                    "postalCode",
                    "change",
                    "city",
                    "latitude",
                    "longitude",
                    "previousCity",
                    "previousLatitude",
                    "previousLongitude",
                ],
                changes.into_iter().map(|c| {
                    vec![
                        c.imported_at,
                        c.generation.to_string(),
                        c.country,
                        c.postal_code,
                        c.change,
                        c.city,
                        number(c.latitude),
                        number(c.longitude),
                        c.previous_city.unwrap_or_default(),
                        number(c.previous_latitude),
                        number(c.previous_longitude),
                    ]
                }),
            )?
        }
    }
    Ok(Verdict::Success)
}
