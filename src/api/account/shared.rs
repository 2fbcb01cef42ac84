//! What the dashboard's operations share: a listing answered as JSON or as CSV
//! (`format=csv`), a refusal in the CLI's words, and times as RFC 3339.

use poem::{Body, IntoResponse, Response};
use poem_openapi::payload::{Json, Payload};
use poem_openapi::registry::MetaSchemaRef;
use poem_openapi::types::Type;
use poem_openapi::{ApiResponse, Enum, ResponseContent};

use crate::api::ApiError;

/// A JSON answer, or the same rows as CSV (`format=csv`).
#[derive(ResponseContent)]
pub enum JsonOrCsv<T: poem_openapi::types::ToJSON + Send + Sync> {
    Json(Json<T>),
    #[oai(content_type = "text/csv; charset=utf-8")]
    Csv(CsvBody),
}

/// A CSV answer's body: whole in memory (its length known), or a stream of its lines
/// written as they are read (the audit log's, sent chunked).
pub struct CsvBody(Body);

impl CsvBody {
    pub(super) fn whole(bytes: Vec<u8>) -> CsvBody {
        CsvBody(Body::from_vec(bytes))
    }

    pub(super) fn streamed(body: Body) -> CsvBody {
        CsvBody(body)
    }
}

/// Documented as text, as `PlainText`; the variant of `JsonOrCsv` names the content type.
impl Payload for CsvBody {
    const CONTENT_TYPE: &'static str = "text/csv; charset=utf-8";

    fn schema_ref() -> MetaSchemaRef {
        String::schema_ref()
    }
}

impl IntoResponse for CsvBody {
    fn into_response(self) -> Response {
        Response::builder().body(self.0)
    }
}

#[derive(ApiResponse)]
pub enum Listing<T: poem_openapi::types::ToJSON + Send + Sync> {
    /// The rows, as JSON or CSV.
    #[oai(status = 200)]
    Ok(JsonOrCsv<T>),
}

/// The format of a listing: `json` (default) or `csv`.
#[derive(Debug, Enum, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "lowercase")]
pub enum Format {
    Json,
    Csv,
}

pub(super) fn refused(why: impl ToString) -> ApiError {
    ApiError::bad_request(why.to_string())
}

/// The page a listing's `limit` (1 to 500, default 100) and `cursor` (a `nextCursor` it
/// answered: a row id) ask for; a cursor of another shape is 400 `Invalid 'cursor'`.
pub(super) fn paging(
    limit: Option<u32>,
    cursor: Option<String>,
) -> Result<crate::db::admin::Paging, crate::api::ApiError> {
    let after = match cursor {
        None => None,
        Some(text) => Some(
            text.parse::<i64>()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| crate::api::ApiError::bad_request("Invalid 'cursor'"))?,
        ),
    };
    let page = limit.unwrap_or(100).min(crate::db::admin::Paging::MAX_PAGE);
    Ok(crate::db::admin::Paging {
        cursor: after,
        page: Some(page),
        direction: crate::db::admin::Direction::NewestFirst,
    })
}

/// A page's `nextCursor`.
pub(super) fn next_cursor(next: Option<i64>) -> Option<String> {
    next.map(|id| id.to_string())
}

pub(super) fn rfc3339(secs: i64) -> String {
    crate::domain::date::rfc3339(secs)
}

pub(super) fn csv(header: &[&str], rows: Vec<Vec<String>>) -> Result<CsvBody, ApiError> {
    csv_lines(Some(header), rows)
        .map(CsvBody::whole)
        .map_err(ApiError::internal)
}

/// `rows` as CSV lines, after the `header` line when there is one.
pub(super) fn csv_lines(
    header: Option<&[&str]>,
    rows: impl IntoIterator<Item = Vec<String>>,
) -> anyhow::Result<Vec<u8>> {
    let mut out = csv::Writer::from_writer(Vec::new());
    if let Some(header) = header {
        out.write_record(header)?;
    }
    for row in rows {
        out.write_record(&row)?;
    }
    out.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}
