//! The account dashboard (docs/account.md), HTTP only: customers sign in with an OpenID
//! Connect provider the operator configured (`oidc`: its pages, redirects and cookies),
//! then manage their keys, limits and sessions and read their usage and ledger through
//! `/account/api/*`, the JSON API the page (`page`) is a client of: one file per resource
//! (`me`, `keys`, `limits`, `usage`, `sessions`, `audit`, `topups`), what they share in
//! `shared`. Stripe posts its events to `webhook`. The clients that talk to providers and
//! to Stripe are `accounts::oidc` and `accounts::stripe`.
//!
//! Every change goes through the one admin interface the CLI uses
//! (`accounts::Admin`), on the file or on the cluster's ledger, so its rules, texts and
//! effect (held from the next request, on every node) are the CLI's. Its operations, and
//! the calls to providers and Stripe, run on the account store's own threads
//! (`accounts::store`), never the API's, a bounded number at once.
//!
//! Sessions live in the database (shared by every node), their id only hashed; the cookie
//! is `__Host-postal_session` (Secure) when the public URL is https, `postal_session` on
//! plain http for local use. Every state-changing request carries the session's CSRF
//! token (`X-CSRF-Token`) and an `Origin` equal to the public URL's.

mod alerts;
mod answers;
mod audit;
mod extract;
mod held;
mod keys;
mod limits;
mod link;
mod me;
mod oidc;
mod page;
mod sessions;
mod shared;
mod topups;
mod usage;
mod visits;
mod webhook;

pub(crate) use alerts::AlertsApi;
pub(crate) use audit::AuditApi;
pub(crate) use keys::KeysApi;
pub(crate) use limits::LimitsApi;
pub(crate) use link::StartsApi;
pub(crate) use me::{MeApi, SignOutApi, UnlinkApi};
pub(crate) use page::SecurityHeaders;
pub(crate) use sessions::SessionsApi;
pub(crate) use topups::TopupsApi;
pub(crate) use usage::UsageApi;
pub use visits::REQUESTS_PER_MINUTE;
pub(crate) use visits::Visits;

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use poem::http::{HeaderValue, StatusCode, header};
use poem::{Request, Response, Route};
use secrecy::ExposeSecret;

use crate::accounts::{AccountError, Accounts, Admin, Failed, SessionRow};
use crate::api::ApiError;
use crate::domain::dashboard;
use crate::domain::ids::AccountId;

/// How the dashboard runs (`postal serve --public-url`, `--signups`).
#[derive(Debug, Clone, Default)]
pub struct DashboardSettings {
    /// The address customers reach (`https://api.example.com`), without a trailing `/`:
    /// redirect URIs are `{public_url}/account/callback/{provider}`. `None`: the address
    /// the server listens on, over http.
    pub public_url: Option<String>,
    /// Whether a new identity may make an account (`--signups open`, the default).
    pub signups_closed: bool,
    /// Accounts one client address may make by signing in per UTC day
    /// (`--max-new-accounts-per-ip-day`; `None`: [`dashboard::NEW_ACCOUNTS_PER_IP_DAY`]).
    pub max_new_accounts_per_ip_day: Option<u32>,
    /// Requests a minute a client address may make under `/account`, and a session to
    /// `/account/api` (`--account-requests-per-minute`; `None`: [`REQUESTS_PER_MINUTE`]).
    pub requests_per_minute: Option<u32>,
    /// Webhooks may go to loopback, private and link-local addresses, and over http
    /// (`--allow-private-webhooks`: tests and private networks).
    pub allow_private_webhooks: bool,
    /// The first pause before a failed delivery is tried again (`None`: 5 s); tests
    /// shorten it (`--alert-retry-base-ms`).
    pub alert_retry_base_ms: Option<u64>,
}

/// What the dashboard's handlers share.
pub(crate) struct Dashboard {
    accounts: Accounts,
    public_url: String,
    signups_open: bool,
    new_accounts_per_ip_day: u32,
    /// Requests to providers and Stripe (`accounts::oidc::outside_agent`).
    http: ureq::Agent,
    /// Sign-ins started a minute per client IP: each writes a row and asks the provider
    /// for its metadata.
    starts: crate::billing::per_ip::PerIpLimiter,
    trusted_proxies: Vec<crate::domain::cidr::Cidr>,
    /// Requests a minute per client address under `/account` and per session (`visits`),
    /// and the addresses' counts: (a change?, address).
    requests_per_minute: u32,
    /// `DashboardSettings::allow_private_webhooks`.
    allow_private_webhooks: bool,
    visits: crate::billing::per_ip::PerMinute<(bool, std::net::IpAddr)>,
    /// The sessions' counts, by the hash of their id.
    session_calls: crate::billing::per_ip::PerMinute<[u8; 32]>,
    /// This server's books: how often they reloaded after a change made elsewhere, which
    /// tells when `payments` is stale.
    billing: crate::billing::Billing,
    /// The payment settings as last read (`webhook`): a delivery's signature is checked
    /// against them before any work of the store.
    payments: held::Held<Option<Arc<crate::accounts::PaymentSettings>>>,
    /// The providers as last read: the sign-in page of a stranger reads no store.
    providers: held::Held<Arc<Vec<crate::accounts::Provider>>>,
}

/// The cookies' names and attributes for this public URL: on https the session and the
/// sign-in state are `__Host-` cookies (Secure, `Path=/`, no `Domain`), which no sibling
/// host can set or shadow (review L1: cookie tossing); on plain http (local use) they
/// cannot be, and the state's cookie is sent to the callback only.
struct CookieRules {
    session: &'static str,
    signin: &'static str,
    signin_path: &'static str,
    secure: bool,
}
/// Sign-ins a client IP may start a minute.
pub const STARTS_PER_MINUTE: u32 = 20;

impl Dashboard {
    pub(crate) fn new(
        accounts: Accounts,
        billing: crate::billing::Billing,
        public_url: String,
        settings: &DashboardSettings,
        trusted_proxies: Vec<crate::domain::cidr::Cidr>,
    ) -> Arc<Dashboard> {
        accounts.start_sender(crate::accounts::sender::SenderOptions {
            allow_private_webhooks: settings.allow_private_webhooks,
            retry_base_ms: settings
                .alert_retry_base_ms
                .unwrap_or(crate::accounts::sender::RETRY_BASE_MS),
        });
        Arc::new(Dashboard {
            accounts,
            public_url: public_url.trim_end_matches('/').to_owned(),
            signups_open: !settings.signups_closed,
            new_accounts_per_ip_day: settings
                .max_new_accounts_per_ip_day
                .unwrap_or(dashboard::NEW_ACCOUNTS_PER_IP_DAY),
            http: crate::accounts::oidc::outside_agent(),
            starts: Default::default(),
            trusted_proxies,
            requests_per_minute: settings
                .requests_per_minute
                .unwrap_or(REQUESTS_PER_MINUTE)
                .max(1),
            allow_private_webhooks: settings.allow_private_webhooks,
            visits: Default::default(),
            session_calls: Default::default(),
            billing,
            payments: Default::default(),
            providers: Default::default(),
        })
    }

    /// The sign-in providers, as held in memory (`held`) or read again when stale.
    async fn providers(&self) -> Result<Arc<Vec<crate::accounts::Provider>>, ApiError> {
        let reloads = self.billing.reloads();
        if let Some(providers) = self.providers.fresh(reloads, false) {
            return Ok(providers);
        }
        let read_at = std::time::Instant::now();
        let providers = Arc::new(
            self.admin(move |mut admin| async move { admin.providers().await })
                .await?,
        );
        self.providers.put(providers.clone(), read_at, reloads);
        Ok(providers)
    }

    fn cookies(&self) -> CookieRules {
        match self.public_url.starts_with("https://") {
            true => CookieRules {
                session: "__Host-postal_session",
                signin: "__Host-postal_signin",
                signin_path: "/",
                secure: true,
            },
            false => CookieRules {
                session: "postal_session",
                signin: "postal_signin",
                signin_path: "/account/callback",
                secure: false,
            },
        }
    }

    /// The public URL's origin (`scheme://host[:port]`), which every state-changing
    /// request's `Origin` must equal.
    fn origin(&self) -> &str {
        let after_scheme = self.public_url.find("://").map_or(0, |i| i + 3);
        let end = self.public_url[after_scheme..]
            .find('/')
            .map_or(self.public_url.len(), |i| after_scheme + i);
        &self.public_url[..end]
    }

    /// Whether a first sign-in from `req`'s client may make an account: the server's
    /// `--signups`, and the client's address as new accounts are counted per day (the
    /// per-IP limits' way: `access::counted_as`, X-Forwarded-For only from a trusted
    /// proxy).
    fn signups(&self, req: &Request) -> crate::accounts::Signups {
        let client = crate::api::access::RequestMeta::of(req).client_ip(&self.trusted_proxies);
        crate::accounts::Signups {
            open: self.signups_open,
            from: dashboard::address_key(client.map(crate::api::access::counted_as)),
            per_address_day: self.new_accounts_per_ip_day,
        }
    }

    /// Runs `work` with the admin interface (the account store: the file, or the
    /// cluster's ledger) as the customer of no session in particular (reads, sign-in).
    async fn admin<T, F, Fut>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(Admin) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, AccountError>> + Send + 'static,
    {
        self.admin_as(CUSTOMER.to_owned(), work).await
    }

    /// `admin`, the changes named in the audit log as `actor`'s. On the store's own
    /// threads (`accounts::store`); 503 when it is busy.
    async fn admin_as<T, F, Fut>(&self, actor: String, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(Admin) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, AccountError>> + Send + 'static,
    {
        self.accounts.run(actor, work).await.map_err(failed)
    }

    /// Runs `call` (blocking, a call to a provider or Stripe, bounded by the agent's
    /// timeout) on the store's threads, never the API's; 503 when all are taken.
    async fn outside<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.accounts.outside(call).await.map_err(failed)
    }

    /// The live session the request's cookie names, or 401 `Not signed in`.
    async fn session(&self, req: &Request) -> Result<Session, ApiError> {
        // A value that is not the shape of a session id (`random_token`) is refused
        // without a look at the store: a stranger's junk costs nothing.
        let Some(id) = cookie(req, self.cookies().session).filter(|id| dashboard::is_token(id))
        else {
            return Err(ApiError::unauthorized(NOT_SIGNED_IN));
        };
        let hash = dashboard::token_hash(&id);
        self.admit_session_call(&hash)?;
        let now = now_unix();
        let row = self
            .admin(move |mut admin| async move { admin.session(&hash, now).await })
            .await?;
        row.map(|row| Session { row, hash })
            .ok_or_else(|| ApiError::unauthorized(NOT_SIGNED_IN))
    }

    /// As `session`, for a request that changes something: its `X-CSRF-Token` must be
    /// the session's and its `Origin` the public URL's, else 403 and nothing changes.
    async fn changing(&self, req: &Request) -> Result<Session, ApiError> {
        self.changing_with(req, req.header("X-CSRF-Token").unwrap_or(""))
            .await
    }

    /// As `changing`, the CSRF token given (a form's field, `page`'s confirmation).
    async fn changing_with(&self, req: &Request, token: &str) -> Result<Session, ApiError> {
        let session = self.session(req).await?;
        let origin = req.header(header::ORIGIN);
        if origin != Some(self.origin()) {
            return Err(ApiError::forbidden("Origin not allowed for the dashboard"));
        }
        if dashboard::token_hash(token) != dashboard::token_hash(session.row.csrf.expose_secret()) {
            return Err(ApiError::forbidden("Missing or wrong X-CSRF-Token"));
        }
        Ok(session)
    }

    /// As `changing`, for a change of keys, limits, identities or money (a new key, a roll,
    /// a revoke, a limit change, a link, an unlink, a top-up): the session must have signed
    /// in within
    /// [`dashboard::RECENT_SIGNIN_SECS`], else 403 `SIGN_IN_AGAIN` and nothing changes
    /// (the page offers `POST /account/api/reauth`).
    async fn recent(&self, req: &Request) -> Result<Session, ApiError> {
        self.recent_with(req, req.header("X-CSRF-Token").unwrap_or(""))
            .await
    }

    /// As `recent`, the CSRF token given (the link's confirmation form).
    async fn recent_with(&self, req: &Request, token: &str) -> Result<Session, ApiError> {
        let session = self.changing_with(req, token).await?;
        if now_unix() - session.row.authenticated_at > dashboard::RECENT_SIGNIN_SECS {
            return Err(ApiError::forbidden(SIGN_IN_AGAIN));
        }
        Ok(session)
    }

    /// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/ (and Secure on https);
    /// `max_age` 0 deletes it.
    fn set_cookie(&self, name: &str, value: &str, max_age: i64, path: &str) -> HeaderValue {
        let secure = if self.cookies().secure {
            "; Secure"
        } else {
            ""
        };
        let text = format!(
            "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
        );
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// A signed-in customer's session.
pub(super) struct Session {
    row: SessionRow,
    /// The hash of its id, as stored.
    hash: [u8; 32],
}

impl Session {
    fn account(&self) -> AccountId {
        self.row.account_id.clone()
    }

    /// Who this session's changes are, in the audit log.
    fn actor(&self) -> String {
        format!("customer (session {})", self.row.public_id)
    }
}

const NOT_SIGNED_IN: &str = "Not signed in";
/// The answer to a change that needs a recent sign-in, in a session whose last is older.
pub(super) const SIGN_IN_AGAIN: &str =
    "Sign in again to do this: this session's last sign-in is more than 15 minutes old";
/// The audit log's name of a change made through the sign-in itself.
const CUSTOMER: &str = "customer (sign-in)";

/// The value of cookie `name` the request carries (the first, when several).
fn cookie(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
}

/// A store call that did not run (503, try again in a second), or its admin error.
fn failed(e: Failed) -> ApiError {
    match e {
        Failed::Busy => ApiError::unavailable(BUSY, 1),
        Failed::Account(e) => account_error(e),
    }
}

const BUSY: &str = "The account service is busy; try again in a moment";

/// An admin error as the dashboard answers it: the CLI's texts, as 400 (404 for a key
/// the account does not hold, 401 for an account gone).
fn account_error(e: AccountError) -> ApiError {
    match e {
        AccountError::UnknownKey(key) => ApiError::not_found(&format!("no key {:?}", key.as_str())),
        AccountError::UnknownAccount(_) => ApiError::unauthorized(NOT_SIGNED_IN),
        AccountError::Refused(why) => ApiError::bad_request(why.to_string()),
        AccountError::Invalid(why) => ApiError::bad_request(why),
        AccountError::Conflict(why) => ApiError::conflict(&why),
        AccountError::Forbidden(why) => ApiError::forbidden(&why),
        AccountError::Limited(why) => ApiError::rate_limited(&why, 3600),
        AccountError::Unexpected(cause) => ApiError::internal(cause),
    }
}

fn now_unix() -> i64 {
    crate::domain::date::unix_secs(SystemTime::now())
}

/// A redirect (303: the browser follows it with a GET).
fn see_other(location: &str) -> Response {
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, location)
        .header(header::CACHE_CONTROL, "no-store")
        .finish()
}

/// The dashboard's pages, added to `route` (its JSON API, `MeApi` to `TopupsApi`, is part
/// of the documented service, under `/account/api`); the `Dashboard` comes as request data.
pub(crate) fn pages(route: Route) -> Route {
    route
        .at("/account", poem::get(page::index))
        .at("/account/app.js", poem::get(page::script))
        .at("/account/app.css", poem::get(page::style))
        .at("/account/signin/:name", poem::get(oidc::start_signin))
        .at(
            "/account/link",
            poem::get(link::offered).post(link::confirm),
        )
        .at("/account/callback/:name", poem::get(oidc::callback))
        .at("/account/stripe/webhook", poem::post(webhook::webhook))
}

#[cfg(test)]
mod tests {
    use crate::accounts::{PaymentSettings, Provider, SessionRow, SignIn};
    use crate::domain::ids::{AccountId, ProviderName, SessionId};
    use crate::domain::money::Micros;

    use super::keys::KeyBody;
    use super::limits::LimitsBody;
    use super::me::MeBody;

    /// The secrets below, each of which must be absent from every `Debug` output.
    const SECRETS: [&str; 13] = [
        "client-secret-4f1c",
        "pkce-verifier-9a2e",
        "csrf-token-77d0",
        "sk_test_stripe-key-31b5",
        "whsec_webhook-secret-c8e6",
        "metrics-token-05aa",
        "ledger-password-e3d9",
        "sk_live_api-key-6b12",
        "csrf-token-shown-8f44",
        "signin-state-2d7a",
        "pkce-verifier-e150",
        "ledger-password-file-90c3",
        "sk_live_request-key-4d21",
    ];

    fn printed(what: &str, debug: String) {
        for secret in SECRETS {
            assert!(!debug.contains(secret), "{what} prints {secret}: {debug}");
        }
    }

    #[test]
    fn no_configuration_or_session_type_prints_its_secrets() {
        printed(
            "Provider",
            format!(
                "{:?}",
                Provider {
                    name: ProviderName::new("p1"),
                    kind: crate::domain::dashboard::ProviderKind::Github,
                    issuer: "https://id.example".into(),
                    client_id: "postal".into(),
                    client_secret: SECRETS[0].into(),
                    allowed: vec!["acme".into()],
                }
            ),
        );
        printed(
            "SignIn",
            format!(
                "{:?}",
                SignIn {
                    provider: ProviderName::new("p1"),
                    nonce: "nonce".into(),
                    verifier: SECRETS[1].into(),
                    link_account: None,
                    purpose: crate::domain::dashboard::SignInPurpose::SignIn,
                    session_hash: None,
                    started_at: 0,
                }
            ),
        );
        printed(
            "Authorization",
            format!(
                "{:?}",
                crate::accounts::flow::Authorization {
                    url: format!(
                        "https://id.example/authorize?response_type=code&state={}",
                        SECRETS[9]
                    ),
                    state: SECRETS[9].into(),
                    nonce: "nonce".into(),
                    verifier: SECRETS[10].into(),
                }
            ),
        );
        printed(
            "SessionRow",
            format!(
                "{:?}",
                SessionRow {
                    public_id: SessionId::new("ses_abc"),
                    account_id: AccountId::new("acct_1"),
                    csrf: SECRETS[2].into(),
                    created_at: 0,
                    client: None,
                    identity: None,
                    authenticated_at: 0,
                    link_offer: None,
                }
            ),
        );
        printed(
            "PaymentSettings",
            format!(
                "{:?}",
                PaymentSettings {
                    secret_key: SECRETS[3].into(),
                    webhook_secret: SECRETS[4].into(),
                    api_base: "https://api.stripe.com".into(),
                    max_topup: Micros::ZERO,
                }
            ),
        );
        let ledger = crate::billing::LedgerConfig::parse(
            &format!("postgres://postal:{}@127.0.0.1/postal", SECRETS[6]),
            None,
        )
        .expect("a ledger URL on loopback");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let password_file = dir.path().join("ledger-password");
        std::fs::write(&password_file, SECRETS[11]).expect("the password file");
        std::fs::set_permissions(
            &password_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("mode 0600");
        let from_file = crate::billing::LedgerConfig::parse(
            "postgres://postal@127.0.0.1/postal",
            Some(&password_file),
        )
        .expect("a ledger URL on loopback, its password in a file");
        printed("LedgerConfig", format!("{from_file:?} {from_file}"));
        printed(
            "Settings",
            format!(
                "{:?}",
                crate::api::Settings {
                    operations: crate::api::ops::Operations {
                        metrics_token: Some(SECRETS[5].into()),
                    },
                    ledger: Some(ledger),
                    ..Default::default()
                }
            ),
        );
        let key = KeyBody {
            key_id: "key_1".into(),
            name: None,
            kind: "secret".into(),
            hint: Some("sk_live".into()),
            created_at: "2026-11-28T00:00:00Z".into(),
            revoked: false,
            revoked_at: None,
            expires_at: None,
            origins: None,
            per_ip_minute: None,
            max_per_minute: None,
            max_per_day: None,
            last_used_at: None,
            queries_last_30_days: 0,
            api_key: Some(SECRETS[7].into()),
        };
        printed("KeyBody", format!("{key:?}"));
        printed(
            "MeBody",
            format!(
                "{:?}",
                MeBody {
                    account_id: "acct_1".into(),
                    name: None,
                    balance: 0.0,
                    queries_left: 0,
                    limits: LimitsBody {
                        per_minute: None,
                        per_hour: None,
                        per_day: None,
                    },
                    identities: Vec::new(),
                    providers: Vec::new(),
                    session_id: "ses_abc".into(),
                    csrf_token: SECRETS[8].into(),
                }
            ),
        );
    }

    #[test]
    fn no_request_type_prints_its_api_key() {
        use crate::api::routes::*;
        use poem_openapi::types::Example;

        let key = || SECRETS[12].into();
        macro_rules! printed_with_key {
            ($($request:ty),+ $(,)?) => {$({
                let mut request = <$request>::example();
                request.api_key = key();
                printed(stringify!($request), format!("{request:?}"));
            })+};
        }
        printed_with_key!(
            crate::api::types::CodeRequest,
            about::AboutRequest,
            autocomplete::AutocompleteRequest,
            city::CityRequest,
            distance::DistanceRequest,
            nearest::NearestRequest,
            nearest_bulk::NearestBulkRequest,
            radius::RadiusRequest,
            suggest::SuggestRequest,
            validate_bulk::BulkRequest,
            verify::VerifyRequest,
            verify_bulk::VerifyBulkRequest,
        );
        printed(
            "CountriesRequest",
            format!("{:?}", countries::CountriesRequest { api_key: key() }),
        );
        printed(
            "DatasetRequest",
            format!("{:?}", dataset::DatasetRequest { api_key: key() }),
        );
        let bearer = format!("Bearer {}", SECRETS[12]);
        for (name, value) in [
            ("authorization", bearer.as_str()),
            ("x-api-key", SECRETS[12]),
        ] {
            let mut headers = poem::http::HeaderMap::new();
            headers.insert(name, value.parse().expect("a header value"));
            let meta = crate::api::access::RequestMeta::from_head(&headers, None);
            assert_eq!(meta.header_key(), Some(SECRETS[12]), "{name}");
            printed("RequestMeta", format!("{meta:?}"));
        }
    }
}
