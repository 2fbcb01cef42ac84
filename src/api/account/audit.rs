//! `/account/api/audit`: who changed what of the signed-in account, from the dashboard
//! or the operator's CLI.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::Dashboard;
use super::answers::{Failed, PagedRead};
use super::extract::Signed;
use super::shared::{Format, JsonOrCsv, Listing, csv, next_cursor, paging, rfc3339};
use crate::api::ApiTags;
use crate::db::admin::Paging;

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
        let paging = match format {
            Format::Json => paging(limit.0, cursor.0)?,
            Format::Csv => Paging::default(),
        };
        let page = dash
            .admin(move |mut admin| async move { admin.audit_entries(&account, &paging).await })
            .await?;
        let entries = page.entries;
        Ok(Listing::Ok(match format {
            Format::Json => JsonOrCsv::Json(Json(AuditBody {
                next_cursor: next_cursor(page.next),
                entries: entries
                    .into_iter()
                    .map(|e| AuditLineBody {
                        at: rfc3339(e.at),
                        actor: e.actor,
                        action: e.action.as_str().to_owned(),
                        detail: e.detail,
                    })
                    .collect(),
            })),
            Format::Csv => JsonOrCsv::Csv(csv(
                &["at", "actor", "action", "detail"],
                entries
                    .into_iter()
                    .map(|e| vec![rfc3339(e.at), e.actor, e.action.to_string(), e.detail])
                    .collect(),
            )?),
        }))
    }
}
