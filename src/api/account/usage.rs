//! `/account/api/usage` and `/account/api/ledger`: what the signed-in account was
//! charged, per UTC day and operation, and its ledger, a page at a time.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::answers::{Failed, PagedRead, UsageRead};
use super::extract::Signed;
use super::shared::{Format, JsonOrCsv, Listing, csv, next_cursor, paging};
use super::{Dashboard, now_unix};
use crate::api::ApiTags;
use crate::db::admin::{LedgerQuery, UsageQuery};
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
    /// Newest first.
    pub entries: Vec<LedgerEntryBody>,
    /// The `cursor` of the next (older) page; `null` on the last page.
    #[oai(rename = "nextCursor")]
    pub next_cursor: Option<String>,
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

    /// The account's ledger, newest first, a page at a time.
    #[oai(path = "/ledger", method = "get", operation_id = "accountLedger")]
    async fn ledger(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
        /// Entries in the page (1 to 500; default 100).
        #[oai(validator(minimum(value = "1"), maximum(value = "500")))]
        limit: Query<Option<u32>>,
        /// Where the page starts: a `nextCursor` this operation answered (the first page
        /// without it).
        cursor: Query<Option<String>>,
    ) -> Result<Json<LedgerBody>, Failed<PagedRead>> {
        let account = signed.0.account();
        let query = LedgerQuery {
            since: None,
            paging: paging(limit.0, cursor.0)?,
        };
        let page = dash
            .admin(move |mut admin| async move { admin.ledger_entries(&account, &query).await })
            .await?;
        Ok(Json(LedgerBody {
            next_cursor: next_cursor(page.next),
            entries: page
                .entries
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
