//! `/account/api/*`: the JSON API under the dashboard's page, documented in the OpenAPI
//! document under its own tag with the session cookie as its security scheme. Without a
//! live session: 401 `Not signed in`; a change without the session's `X-CSRF-Token` or
//! from another `Origin`: 403, nothing changed (`extract`). Keys are named with the CLI's
//! field names.

use std::sync::Arc;
use std::time::SystemTime;

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::{Json, PlainText};
use poem_openapi::{ApiResponse, Enum, Object, OpenApi, ResponseContent};
use secrecy::ExposeSecret;

use super::answers::{
    EndSession, Failed, KeyRename, KeyRevoke, KeyRoll, NewKey, Read, ReadQuery, SetLimits, SignOut,
    Unlink,
};
use super::extract::{Body, Changing, DashboardBody, Signed};
use super::{Dashboard, now_unix};
use crate::accounts::{AccountError, KeyLine};
use crate::api::{ApiError, ApiTags};
use crate::domain::admin::{LimitsChange, Refused};
use crate::domain::api_key::{Budget, DEFAULT_PER_IP_MINUTE, KeyKind, Publishable};
use crate::domain::dashboard::{self, DashboardRefused};
use crate::domain::origin::OriginPattern;
use crate::domain::rate_limit::Limits;

/// The dashboard's documented operations (their handlers read the `Dashboard` from the
/// request data).
pub struct AccountApi;

/// The limits of an account: queries per UTC minute, hour and day; `null` = none.
#[derive(Debug, Object)]
pub struct LimitsBody {
    #[oai(rename = "perMinute")]
    pub per_minute: Option<u64>,
    #[oai(rename = "perHour")]
    pub per_hour: Option<u64>,
    #[oai(rename = "perDay")]
    pub per_day: Option<u64>,
}

impl From<Limits> for LimitsBody {
    fn from(l: Limits) -> Self {
        LimitsBody {
            per_minute: l.per_minute,
            per_hour: l.per_hour,
            per_day: l.per_day,
        }
    }
}

/// A provider identity linked to the account.
#[derive(Debug, Object)]
pub struct IdentityBody {
    /// The name of the provider it signed in with.
    pub provider: String,
    pub issuer: String,
    pub subject: String,
    /// Only when the provider said it is verified.
    pub email: Option<String>,
    #[oai(rename = "linkedAt")]
    pub linked_at: String,
}

/// Who is signed in, their balance and limits, and the CSRF token of their changes.
/// (`Debug` by hand: it leaves out the token.)
#[derive(Object)]
pub struct MeBody {
    #[oai(rename = "accountId")]
    pub account_id: String,
    pub name: Option<String>,
    /// USD.
    pub balance: f64,
    /// Queries the balance pays for at 0.000028 USD.
    #[oai(rename = "queriesLeft")]
    pub queries_left: i64,
    pub limits: LimitsBody,
    pub identities: Vec<IdentityBody>,
    /// The providers offered (`/account/link/{name}` links one).
    pub providers: Vec<String>,
    #[oai(rename = "sessionId")]
    pub session_id: String,
    /// Send it as `X-CSRF-Token` with every change.
    #[oai(rename = "csrfToken")]
    pub csrf_token: String,
}

/// A key of the account; `apiKey` only in the answer that made it (shown once).
/// (`Debug` by hand: it leaves out the key.)
#[derive(Object)]
pub struct KeyBody {
    #[oai(rename = "keyId")]
    pub key_id: String,
    pub name: Option<String>,
    /// `secret` or `publishable`.
    pub kind: String,
    /// Its first characters (`sk_AbCd`).
    pub hint: Option<String>,
    #[oai(rename = "createdAt")]
    pub created_at: String,
    pub revoked: bool,
    #[oai(rename = "revokedAt")]
    pub revoked_at: Option<String>,
    /// A rolled key in its grace: when it stops working.
    #[oai(rename = "expiresAt")]
    pub expires_at: Option<String>,
    /// A publishable key's origins.
    #[oai(skip_serializing_if_is_none)]
    pub origins: Option<Vec<String>>,
    /// A publishable key's requests a minute per client IP.
    #[oai(rename = "perIpMinute", skip_serializing_if_is_none)]
    pub per_ip_minute: Option<u32>,
    /// A publishable key's budget: its requests in a UTC minute over every client IP.
    #[oai(rename = "maxPerMinute", skip_serializing_if_is_none)]
    pub max_per_minute: Option<u32>,
    /// A publishable key's budget: its requests in a UTC day over every client IP.
    #[oai(rename = "maxPerDay", skip_serializing_if_is_none)]
    pub max_per_day: Option<u32>,
    /// The key itself: only when it was just made.
    #[oai(rename = "apiKey", skip_serializing_if_is_none)]
    pub api_key: Option<String>,
}

impl std::fmt::Debug for MeBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeBody")
            .field("account_id", &self.account_id)
            .field("name", &self.name)
            .field("balance", &self.balance)
            .field("queries_left", &self.queries_left)
            .field("limits", &self.limits)
            .field("identities", &self.identities)
            .field("providers", &self.providers)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for KeyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyBody")
            .field("key_id", &self.key_id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("hint", &self.hint)
            .field("created_at", &self.created_at)
            .field("revoked_at", &self.revoked_at)
            .field("expires_at", &self.expires_at)
            .field("origins", &self.origins)
            .field("per_ip_minute", &self.per_ip_minute)
            .field("max_per_minute", &self.max_per_minute)
            .field("max_per_day", &self.max_per_day)
            .finish_non_exhaustive()
    }
}

impl KeyBody {
    fn of(k: &KeyLine) -> KeyBody {
        KeyBody {
            key_id: k.key_id.clone(),
            name: k.name.clone(),
            kind: KeyKind::of(k.publishable.as_ref()).as_str().to_owned(),
            hint: k.hint.clone(),
            created_at: k.created_at.clone(),
            revoked: k.revoked_at.is_some(),
            revoked_at: k.revoked_at.clone(),
            expires_at: k.expires_at.clone(),
            origins: k
                .publishable
                .as_ref()
                .map(|p| p.origins.iter().map(|o| o.to_string()).collect()),
            per_ip_minute: k.publishable.as_ref().map(|p| p.per_ip_minute),
            max_per_minute: k.publishable.as_ref().and_then(|p| p.budget.per_minute),
            max_per_day: k.publishable.as_ref().and_then(|p| p.budget.per_day),
            api_key: None,
        }
    }
}

#[derive(Debug, Object)]
pub struct KeysBody {
    pub keys: Vec<KeyBody>,
}

/// The kind of a new key.
#[derive(Debug, Enum)]
#[oai(rename_all = "lowercase")]
pub enum NewKeyKind {
    Secret,
    Publishable,
}

/// A new key: secret (servers) or publishable (web pages, bound to `origins`).
#[derive(Debug, Object)]
pub struct NewKeyRequest {
    /// 1 to 100 characters.
    #[oai(validator(max_length = 100))]
    pub name: Option<String>,
    // Default `secret`. (A plain comment: a described `$ref` becomes an `allOf`.)
    pub kind: Option<NewKeyKind>,
    /// A publishable key's origins: `scheme://host[:port]`, `*.` for subdomains.
    pub origins: Option<Vec<String>>,
    /// A publishable key's requests a minute per client IP (default 60).
    #[oai(rename = "perIpMinute", validator(minimum(value = "1")))]
    pub per_ip_minute: Option<u32>,
    /// A publishable key's requests in a UTC minute over every client IP (default: none).
    #[oai(rename = "maxPerMinute", validator(minimum(value = "1")))]
    pub max_per_minute: Option<u32>,
    /// A publishable key's requests in a UTC day over every client IP (default: none).
    #[oai(rename = "maxPerDay", validator(minimum(value = "1")))]
    pub max_per_day: Option<u32>,
}

impl DashboardBody for NewKeyRequest {
    fn out_of_bounds(field: &str) -> ApiError {
        key_name_out_of_bounds(field)
    }
}

/// A key name over 100 characters: the CLI's text.
fn key_name_out_of_bounds(field: &str) -> ApiError {
    match field {
        "name" => refused(DashboardRefused::KeyName),
        _ => super::extract::invalid(field),
    }
}

#[derive(Debug, Object)]
pub struct RenameRequest {
    /// 1 to 100 characters; empty or `null` removes it.
    #[oai(validator(max_length = 100))]
    pub name: Option<String>,
}

impl DashboardBody for RenameRequest {
    fn out_of_bounds(field: &str) -> ApiError {
        key_name_out_of_bounds(field)
    }
}

#[derive(Debug, Object)]
pub struct RollRequest {
    /// How long the old key keeps working: 1 to 168 hours (default 24).
    #[oai(
        rename = "graceHours",
        validator(minimum(value = "1"), maximum(value = "168"))
    )]
    pub grace_hours: Option<u64>,
}

impl DashboardBody for RollRequest {
    /// `graceHours` out of 1 to 168: the CLI's text.
    fn out_of_bounds(_field: &str) -> ApiError {
        refused(DashboardRefused::Grace)
    }
}

#[derive(Debug, Object)]
pub struct RevokedBody {
    #[oai(rename = "keyId")]
    pub key_id: String,
    pub revoked: bool,
}

/// Queries per UTC minute, hour and day; `null` or absent = no limit on that window.
#[derive(Debug, Object)]
pub struct LimitsRequest {
    #[oai(rename = "perMinute", validator(minimum(value = "1")))]
    pub per_minute: Option<u64>,
    #[oai(rename = "perHour", validator(minimum(value = "1")))]
    pub per_hour: Option<u64>,
    #[oai(rename = "perDay", validator(minimum(value = "1")))]
    pub per_day: Option<u64>,
}

impl DashboardBody for LimitsRequest {
    /// A limit of 0: the CLI's text.
    fn out_of_bounds(_field: &str) -> ApiError {
        refused(Refused::ZeroLimit)
    }
}

#[derive(Debug, Object)]
pub struct LimitsAnswer {
    pub limits: LimitsBody,
}

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

#[derive(Debug, Object)]
pub struct SessionBody {
    #[oai(rename = "sessionId")]
    pub session_id: String,
    #[oai(rename = "signedInAt")]
    pub signed_in_at: String,
    #[oai(rename = "lastSeenAt")]
    pub last_seen_at: String,
    /// The browser's User-Agent.
    pub client: Option<String>,
    /// The session of this request.
    pub current: bool,
}

#[derive(Debug, Object)]
pub struct SessionsBody {
    pub sessions: Vec<SessionBody>,
}

#[derive(Debug, Object)]
pub struct EndedBody {
    #[oai(rename = "sessionId")]
    pub session_id: String,
    pub ended: bool,
}

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

#[derive(Debug, Object)]
pub struct UnlinkRequest {
    pub issuer: String,
    pub subject: String,
}

impl DashboardBody for UnlinkRequest {}

#[derive(Debug, Object)]
pub struct UnlinkedBody {
    pub unlinked: bool,
}

#[derive(Debug, Object)]
pub struct SignedOutBody {
    #[oai(rename = "signedOut")]
    pub signed_out: bool,
}

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

#[derive(ApiResponse)]
pub enum Created {
    /// The key, with `apiKey` shown this once.
    #[oai(status = 201)]
    Created(Json<KeyBody>),
}

/// The format of a listing: `json` (default) or `csv`.
#[derive(Debug, Enum, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "lowercase")]
pub enum Format {
    Json,
    Csv,
}

fn refused(why: impl ToString) -> ApiError {
    ApiError::bad_request(why.to_string())
}

fn rfc3339(secs: i64) -> String {
    crate::domain::date::rfc3339(secs)
}

fn csv(header: &[&str], rows: Vec<Vec<String>>) -> Result<PlainText<String>, ApiError> {
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

/// The account's key `key_id` as listed now (after a change).
fn listed(keys: &[KeyLine], key_id: &str) -> Result<KeyBody, ApiError> {
    keys.iter()
        .find(|k| k.key_id == key_id)
        .map(KeyBody::of)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("key {key_id} is not listed")))
}

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl AccountApi {
    /// Who is signed in: account, balance, limits, identities, and the CSRF token.
    #[oai(path = "/me", method = "get", operation_id = "accountMe")]
    async fn me(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<MeBody>, Failed<Read>> {
        let session = signed.0;
        let account = session.account();
        let (view, identities, providers) = dash
            .admin(move |mut admin| async move {
                Ok::<_, AccountError>((
                    admin.show(&account).await?,
                    admin.identities(&account).await?,
                    admin.providers().await?,
                ))
            })
            .await?;
        Ok(Json(MeBody {
            account_id: view.account_id,
            name: view.name,
            balance: view.balance.to_usd(),
            queries_left: view.balance.get() / crate::domain::money::PRICE_PER_QUERY.get(),
            limits: view.limits.into(),
            identities: identities
                .into_iter()
                .map(|i| IdentityBody {
                    provider: i.provider,
                    issuer: i.issuer,
                    subject: i.subject,
                    email: i.email,
                    linked_at: rfc3339(i.created_at),
                })
                .collect(),
            providers: providers.into_iter().map(|p| p.name).collect(),
            session_id: session.row.public_id,
            csrf_token: session.row.csrf.expose_secret().to_owned(),
        }))
    }

    /// Every key of the account, oldest first; never a secret.
    #[oai(path = "/keys", method = "get", operation_id = "listKeys")]
    async fn keys(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<KeysBody>, Failed<Read>> {
        let account = signed.0.account();
        let keys = dash
            .admin(move |mut admin| async move { admin.keys(&account).await })
            .await?;
        Ok(Json(KeysBody {
            keys: keys.iter().map(KeyBody::of).collect(),
        }))
    }

    /// A new key, shown this once; at most 20 live keys an account.
    #[oai(path = "/keys", method = "post", operation_id = "createKey")]
    async fn create_key(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        body: Body<NewKeyRequest>,
    ) -> Result<Created, Failed<NewKey>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let request = body.0;
        let name = dashboard::key_name(request.name.as_deref()).map_err(refused)?;
        let publishable = match request.kind.unwrap_or(NewKeyKind::Secret) {
            NewKeyKind::Secret => None,
            NewKeyKind::Publishable => {
                let origins = request
                    .origins
                    .unwrap_or_default()
                    .iter()
                    .map(|o| OriginPattern::parse(o).map_err(refused))
                    .collect::<Result<Vec<_>, _>>()?;
                let per_ip = request.per_ip_minute.unwrap_or(DEFAULT_PER_IP_MINUTE);
                let budget = Budget {
                    per_minute: request.max_per_minute,
                    per_day: request.max_per_day,
                };
                Some(Publishable::new(origins, per_ip, budget).map_err(refused)?)
            }
        };
        let now = SystemTime::now();
        let (key, keys) = dash
            .admin_as(actor, move |mut admin| async move {
                let key = admin
                    .create_key(&account, publishable.as_ref(), name.as_deref(), now)
                    .await?;
                Ok::<_, AccountError>((key, admin.keys(&account).await?))
            })
            .await?;
        let mut shown = listed(&keys, &key.key_id)?;
        shown.api_key = Some(key.api_key.expose().to_owned());
        Ok(Created::Created(Json(shown)))
    }

    /// Names (or unnames) a key.
    #[oai(path = "/keys/:key_id", method = "patch", operation_id = "renameKey")]
    async fn rename_key(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        key_id: Path<String>,
        body: Body<RenameRequest>,
    ) -> Result<Json<KeyBody>, Failed<KeyRename>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let name = dashboard::key_name(body.0.name.as_deref()).map_err(refused)?;
        let key_id = key_id.0;
        let wanted = key_id.clone();
        let keys = dash
            .admin_as(actor, move |mut admin| async move {
                admin.rename_key(&account, &key_id, name.as_deref()).await?;
                admin.keys(&account).await
            })
            .await?;
        Ok(Json(listed(&keys, &wanted)?))
    }

    /// Revokes a key: refused (401) from the next request on, on every node. A key of
    /// another account is 404, as one that does not exist.
    #[oai(path = "/keys/:key_id", method = "delete", operation_id = "revokeKey")]
    async fn revoke_key(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        key_id: Path<String>,
    ) -> Result<Json<RevokedBody>, Failed<KeyRevoke>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let key_id = key_id.0;
        let shown = key_id.clone();
        dash.admin_as(actor, move |mut admin| async move {
            admin
                .revoke_own_key(&account, &key_id, SystemTime::now())
                .await
        })
        .await?;
        Ok(Json(RevokedBody {
            key_id: shown,
            revoked: true,
        }))
    }

    /// Rolls a key: a new key of the same kind, rules and name (shown once); the old one
    /// keeps working for the grace, then is refused on every node.
    #[oai(path = "/keys/:key_id/roll", method = "post", operation_id = "rollKey")]
    async fn roll_key(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        key_id: Path<String>,
        body: Body<RollRequest>,
    ) -> Result<Created, Failed<KeyRoll>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let hours = body.0.grace_hours.unwrap_or(24);
        let grace = dashboard::grace_secs(hours).map_err(refused)?;
        let now = SystemTime::now();
        let ends = crate::domain::date::unix_secs(now) + grace;
        let key_id = key_id.0;
        let (key, keys) = dash
            .admin_as(actor, move |mut admin| async move {
                let key = admin.roll_key(&account, &key_id, ends, now).await?;
                Ok::<_, AccountError>((key, admin.keys(&account).await?))
            })
            .await?;
        let mut shown = listed(&keys, &key.key_id)?;
        shown.api_key = Some(key.api_key.expose().to_owned());
        Ok(Created::Created(Json(shown)))
    }

    /// Sets the limits, all three at once (`null` = none); in force from the next request.
    #[oai(path = "/limits", method = "put", operation_id = "setLimits")]
    async fn set_limits(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        body: Body<LimitsRequest>,
    ) -> Result<Json<LimitsAnswer>, Failed<SetLimits>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let request = body.0;
        let limits = Limits {
            per_minute: request.per_minute,
            per_hour: request.per_hour,
            per_day: request.per_day,
        };
        let change = LimitsChange::exactly(limits).map_err(refused)?;
        let limits = dash
            .admin_as(actor, move |mut admin| async move {
                Ok(admin.set_limits(&account, change).await?)
            })
            .await?;
        Ok(Json(LimitsAnswer {
            limits: limits.into(),
        }))
    }

    /// Billed queries and USD per UTC day and operation, oldest first.
    #[oai(path = "/usage", method = "get", operation_id = "accountUsage")]
    async fn usage(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
        /// The last this many UTC days, today included (1 to 366; default 30).
        #[oai(validator(minimum(value = "1"), maximum(value = "366")))]
        days: Query<Option<u32>>,
        format: Query<Option<Format>>,
    ) -> Result<Listing<UsageBody>, Failed<ReadQuery>> {
        let account = signed.0.account();
        let days = days.0.unwrap_or(30);
        let now = now_unix();
        let wanted = account.clone();
        let lines = dash
            .admin(move |mut admin| async move { Ok(admin.usage(days, now).await?) })
            .await?
            .into_iter()
            .filter(|l| l.account_id == wanted)
            .collect::<Vec<_>>();
        Ok(Listing::Ok(match format.0.unwrap_or(Format::Json) {
            Format::Json => JsonOrCsv::Json(Json(UsageBody {
                account_id: account,
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
                &["date", "endpoint", "queries", "charged_usd"],
                lines
                    .into_iter()
                    .map(|l| {
                        vec![
                            l.date,
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

    /// The account's live sessions, newest first.
    #[oai(path = "/sessions", method = "get", operation_id = "listSessions")]
    async fn sessions(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<SessionsBody>, Failed<Read>> {
        let (account, current) = (signed.0.account(), signed.0.row.public_id.clone());
        let now = now_unix();
        let list = dash
            .admin(move |mut admin| async move { admin.sessions(&account, now).await })
            .await?;
        Ok(Json(SessionsBody {
            sessions: list
                .into_iter()
                .map(|s| SessionBody {
                    current: s.session_id == current,
                    session_id: s.session_id,
                    signed_in_at: rfc3339(s.created_at),
                    last_seen_at: rfc3339(s.seen_at),
                    client: s.client,
                })
                .collect(),
        }))
    }

    /// Ends one of the account's sessions.
    #[oai(
        path = "/sessions/:session_id",
        method = "delete",
        operation_id = "endSession"
    )]
    async fn end_session(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        session_id: Path<String>,
    ) -> Result<Json<EndedBody>, Failed<EndSession>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let session_id = session_id.0;
        let shown = session_id.clone();
        let now = now_unix();
        let ended = dash
            .admin_as(actor, move |mut admin| async move {
                admin.end_session(&account, &session_id, now).await
            })
            .await?;
        match ended {
            true => Ok(Json(EndedBody {
                session_id: shown,
                ended: true,
            })),
            false => Err(ApiError::not_found(&format!("no session {shown:?}")).into()),
        }
    }

    /// Unlinks an identity; the account keeps at least one, and an unlinked identity
    /// cannot sign in again (nor make a new account).
    #[oai(
        path = "/identities/unlink",
        method = "post",
        operation_id = "unlinkIdentity"
    )]
    async fn unlink(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        body: Body<UnlinkRequest>,
    ) -> Result<Json<UnlinkedBody>, Failed<Unlink>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let UnlinkRequest { issuer, subject } = body.0;
        let now = now_unix();
        dash.admin_as(actor, move |mut admin| async move {
            admin.unlink(&account, &issuer, &subject, now).await
        })
        .await?;
        Ok(Json(UnlinkedBody { unlinked: true }))
    }

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

    /// Ends this session and deletes its cookie.
    #[oai(path = "/signout", method = "post", operation_id = "signOut")]
    async fn signout(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
    ) -> Result<SignedOut, Failed<SignOut>> {
        let session = changing.0;
        let (account, id, actor) = (
            session.account(),
            session.row.public_id.clone(),
            session.actor(),
        );
        let now = now_unix();
        dash.admin_as(actor, move |mut admin| async move {
            admin.end_session(&account, &id, now).await
        })
        .await?;
        let cookie = dash.set_cookie(dash.cookies().session, "", 0, "/");
        Ok(SignedOut::Ok(
            Json(SignedOutBody { signed_out: true }),
            cookie.to_str().unwrap_or("").to_owned(),
        ))
    }
}

#[derive(ApiResponse)]
pub enum SignedOut {
    /// Signed out; the session cookie is deleted.
    #[oai(status = 200)]
    Ok(Json<SignedOutBody>, #[oai(header = "Set-Cookie")] String),
}
