//! `/account/api/usage` and `/account/api/ledger`: what the signed-in account was
//! charged, per UTC day and operation, and its ledger.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::answers::{Failed, Read, UsageRead};
use super::extract::Signed;
use super::shared::{Format, JsonOrCsv, Listing, csv};
use super::{Dashboard, now_unix};
use crate::api::ApiTags;
use crate::db::admin::UsageQuery;
use crate::domain::ids::KeyId;

/// Billed queries and their price for one UTC day and operation.
#[derive(Debug, Object)]
pub struct UsageLineBody {
    pub date: String,
    pub endpoint: String,
    pub queries: u64,
    /// USD.
    pub charged: f64,
}

#[derive(Debug, Object)]
pub struct UsageBody {
    #[oai(rename = "accountId")]
    pub account_id: String,
    /// The key asked for; `null`: every key of the account.
    #[oai(rename = "keyId")]
    pub key_id: Option<String>,
    pub days: u32,
    pub usage: Vec<UsageLineBody>,
}

#[derive(Debug, Object)]
pub struct LedgerEntryBody {
    pub at: String,
    /// `grant`, `topup`, `charge` or `adjustment`.
    pub kind: String,
    /// USD, signed (a charge is negative).
    pub amount: f64,
    #[oai(rename = "balanceAfter")]
    pub balance_after: f64,
    pub queries: u64,
    pub endpoint: Option<String>,
    pub note: Option<String>,
}

#[derive(Debug, Object)]
pub struct LedgerBody {
    pub entries: Vec<LedgerEntryBody>,
}

/// `/account/api/usage` and `/account/api/ledger`.
pub struct UsageApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl UsageApi {
    /// Billed queries and USD per UTC day and operation, oldest first, of every key or
    /// one; the CSV has a line per day, key and operation.
    #[oai(path = "/usage", method = "get", operation_id = "accountUsage")]
    async fn usage(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
        /// The last this many UTC days, today included (1 to 366; default 30).
        #[oai(validator(minimum(value = "1"), maximum(value = "366")))]
        days: Query<Option<u32>>,
        /// Only this key of the account (`key_...`); every key by default.
        key: Query<Option<String>>,
        format: Query<Option<Format>>,
    ) -> Result<Listing<UsageBody>, Failed<UsageRead>> {
        let account = signed.0.account();
        let format = format.0.unwrap_or(Format::Json);
        let query = UsageQuery {
            days: days.0.unwrap_or(30),
            now: now_unix(),
            account: Some(account.clone()),
            key: key.0.map(KeyId::new),
            per_key: format == Format::Csv,
        };
        let (days, key_id) = (query.days, query.key.clone());
        let lines = dash
            .admin(move |mut admin| async move { admin.usage(&query).await })
            .await?;
        Ok(Listing::Ok(match format {
            Format::Json => JsonOrCsv::Json(Json(UsageBody {
                account_id: account.into(),
                key_id: key_id.map(String::from),
                days,
                usage: lines
                    .into_iter()
                    .map(|l| UsageLineBody {
                        date: l.date,
                        endpoint: l.endpoint,
                        queries: l.queries,
                        charged: l.charged.to_usd(),
                    })
                    .collect(),
            })),
            Format::Csv => JsonOrCsv::Csv(csv(
                &["date", "key_id", "endpoint", "queries", "charged_usd"],
                lines
                    .into_iter()
                    .map(|l| {
                        vec![
                            l.date,
                            l.key_id.map(String::from).unwrap_or_default(),
                            l.endpoint,
                            l.queries.to_string(),
                            l.charged.to_string(),
                        ]
                    })
                    .collect(),
            )?),
        }))
    }

    /// The account's ledger of the last 90 days, newest first.
    #[oai(path = "/ledger", method = "get", operation_id = "accountLedger")]
    async fn ledger(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<LedgerBody>, Failed<Read>> {
        let account = signed.0.account();
        let since = now_unix() - 90 * 86_400;
        let mut entries = dash
            .admin(
                move |mut admin| async move { admin.ledger_entries(&account, Some(since)).await },
            )
            .await?;
        entries.reverse();
        Ok(Json(LedgerBody {
            entries: entries
                .into_iter()
                .map(|e| LedgerEntryBody {
                    at: e.at,
                    kind: e.kind.as_str().to_owned(),
                    amount: e.amount.to_usd(),
                    balance_after: e.balance_after.to_usd(),
                    queries: e.queries,
                    endpoint: e.endpoint,
                    note: e.note,
                })
                .collect(),
        }))
    }
}
