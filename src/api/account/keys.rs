//! `/account/api/keys`: the keys of the signed-in account, as its owner manages them
//! (list, create, rename, revoke, roll), named with the CLI's field names.

use std::sync::Arc;
use std::time::SystemTime;

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};

use super::Dashboard;
use super::answers::{Failed, KeyRename, KeyRevoke, KeyRoll, NewKey, Read};
use super::extract::{Body, Changing, DashboardBody, Recent, Signed};
use super::shared::refused;
use crate::accounts::{AccountError, KeyLine};
use crate::api::{ApiError, ApiTags};
use crate::domain::api_key::{Budget, DEFAULT_PER_IP_MINUTE, KeyKind, Publishable};
use crate::domain::dashboard::{self, DashboardRefused};
use crate::domain::ids::KeyId;
use crate::domain::origin::OriginPattern;

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
    /// When it was last used, to the minute (`2026-11-28T21:04:00Z`): when a flush wrote
    /// its last charge, within a second of the request. `null` if never.
    #[oai(rename = "lastUsedAt")]
    pub last_used_at: Option<String>,
    /// Its billed queries in the last 30 UTC days, today included (a bulk request counts
    /// its records).
    #[oai(rename = "queriesLast30Days")]
    pub queries_last_30_days: u64,
    /// The key itself: only when it was just made.
    #[oai(rename = "apiKey", skip_serializing_if_is_none)]
    pub api_key: Option<String>,
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
            key_id: k.key_id.to_string(),
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
            last_used_at: k.last_used_at.clone(),
            queries_last_30_days: k.queries_30d,
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

#[derive(ApiResponse)]
pub enum Created {
    /// The key, with `apiKey` shown this once.
    #[oai(status = 201)]
    Created(Json<KeyBody>),
}

/// The account's key `key_id` as listed now (after a change).
fn listed(keys: &[KeyLine], key_id: &KeyId) -> Result<KeyBody, ApiError> {
    keys.iter()
        .find(|k| k.key_id == *key_id)
        .map(KeyBody::of)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("key {key_id} is not listed")))
}

/// `/account/api/keys` and a key's operations.
pub struct KeysApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl KeysApi {
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
        changing: Recent,
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
        let key_id = KeyId::new(key_id.0);
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
        changing: Recent,
        key_id: Path<String>,
    ) -> Result<Json<RevokedBody>, Failed<KeyRevoke>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let key_id = KeyId::new(key_id.0);
        let shown = key_id.to_string();
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
        changing: Recent,
        key_id: Path<String>,
        body: Body<RollRequest>,
    ) -> Result<Created, Failed<KeyRoll>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let hours = body.0.grace_hours.unwrap_or(24);
        let grace = dashboard::grace_secs(hours).map_err(refused)?;
        let now = SystemTime::now();
        let ends = crate::domain::date::unix_secs(now) + grace;
        let key_id = KeyId::new(key_id.0);
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
}
