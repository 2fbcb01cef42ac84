//! `/account/api/*`: the JSON API under the dashboard's page. Without a live session:
//! 401 `Not signed in`; a change without the session's `X-CSRF-Token` or from another
//! `Origin`: 403, nothing changed. Keys are named with the CLI's field names.

use std::sync::Arc;
use std::time::SystemTime;

use poem::http::{StatusCode, header};
use poem::web::{Data, Path, Query};
use poem::{Body, IntoResponse, Request, Response, Route, delete, get, handler, post, put};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Dashboard, now_unix};
use crate::api::ApiError;
use crate::db::admin::{AccountError, KeyLine};
use crate::domain::admin::LimitsChange;
use crate::domain::api_key::{DEFAULT_PER_IP_MINUTE, Publishable};
use crate::domain::dashboard;
use crate::domain::origin::OriginPattern;
use crate::domain::rate_limit::Limits;

pub(super) fn api() -> Route {
    Route::new()
        .at("/me", get(me))
        .at("/keys", get(keys).post(create_key))
        .at("/keys/:key_id", delete(revoke_key).patch(rename_key))
        .at("/keys/:key_id/roll", post(roll_key))
        .at("/limits", put(set_limits))
        .at("/usage", get(usage))
        .at("/ledger", get(ledger))
        .at("/sessions", get(sessions))
        .at("/sessions/:session_id", delete(end_session))
        .at("/identities/unlink", post(unlink))
        .at("/audit", get(audit))
        .at("/signout", post(signout))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(body.to_string())
}

fn ok(body: Value) -> Result<Response, ApiError> {
    Ok(json_response(StatusCode::OK, &body))
}

/// The request's JSON object, or 400.
async fn object(body: Body) -> Result<serde_json::Map<String, Value>, ApiError> {
    let bytes = body.into_bytes_limit(64 * 1024).await.map_err(|_| {
        ApiError::bad_request("Request body must be a JSON object of at most 64 KiB")
    })?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ApiError::bad_request("Request body must be a JSON object")),
    }
}

fn limits_json(l: Limits) -> Value {
    json!({"perMinute": l.per_minute, "perHour": l.per_hour, "perDay": l.per_day})
}

fn key_json(k: &KeyLine) -> Value {
    let mut v = json!({
        "keyId": k.key_id,
        "name": k.name,
        "kind": if k.publishable.is_some() { "publishable" } else { "secret" },
        "hint": k.hint,
        "createdAt": k.created_at,
        "revoked": k.revoked_at.is_some(),
        "revokedAt": k.revoked_at,
        "expiresAt": k.expires_at,
    });
    if let Some(p) = &k.publishable {
        v["origins"] = json!(p.origins.iter().map(|o| o.to_string()).collect::<Vec<_>>());
        v["perIpMinute"] = json!(p.per_ip_minute);
    }
    v
}

fn unix_rfc3339(secs: i64) -> String {
    crate::domain::date::rfc3339(secs)
}

/// `GET /account/api/me`.
#[handler]
async fn me(req: &Request, dash: Data<&Arc<Dashboard>>) -> Result<Response, ApiError> {
    let session = dash.session(req).await?;
    let account = session.account();
    let (view, identities, providers) = dash
        .admin(async move |admin| {
            Ok::<_, AccountError>((
                admin.show(&account).await?,
                admin.identities(&account).await?,
                admin.providers().await?,
            ))
        })
        .await?;
    ok(json!({
        "accountId": view.account_id,
        "name": view.name,
        "balance": view.balance.to_json_number(),
        "queriesLeft": view.balance.get() / crate::domain::money::PRICE_PER_QUERY.get(),
        "limits": limits_json(view.limits),
        "identities": identities.iter().map(|i| json!({
            "provider": i.provider,
            "issuer": i.issuer,
            "subject": i.subject,
            "email": i.email,
            "linkedAt": unix_rfc3339(i.created_at),
        })).collect::<Vec<_>>(),
        "providers": providers.iter().map(|p| &p.name).collect::<Vec<_>>(),
        "sessionId": session.row.public_id,
        "csrfToken": session.row.csrf,
    }))
}

/// `GET /account/api/keys`: every key of the account, oldest first; never a secret.
#[handler]
async fn keys(req: &Request, dash: Data<&Arc<Dashboard>>) -> Result<Response, ApiError> {
    let account = dash.session(req).await?.account();
    let keys = dash
        .admin(async move |admin| admin.keys(&account).await)
        .await?;
    ok(json!({"keys": keys.iter().map(key_json).collect::<Vec<_>>()}))
}

fn text_field<'a>(
    body: &'a serde_json::Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(format!("Invalid '{name}'"))),
    }
}

/// `POST /account/api/keys` `{"name", "kind": "secret"|"publishable", "origins",
/// "perIpMinute"}`: 201 with the key, shown this once.
#[handler]
async fn create_key(
    req: &Request,
    body: Body,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let body = object(body).await?;
    let name = dashboard::key_name(text_field(&body, "name")?)
        .map_err(|why| ApiError::bad_request(why.to_string()))?;
    let publishable = match text_field(&body, "kind")?.unwrap_or("secret") {
        "secret" => None,
        "publishable" => {
            let origins = match body.get("origins") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|o| {
                        o.as_str()
                            .ok_or_else(|| ApiError::bad_request("Invalid 'origins'"))
                            .and_then(|o| {
                                OriginPattern::parse(o)
                                    .map_err(|e| ApiError::bad_request(e.to_string()))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                None | Some(Value::Null) => Vec::new(),
                Some(_) => return Err(ApiError::bad_request("Invalid 'origins'")),
            };
            let per_ip = match body.get("perIpMinute") {
                None | Some(Value::Null) => DEFAULT_PER_IP_MINUTE,
                Some(v) => v
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| ApiError::bad_request("Invalid 'perIpMinute'"))?,
            };
            Some(
                Publishable::new(origins, per_ip)
                    .map_err(|why| ApiError::bad_request(why.to_string()))?,
            )
        }
        _ => return Err(ApiError::bad_request("Invalid 'kind'")),
    };
    let now = SystemTime::now();
    let (key, listed) = dash
        .admin_as(actor, async move |admin| {
            let key = admin
                .create_key(&account, publishable.as_ref(), name.as_deref(), now)
                .await?;
            let listed = admin.keys(&account).await?;
            Ok::<_, AccountError>((key, listed))
        })
        .await?;
    let line = listed
        .iter()
        .find(|k| k.key_id == key.key_id)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("the new key is not listed")))?;
    let mut body = key_json(line);
    body["apiKey"] = json!(key.api_key.expose());
    Ok(json_response(StatusCode::CREATED, &body))
}

/// `PATCH /account/api/keys/{keyId}` `{"name"}`.
#[handler]
async fn rename_key(
    req: &Request,
    Path(key_id): Path<String>,
    body: Body,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let body = object(body).await?;
    let name = dashboard::key_name(text_field(&body, "name")?)
        .map_err(|why| ApiError::bad_request(why.to_string()))?;
    let listed = dash
        .admin_as(actor, async move |admin| {
            admin.rename_key(&account, &key_id, name.as_deref()).await?;
            let listed = admin.keys(&account).await?;
            Ok::<_, AccountError>(listed.into_iter().find(|k| k.key_id == key_id))
        })
        .await?;
    match listed {
        Some(line) => ok(key_json(&line)),
        None => Err(ApiError::internal(anyhow::anyhow!(
            "a renamed key is not listed"
        ))),
    }
}

/// `POST /account/api/keys/{keyId}/roll` `{"graceHours": 1..168}`: 201 with a new key
/// of the same kind, rules and name (shown this once); the old one keeps working for the
/// grace, then is refused on every node.
#[handler]
async fn roll_key(
    req: &Request,
    Path(key_id): Path<String>,
    body: Body,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let body = object(body).await?;
    let hours = match body.get("graceHours") {
        None | Some(Value::Null) => 24,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| ApiError::bad_request("Invalid 'graceHours'"))?,
    };
    let grace =
        dashboard::grace_secs(hours).map_err(|why| ApiError::bad_request(why.to_string()))?;
    let now = SystemTime::now();
    let ends = crate::db::rows::unix_secs(now) + grace;
    let (key, listed) = dash
        .admin_as(actor, async move |admin| {
            let key = admin.roll_key(&account, &key_id, ends, now).await?;
            let listed = admin.keys(&account).await?;
            Ok::<_, AccountError>((key, listed))
        })
        .await?;
    let line = listed
        .iter()
        .find(|k| k.key_id == key.key_id)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("the rolled key is not listed")))?;
    let mut body = key_json(line);
    body["apiKey"] = json!(key.api_key.expose());
    Ok(json_response(StatusCode::CREATED, &body))
}

/// `DELETE /account/api/keys/{keyId}`: revoked on every node from the next request.
#[handler]
async fn revoke_key(
    req: &Request,
    Path(key_id): Path<String>,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let shown = key_id.clone();
    dash.admin_as(actor, async move |admin| {
        admin
            .revoke_own_key(&account, &key_id, SystemTime::now())
            .await
    })
    .await?;
    ok(json!({"keyId": shown, "revoked": true}))
}

/// `PUT /account/api/limits` `{"perMinute", "perHour", "perDay"}`: each a count of
/// queries, or `null` for no limit on that window.
#[handler]
async fn set_limits(
    req: &Request,
    body: Body,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let body = object(body).await?;
    let window = |name: &str| match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("Invalid '{name}'"))),
    };
    let limits = Limits {
        per_minute: window("perMinute")?,
        per_hour: window("perHour")?,
        per_day: window("perDay")?,
    };
    let change =
        LimitsChange::exactly(limits).map_err(|why| ApiError::bad_request(why.to_string()))?;
    let limits = dash
        .admin_as(actor, async move |admin| {
            Ok(admin.set_limits(&account, change).await?)
        })
        .await?;
    ok(json!({"limits": limits_json(limits)}))
}

#[derive(Deserialize)]
struct UsageQuery {
    days: Option<u32>,
    format: Option<String>,
}

/// `GET /account/api/usage?days=30&format=json|csv`: billed queries and USD per UTC day
/// and endpoint, oldest first.
#[handler]
async fn usage(
    req: &Request,
    Query(query): Query<UsageQuery>,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let account = dash.session(req).await?.account();
    let days = query.days.unwrap_or(30).clamp(1, 366);
    let now = now_unix();
    let wanted = account.clone();
    let lines = dash
        .admin(async move |admin| Ok(admin.usage(days, now).await?))
        .await?
        .into_iter()
        .filter(|l| l.account_id == wanted)
        .collect::<Vec<_>>();
    match query.format.as_deref().unwrap_or("json") {
        "json" => ok(json!({
            "accountId": account,
            "days": days,
            "usage": lines.iter().map(|l| json!({
                "date": l.date,
                "endpoint": l.endpoint,
                "queries": l.queries,
                "charged": l.charged.to_json_number(),
            })).collect::<Vec<_>>(),
        })),
        "csv" => {
            let mut out = csv_writer();
            out.write_record(["date", "endpoint", "queries", "charged_usd"])
                .map_err(|e| ApiError::internal(e.into()))?;
            for l in &lines {
                out.write_record([
                    l.date.clone(),
                    l.endpoint.clone(),
                    l.queries.to_string(),
                    l.charged.to_string(),
                ])
                .map_err(|e| ApiError::internal(e.into()))?;
            }
            csv_response(out, "postal-usage.csv")
        }
        _ => Err(ApiError::bad_request("Invalid 'format'")),
    }
}

/// `GET /account/api/ledger`: the account's ledger of the last 90 days, newest first.
#[handler]
async fn ledger(req: &Request, dash: Data<&Arc<Dashboard>>) -> Result<Response, ApiError> {
    let account = dash.session(req).await?.account();
    let since = now_unix() - 90 * 86_400;
    let mut entries = dash
        .admin(async move |admin| admin.ledger_entries(&account, Some(since)).await)
        .await?;
    entries.reverse();
    ok(json!({"entries": entries.iter().map(|e| json!({
        "at": e.at,
        "kind": e.kind,
        "amount": e.amount.to_json_number(),
        "balanceAfter": e.balance_after.to_json_number(),
        "queries": e.queries,
        "endpoint": e.endpoint,
        "note": e.note,
    })).collect::<Vec<_>>()}))
}

#[derive(Deserialize)]
struct FormatQuery {
    format: Option<String>,
}

/// `GET /account/api/audit?format=json|csv`: who changed what of the account (keys,
/// limits, money, sign-ins), from the dashboard or the operator's CLI; newest first.
#[handler]
async fn audit(
    req: &Request,
    Query(query): Query<FormatQuery>,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let account = dash.session(req).await?.account();
    let entries = dash
        .admin(async move |admin| admin.audit_entries(&account).await)
        .await?;
    match query.format.as_deref().unwrap_or("json") {
        "json" => ok(json!({"entries": entries.iter().map(|e| json!({
            "at": unix_rfc3339(e.at),
            "actor": e.actor,
            "action": e.action,
            "detail": e.detail,
        })).collect::<Vec<_>>()})),
        "csv" => {
            let mut out = csv_writer();
            out.write_record(["at", "actor", "action", "detail"])
                .map_err(|e| ApiError::internal(e.into()))?;
            for e in &entries {
                out.write_record([unix_rfc3339(e.at).as_str(), &e.actor, &e.action, &e.detail])
                    .map_err(|e| ApiError::internal(e.into()))?;
            }
            csv_response(out, "postal-audit.csv")
        }
        _ => Err(ApiError::bad_request("Invalid 'format'")),
    }
}

fn csv_writer() -> csv::Writer<Vec<u8>> {
    csv::Writer::from_writer(Vec::new())
}

fn csv_response(out: csv::Writer<Vec<u8>>, file: &str) -> Result<Response, ApiError> {
    let bytes = out
        .into_inner()
        .map_err(|e| ApiError::internal(anyhow::anyhow!("{e}")))?;
    Ok(Response::builder()
        .content_type("text/csv; charset=utf-8")
        .header(
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{file}\""),
        )
        .header(header::CACHE_CONTROL, "no-store")
        .body(bytes))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionJson {
    session_id: String,
    signed_in_at: String,
    last_seen_at: String,
    client: Option<String>,
    current: bool,
}

/// `GET /account/api/sessions`: the account's live sessions, newest first.
#[handler]
async fn sessions(req: &Request, dash: Data<&Arc<Dashboard>>) -> Result<Response, ApiError> {
    let session = dash.session(req).await?;
    let (account, current) = (session.account(), session.row.public_id.clone());
    let now = now_unix();
    let list = dash
        .admin(async move |admin| admin.sessions(&account, now).await)
        .await?;
    let list = list
        .into_iter()
        .map(|s| SessionJson {
            current: s.session_id == current,
            session_id: s.session_id,
            signed_in_at: unix_rfc3339(s.created_at),
            last_seen_at: unix_rfc3339(s.seen_at),
            client: s.client,
        })
        .collect::<Vec<_>>();
    ok(json!({ "sessions": list }))
}

/// `DELETE /account/api/sessions/{sessionId}`: ends one of the account's sessions.
#[handler]
async fn end_session(
    req: &Request,
    Path(session_id): Path<String>,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let shown = session_id.clone();
    let now = now_unix();
    let ended = dash
        .admin_as(actor, async move |admin| {
            admin.end_session(&account, &session_id, now).await
        })
        .await?;
    match ended {
        true => ok(json!({"sessionId": shown, "ended": true})),
        false => Err(ApiError::not_found(&format!("no session {shown:?}"))),
    }
}

/// `POST /account/api/identities/unlink` `{"issuer", "subject"}`: the account keeps at
/// least one identity; the identity unlinked cannot sign in again (nor make a new account).
#[handler]
async fn unlink(
    req: &Request,
    body: Body,
    dash: Data<&Arc<Dashboard>>,
) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, actor) = (session.account(), session.actor());
    let body = object(body).await?;
    let issuer = text_field(&body, "issuer")?.unwrap_or("").to_owned();
    let subject = text_field(&body, "subject")?.unwrap_or("").to_owned();
    let now = now_unix();
    dash.admin_as(actor, async move |admin| {
        admin.unlink(&account, &issuer, &subject, now).await
    })
    .await?;
    ok(json!({"unlinked": true}))
}

/// `POST /account/api/signout`: ends this session and deletes its cookie.
#[handler]
async fn signout(req: &Request, dash: Data<&Arc<Dashboard>>) -> Result<Response, ApiError> {
    let session = dash.changing(req).await?;
    let (account, id) = (session.account(), session.row.public_id.clone());
    let now = now_unix();
    dash.admin_as(session.actor(), async move |admin| {
        admin.end_session(&account, &id, now).await
    })
    .await?;
    let mut response = json_response(StatusCode::OK, &json!({"signedOut": true}));
    response.headers_mut().append(
        header::SET_COOKIE,
        dash.set_cookie(dash.cookies().session, "", 0, "/"),
    );
    Ok(response.into_response())
}
