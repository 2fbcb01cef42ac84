//! `/account/api/audit`: who changed what of the signed-in account, from the dashboard
//! or the operator's CLI.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::Dashboard;
use super::answers::{Failed, ReadQuery};
use super::extract::Signed;
use super::shared::{Format, JsonOrCsv, Listing, csv, rfc3339};
use crate::api::ApiTags;

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
    pub entries: Vec<AuditLineBody>,
}

/// `/account/api/audit`.
pub struct AuditApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl AuditApi {
    /// Who changed what of the account (keys, limits, money, sign-ins), from the
    /// dashboard or the operator's CLI; newest first.
    #[oai(path = "/audit", method = "get", operation_id = "accountAudit")]
    async fn audit(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
        format: Query<Option<Format>>,
    ) -> Result<Listing<AuditBody>, Failed<ReadQuery>> {
        let account = signed.0.account();
        let entries = dash
            .admin(move |mut admin| async move { admin.audit_entries(&account).await })
            .await?;
        Ok(Listing::Ok(match format.0.unwrap_or(Format::Json) {
            Format::Json => JsonOrCsv::Json(Json(AuditBody {
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
