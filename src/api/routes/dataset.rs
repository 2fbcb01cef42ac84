//! POST /api/dataset: where the live dataset came from (each file's location, size,
//! SHA-256, upstream validators, zip entry time), what its import changed per country, the
//! operator's overrides, and the latest codes added, removed or moved; free.
//! `postal dataset show` prints the same object (docs/dataset.md).

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;

use crate::api::billed::MISSING_API_KEY;
use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::envelope::Timings;
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::{Envelope, example_free_envelope};
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::domain::date::rfc3339;
use crate::index::history::DatasetHistory;
use crate::index::history::{ChangeRow, CountryRow, DatedChange, OverrideRow, Provenance};
use crate::index::postal::PostalIndex;

/// The route of /api/dataset (its handler reads the `State` from the request data).
pub struct DatasetApi;

#[OpenApi]
impl DatasetApi {
    /// The dataset's provenance and latest changes.
    ///
    /// Where each file of the live import came from (path or URL, bytes, SHA-256, upstream
    /// `Last-Modified`/`ETag`, the zip entry's time), records, codes and the codes added,
    /// removed and moved per country, the operator's overrides, and the latest 100 codes
    /// added, removed or moved. Free, and never rate-limited.
    #[oai(
        path = "/api/dataset",
        method = "post",
        operation_id = "dataset",
        tag = "ApiTags::Service"
    )]
    async fn dataset(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<DatasetRequest>,
    ) -> Result<Reply<DatasetResponse>, ApiError> {
        let state = state.0;
        let mut timings = Timings::start();
        let account = state.status(&body, MISSING_API_KEY, Endpoint::Dataset, &mut timings)?;
        let dataset = timings.processing(|| {
            let postal = state.postal();
            let mut dataset = describe(Facts::of(&postal), postal.history());
            for source in dataset.provenance.iter_mut().flat_map(|p| &mut p.sources) {
                source.location = public_location(&source.location);
            }
            dataset
        });
        Ok(Reply(DatasetResponse {
            dataset,
            envelope: Envelope::free(&account, &timings),
        }))
    }
}

/// A source's location as an API key holder sees it: a URL without its user, password,
/// query or fragment (a token in them is the operator's), a local path as its file name
/// (the server's directories are the operator's). `postal dataset show` prints it whole.
fn public_location(location: &str) -> String {
    match location.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.split(['?', '#']).next().unwrap_or_default();
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}{path}")
        }
        None => location.rsplit('/').next().unwrap_or(location).to_string(),
    }
}

/// The counts of the live dataset.
pub struct Facts {
    pub generation: i64,
    /// Unix seconds of the swap.
    pub imported_at: Option<i64>,
    pub records: i64,
    pub codes: i64,
    pub countries: i64,
}

impl Facts {
    pub fn of(postal: &PostalIndex) -> Facts {
        let (countries, codes) = postal.size();
        Facts {
            generation: postal.loaded_generation(),
            imported_at: postal.imported_at(),
            records: postal.coverage().records,
            codes: codes as i64,
            countries: countries as i64,
        }
    }
}

/// What the live dataset is and how it came (`/api/dataset`, `postal dataset show`).
pub fn describe(facts: Facts, history: &DatasetHistory) -> DatasetBody {
    DatasetBody {
        generation: facts.generation,
        imported_at: facts.imported_at.map(rfc3339),
        records: facts.records,
        codes: facts.codes,
        countries: facts.countries,
        retired_codes: history.retired_count() as i64,
        provenance: history
            .provenance()
            .map(|p| provenance(p, history.overrides())),
        changes: history.recent_changes().iter().map(change).collect(),
    }
}

fn provenance(p: &Provenance, overrides: &[OverrideRow]) -> ImportProvenance {
    ImportProvenance {
        started_at: rfc3339(p.import.started_at),
        finished_at: rfc3339(p.import.finished_at),
        bad_lines: p.import.bad_lines,
        allow_shrink: p.import.allow_shrink,
        sources: p
            .sources
            .iter()
            .map(|s| SourceFile {
                role: s.role.to_string(),
                location: s.location.clone(),
                bytes: s.bytes,
                sha256: s.sha256.clone(),
                last_modified: s.last_modified.clone(),
                etag: s.etag.clone(),
                entry: s.entry.clone(),
                entry_modified: s.entry_modified.clone(),
            })
            .collect(),
        per_country: p.countries.iter().map(CountryChanges::from).collect(),
        overrides: overrides
            .iter()
            .map(|o| {
                let mut columns = o.fields.split('\t');
                let mut next = || columns.next().unwrap_or("").trim().to_string();
                let (country, postal_code, place_name) = (next(), next(), next());
                OverrideLine {
                    line: o.line,
                    action: o.action.clone(),
                    country,
                    postal_code,
                    place_name,
                }
            })
            .collect(),
    }
}

/// A change as the API and the CLI show it.
pub fn change(c: &DatedChange) -> CodeChange {
    let ChangeRow {
        country,
        postal_code,
        change,
        city,
        latitude,
        longitude,
        previous_city,
        previous_latitude,
        previous_longitude,
    } = c.change.clone();
    CodeChange {
        imported_at: rfc3339(c.at),
        generation: c.generation,
        country,
        postal_code,
        change: change.as_str().to_string(),
        city,
        latitude,
        longitude,
        previous_city,
        previous_latitude,
        previous_longitude,
    }
}

/// Body of /api/dataset.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct DatasetRequest {
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

impl DocumentedBody for DatasetRequest {}

/// The live dataset.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase", skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct DatasetBody {
    /// Which import this is: 1 for the first, one more for each.
    pub generation: i64,
    /// When the import swapped it in (RFC 3339, UTC); absent when the file does not say.
    pub imported_at: Option<String>,
    pub records: i64,
    /// Distinct postal codes.
    pub codes: i64,
    /// Countries with data.
    pub countries: i64,
    /// Codes removed by an import and not brought back (lookup answers them 404 with
    /// `retired`).
    pub retired_codes: i64,
    /// What the import read and changed; absent for a dataset imported before the service
    /// recorded it.
    pub provenance: Option<ImportProvenance>,
    /// The latest codes added, removed or moved (at most 100), newest import first.
    pub changes: Vec<CodeChange>,
}

/// What an import read and changed.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct ImportProvenance {
    /// RFC 3339, UTC.
    pub started_at: String,
    /// The swap, RFC 3339, UTC.
    pub finished_at: String,
    /// Lines of the sources skipped as malformed.
    pub bad_lines: i64,
    /// Imported with `--allow-shrink` (a country lost more than 10% of its codes).
    pub allow_shrink: bool,
    /// Every file read, in order.
    pub sources: Vec<SourceFile>,
    /// Per country: records and codes imported, and codes added, removed and moved
    /// against the dataset before.
    pub per_country: Vec<CountryChanges>,
    /// The operator's corrections applied (`postal-import --overrides`).
    pub overrides: Vec<OverrideLine>,
}

/// A file an import read.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase", skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct SourceFile {
    /// `postal`, `country_info`, `gazetteer` or `overrides`.
    pub role: String,
    /// The path or URL given to the import (`/api/dataset`: a URL without user,
    /// password, query or fragment; a local file by its name).
    pub location: String,
    pub bytes: i64,
    /// Lower-case hex.
    pub sha256: String,
    /// Upstream's `Last-Modified`, when downloaded.
    pub last_modified: Option<String>,
    /// Upstream's `ETag`, when downloaded.
    pub etag: Option<String>,
    /// The zip entry read.
    pub entry: Option<String>,
    /// The zip entry's time as stored (no zone).
    pub entry_modified: Option<String>,
}

/// One country of an import.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct CountryChanges {
    pub country: String,
    pub records: i64,
    pub codes: i64,
    /// Codes new to the dataset (all of them for a country's first import).
    pub added: i64,
    pub removed: i64,
    /// Codes whose first place changed or moved more than 1 km.
    pub moved: i64,
}

impl From<&CountryRow> for CountryChanges {
    fn from(c: &CountryRow) -> CountryChanges {
        CountryChanges {
            country: c.country.clone(),
            records: c.records,
            codes: c.codes,
            added: c.added,
            removed: c.removed,
            moved: c.moved,
        }
    }
}

/// One override line.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct OverrideLine {
    /// Its line in the overrides file.
    pub line: i64,
    /// `add` or `remove`.
    pub action: String,
    pub country: String,
    pub postal_code: String,
    /// "" for a removal of every place of the code.
    pub place_name: String,
}

/// A code an import added, removed or moved.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase", skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct CodeChange {
    /// When the import swapped it in (RFC 3339, UTC).
    pub imported_at: String,
    pub generation: i64,
    pub country: String,
    /// As the data writes it.
    pub postal_code: String,
    /// `added`, `removed` or `moved`.
    pub change: String,
    /// Its first place: new (added, moved) or last (removed).
    pub city: String,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    /// Moved: the first place before.
    pub previous_city: Option<String>,
    pub previous_latitude: Option<f64>,
    pub previous_longitude: Option<f64>,
}

/// 200 of /api/dataset (free).
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct DatasetResponse {
    pub dataset: DatasetBody,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(DatasetResponse);

impl Example for DatasetResponse {
    fn example() -> Self {
        let at = "2026-11-25T04:12:09Z".to_string();
        DatasetResponse {
            dataset: DatasetBody {
                generation: 7,
                imported_at: Some(at.clone()),
                records: 1_648_448,
                codes: 1_226_387,
                countries: 120,
                retired_codes: 1,
                provenance: Some(ImportProvenance {
                    started_at: "2026-11-25T04:11:47Z".into(),
                    finished_at: at.clone(),
                    bad_lines: 0,
                    allow_shrink: false,
                    sources: vec![SourceFile {
                        role: "postal".into(),
                        location: "https://download.geonames.org/export/zip/allCountries.zip"
                            .into(),
                        bytes: 16_121_412,
                        sha256: "9f2c0e8a4b51d7c3e6f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
                            .into(),
                        last_modified: Some("Sun, 22 Nov 2026 03:14:27 GMT".into()),
                        etag: Some("\"f5fa44-64f0c1a2b3c4d\"".into()),
                        entry: Some("allCountries.txt".into()),
                        entry_modified: Some("2026-11-22T03:14:00".into()),
                    }],
                    per_country: vec![CountryChanges {
                        country: "US".into(),
                        records: 41_490,
                        codes: 41_490,
                        added: 0,
                        removed: 1,
                        moved: 0,
                    }],
                    overrides: vec![],
                }),
                changes: vec![CodeChange {
                    imported_at: at,
                    generation: 7,
                    country: "US".into(),
                    postal_code: "90209".into(),
                    change: "removed".into(),
                    city: "Beverly Hills".into(),
                    latitude: Some(34.0901),
                    longitude: Some(-118.4065),
                    previous_city: None,
                    previous_latitude: None,
                    previous_longitude: None,
                }],
            },
            envelope: example_free_envelope(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_shown_without_credentials_tokens_or_directories() {
        for (stored, shown) in [
            (
                "https://download.geonames.org/export/zip/allCountries.zip",
                "https://download.geonames.org/export/zip/allCountries.zip",
            ),
            (
                "https://user:secret@mirror.example:8443/geo/all.zip?token=abc#x",
                "https://mirror.example:8443/geo/all.zip",
            ),
            ("https://mirror.example?token=abc", "https://mirror.example"),
            ("/srv/postal/data/allCountries.zip", "allCountries.zip"),
            ("allCountries.zip", "allCountries.zip"),
        ] {
            assert_eq!(public_location(stored), shown, "{stored}");
        }
    }
}
