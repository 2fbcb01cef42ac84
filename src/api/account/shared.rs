//! What the dashboard's operations share: a listing answered as JSON or as CSV
//! (`format=csv`), a refusal in the CLI's words, and times as RFC 3339.

use poem_openapi::payload::{Json, PlainText};
use poem_openapi::{ApiResponse, Enum, ResponseContent};

use crate::api::ApiError;

/// A JSON answer, or the same rows as CSV (`format=csv`).
#[derive(ResponseContent)]
pub enum JsonOrCsv<T: poem_openapi::types::ToJSON + Send + Sync> {
    Json(Json<T>),
    #[oai(content_type = "text/csv; charset=utf-8")]
    Csv(PlainText<String>),
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
    let before = match cursor {
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
        before,
        page: Some(page),
    })
}

/// A page's `nextCursor`.
pub(super) fn next_cursor(next: Option<i64>) -> Option<String> {
    next.map(|id| id.to_string())
}

pub(super) fn rfc3339(secs: i64) -> String {
    crate::domain::date::rfc3339(secs)
}

pub(super) fn csv(header: &[&str], rows: Vec<Vec<String>>) -> Result<PlainText<String>, ApiError> {
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(header)
        .map_err(|e| ApiError::internal(e.into()))?;
    for row in rows {
        out.write_record(&row)
            .map_err(|e| ApiError::internal(e.into()))?;
    }
    let bytes = out
        .into_inner()
        .map_err(|e| ApiError::internal(anyhow::anyhow!("{e}")))?;
    Ok(PlainText(String::from_utf8_lossy(&bytes).into_owned()))
}
