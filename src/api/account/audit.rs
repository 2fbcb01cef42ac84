//! `/account/api/audit`: who changed what of the signed-in account, from the dashboard
//! or the operator's CLI.

use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt, stream};
use poem::Body;
use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::Dashboard;
use super::answers::{Failed, PagedRead};
use super::extract::Signed;
use super::shared::{CsvBody, Format, JsonOrCsv, Listing, csv_lines, next_cursor, paging, rfc3339};
use crate::api::{ApiError, ApiTags};
use crate::db::admin::{AuditEntry, Direction, Page, Paging};
use crate::domain::ids::AccountId;

#[derive(Debug, Object)]
pub struct AuditLineBody {
    pub at: String,
    /// `operator (CLI)`, `customer (session ses_…)` or `customer (sign-in)`.
    pub actor: String,
    /// `key.create`, `key.revoke`, `limits.set`, `topup`, ...
    pub action: String,
    pub detail: String,
}

#[derive(Debug, Object)]
pub struct AuditBody {
    /// Newest first.
    pub entries: Vec<AuditLineBody>,
    /// The `cursor` of the next (older) page; `null` on the last page.
    #[oai(rename = "nextCursor")]
    pub next_cursor: Option<String>,
}

/// `/account/api/audit`.
pub struct AuditApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl AuditApi {
    /// Who changed what of the account (keys, limits, money, sign-ins), from the
    /// dashboard or the operator's CLI: newest first, a page at a time; the CSV is the
    /// whole log, oldest first.
    #[oai(path = "/audit", method = "get", operation_id = "accountAudit")]
    async fn audit(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
        format: Query<Option<Format>>,
        /// Lines in the page (1 to 500; default 100). Not for the CSV.
        #[oai(validator(minimum(value = "1"), maximum(value = "500")))]
        limit: Query<Option<u32>>,
        /// Where the page starts: a `nextCursor` this operation answered (the first page
        /// without it). Not for the CSV.
        cursor: Query<Option<String>>,
    ) -> Result<Listing<AuditBody>, Failed<PagedRead>> {
        let account = signed.0.account();
        let format = format.0.unwrap_or(Format::Json);
        if format == Format::Csv {
            return Ok(Listing::Ok(JsonOrCsv::Csv(
                whole_log(dash.0.clone(), account).await?,
            )));
        }
        let paging = paging(limit.0, cursor.0)?;
        let page = read(&dash, &account, paging).await?;
        Ok(Listing::Ok(JsonOrCsv::Json(Json(AuditBody {
            next_cursor: next_cursor(page.next),
            entries: page
                .entries
                .into_iter()
                .map(|e| AuditLineBody {
                    at: rfc3339(e.at),
                    actor: e.actor,
                    action: e.action.as_str().to_owned(),
                    detail: e.detail,
                })
                .collect(),
        }))))
    }
}

/// The CSV's header line.
const HEADER: [&str; 4] = ["at", "actor", "action", "detail"];

/// The whole log as CSV, oldest first, read [`Paging::MAX_PAGE`] lines at a time: the
/// first page before the answer (a failure is then still a status; a log of one page is
/// answered whole, with its length), each further page as the client takes the one
/// before. Memory holds a page; a store connection is held while a page is read, never
/// across the download. A page that fails after the first cuts the answer short (the
/// chunked body never ends, so the client sees a broken download, not a short log).
async fn whole_log(dash: Arc<Dashboard>, account: AccountId) -> Result<CsvBody, ApiError> {
    let first = read(&dash, &account, oldest_first(None)).await?;
    let lines = csv_lines(Some(&HEADER), rows(first.entries)).map_err(ApiError::internal)?;
    let Some(cursor) = first.next else {
        return Ok(CsvBody::whole(lines));
    };
    let rest = stream::try_unfold(Some(cursor), move |cursor| {
        let dash = dash.clone();
        let account = account.clone();
        async move {
            let Some(cursor) = cursor else {
                return Ok(None);
            };
            let page = read(&dash, &account, oldest_first(Some(cursor)))
                .await
                .map_err(|e| cut_short(format!("{e:?}")))?;
            let lines =
                csv_lines(None, rows(page.entries)).map_err(|e| cut_short(format!("{e:#}")))?;
            Ok(Some((lines, page.next)))
        }
    });
    let lines = stream::once(async { Ok::<_, std::io::Error>(lines) }).chain(rest);
    Ok(CsvBody::streamed(Body::from_bytes_stream(
        lines.map_ok(bytes::Bytes::from),
    )))
}

/// A page of the CSV's read, oldest first, after `cursor`.
fn oldest_first(cursor: Option<i64>) -> Paging {
    Paging {
        cursor,
        page: Some(Paging::MAX_PAGE),
        direction: Direction::OldestFirst,
    }
}

/// The page of `account`'s log `paging` asks for, through the store's bounded calls.
async fn read(
    dash: &Dashboard,
    account: &AccountId,
    paging: Paging,
) -> Result<Page<AuditEntry>, ApiError> {
    let account = account.clone();
    dash.admin(move |mut admin| async move { admin.audit_entries(&account, &paging).await })
        .await
}

/// Each entry as a line of the CSV, in the order of [`HEADER`].
fn rows(entries: Vec<AuditEntry>) -> impl Iterator<Item = Vec<String>> {
    entries
        .into_iter()
        .map(|e| vec![rfc3339(e.at), e.actor, e.action.to_string(), e.detail])
}

/// A page after the first failed: logged, and the download broken off.
fn cut_short(why: String) -> std::io::Error {
    tracing::error!("the audit log's CSV, cut short: {why}");
    std::io::Error::other(why)
}
