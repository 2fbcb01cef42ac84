//! What the admin operations take and answer, the same in both ledgers (the SQLite
//! file, `db::sqlite`; a cluster's PostgreSQL, `db::pg`): the shapes of their answers
//! and their one error. The rules of a change are `domain::admin`'s.

use secrecy::SecretString;

use crate::domain::admin::{AuditAction, LedgerKind, Refused};
use crate::domain::api_key::{ApiKey, KeyKind, Publishable};
use crate::domain::dashboard::{DashboardRefused, MAX_LIVE_KEYS, ProviderKind, SignInPurpose};
use crate::domain::ids::{AccountId, KeyId, ProviderName, SessionId, TopupId};
use crate::domain::money::Micros;
use crate::domain::payments::TopupStatus;
use crate::domain::rate_limit::Limits;

/// Why an admin operation failed. All but `Unexpected` are the caller's mistake (the CLI
/// exits 2 for them, 1 for `Unexpected`).
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("no account {:?}", .0.as_str())]
    UnknownAccount(AccountId),
    #[error("no key {:?}", .0.as_str())]
    UnknownKey(KeyId),
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("{0}")]
    Invalid(String),
    /// The change does not fit the state it finds (the dashboard's 409).
    #[error("{0}")]
    Conflict(String),
    /// The account may not do this now (the dashboard's 403: top-ups frozen).
    #[error("{0}")]
    Forbidden(String),
    /// Too many of these from one client today (the sign-in's 429: new accounts).
    #[error("{0}")]
    Limited(String),
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl From<rusqlite::Error> for AccountError {
    fn from(e: rusqlite::Error) -> Self {
        AccountError::Unexpected(e.into())
    }
}

impl From<tokio_postgres::Error> for AccountError {
    fn from(e: tokio_postgres::Error) -> Self {
        AccountError::Unexpected(e.into())
    }
}

/// A new account with its first key (shown once).
pub struct NewAccount {
    pub account_id: AccountId,
    pub key_id: KeyId,
    pub api_key: ApiKey,
    pub balance: Micros,
}

/// `postal account show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountView {
    pub account_id: AccountId,
    pub name: Option<String>,
    pub balance: Micros,
    pub keys: Vec<KeyView>,
    pub limits: Limits,
    /// Why the account may start no top-up by card (a dispute), until the operator lifts
    /// it (`postal account unfreeze`); `None` when it may.
    pub topups_frozen: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    pub key_id: KeyId,
    /// RFC 3339, UTC, seconds: `2026-11-22T00:03:00Z`.
    pub created_at: String,
    pub revoked: bool,
}

/// A new key (shown once).
pub struct NewKey {
    pub key_id: KeyId,
    pub api_key: ApiKey,
}

/// One line of `postal account list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountLine {
    pub account_id: AccountId,
    pub name: Option<String>,
    pub balance: Micros,
    pub active_keys: u64,
    pub limits: Limits,
    /// Billed queries since 00:00 UTC today, from the ledger.
    pub queries_today: u64,
}

/// A page of a listing (the dashboard's ledger and audit log): rows past `cursor` (a row
/// id: the `next` the page before answered) in `direction`, at most `page` of them;
/// `page` `None`: every row, oldest first (the CLI's).
///
/// Keyset paging on the row id, both ways: the JSON pages go newest first, the audit log's
/// CSV reads the whole log oldest first a page at a time (a line written meanwhile comes
/// last, none twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Paging {
    pub cursor: Option<i64>,
    pub page: Option<u32>,
    pub direction: Direction,
}

/// The order a page of a listing comes in, by row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Rows older than the cursor, newest first.
    #[default]
    NewestFirst,
    /// Rows newer than the cursor, oldest first.
    OldestFirst,
}

impl Paging {
    /// The most rows a page holds.
    pub const MAX_PAGE: u32 = 500;

    /// The query's condition on `id`, its `ORDER BY` and `LIMIT`: the cursor a parameter
    /// written as `cursor`, the limit one written as `limit` (only with a `page`).
    pub fn rows(&self, cursor: &str, limit: &str) -> String {
        let (past, descending) = match self.direction {
            Direction::NewestFirst => ("<", " DESC"),
            Direction::OldestFirst => (">", ""),
        };
        match self.page {
            Some(_) => format!("id {past} {cursor} ORDER BY id{descending} LIMIT {limit}"),
            None => format!("id {past} {cursor} ORDER BY id"),
        }
    }

    /// The cursor's parameter (past every row when there is none), and the rows to ask
    /// for: the page's and one more, which tells whether another page follows.
    pub fn bounds(&self) -> (i64, i64) {
        let start = match self.direction {
            Direction::NewestFirst => i64::MAX,
            Direction::OldestFirst => 0,
        };
        (
            self.cursor.unwrap_or(start),
            i64::from(self.page.unwrap_or(0)) + 1,
        )
    }

    /// `rows` (the query's answer: (row id, entry)) as a page: its entries, and the cursor
    /// of the next page when there is one.
    pub fn paged<T>(&self, mut rows: Vec<(i64, T)>) -> Page<T> {
        let next = match self.page {
            Some(page) if rows.len() > page as usize => {
                rows.truncate(page as usize);
                rows.last().map(|(id, _)| *id)
            }
            _ => None,
        };
        Page {
            entries: rows.into_iter().map(|(_, e)| e).collect(),
            next,
        }
    }
}

/// A page of a listing (`Paging`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub entries: Vec<T>,
    /// The `cursor` of the next page; `None` on the last page.
    pub next: Option<i64>,
}

/// Which of an account's ledger rows to read: `postal ledger show`'s (from `since`, in
/// the order written) or a page of the dashboard's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LedgerQuery {
    /// Rows at or after this time (unix seconds).
    pub since: Option<i64>,
    pub paging: Paging,
}

impl LedgerQuery {
    /// The SQL of the query, `?N`/`$N` written by `param`, for parameters 1 (the
    /// account's row id), 2 (`since`, or the smallest time), 3 and 4 (`Paging::bounds`):
    /// the same for both stores.
    pub fn sql(&self, param: fn(usize) -> String) -> String {
        format!(
            "SELECT id, at, kind, amount, balance_after, query_count, endpoint, note
             FROM ledger
             WHERE account_id = {} AND at >= {} AND {}",
            param(1),
            param(2),
            self.paging.rows(&param(3), &param(4))
        )
    }
}

/// A page of an account's ledger.
pub type LedgerPage = Page<LedgerEntry>;

/// One row of an account's ledger (`postal ledger show`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// RFC 3339, UTC, seconds.
    pub at: String,
    pub kind: LedgerKind,
    /// Signed: a charge is negative.
    pub amount: Micros,
    pub balance_after: Micros,
    pub queries: u64,
    /// Charges: the endpoint as stored (`lookup`, `validate-bulk`, ...).
    pub endpoint: Option<String>,
    /// Adjustments: the reason.
    pub note: Option<String>,
}

/// Billed queries and their price for one account, endpoint and UTC day (`postal usage`),
/// and with [`UsageQuery::per_key`] one API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLine {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    pub account_id: AccountId,
    /// Per key: the key (`None` for charges made before version 11 counted keys); `None`
    /// otherwise.
    pub key_id: Option<KeyId>,
    pub endpoint: String,
    pub queries: u64,
    /// What those queries cost (positive).
    pub charged: Micros,
}

/// Which usage to read (`usage_days`): the last `days` UTC days at `now` (unix seconds,
/// today included), of one account or every one, of one key or all, per key or summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    pub days: u32,
    pub now: i64,
    pub account: Option<AccountId>,
    /// Only this key (of `account`, which it needs).
    pub key: Option<KeyId>,
    /// One line per key, or the keys summed.
    pub per_key: bool,
}

impl UsageQuery {
    /// The first day's start.
    pub fn from(&self) -> i64 {
        day_start(self.now) - (i64::from(self.days.max(1)) - 1) * DAY
    }

    /// The SQL of the query, `?N`/`$N` written by `param` for parameters 1 (from), 2
    /// (the account's row id) and 3 (the key's): the same for both stores.
    pub fn sql(&self, param: fn(usize) -> String) -> String {
        let key = if self.per_key { ", u.key_id" } else { "" };
        let mut filter = format!("u.day >= {}", param(1));
        if self.account.is_some() {
            filter += &format!(" AND u.account_id = {}", param(2));
        }
        if self.key.is_some() {
            filter += &format!(" AND u.key_id = {}", param(3));
        }
        let key_column = match self.per_key {
            true => "(SELECT k.public_id FROM api_keys k WHERE k.id = u.key_id)",
            false => "CAST(NULL AS TEXT)",
        };
        format!(
            "SELECT u.day, (SELECT a.public_id FROM accounts a WHERE a.id = u.account_id),
                    {key_column}, u.endpoint, CAST(sum(u.queries) AS BIGINT),
                    CAST(sum(u.charged) AS BIGINT)
             FROM usage_days u WHERE {filter}
             GROUP BY u.day, u.account_id{key}, u.endpoint
             ORDER BY u.day, u.account_id{key}, u.endpoint"
        )
    }
}

/// The first day of a key's "last 30 days" (`KeyLine::queries_30d`), at `now`.
pub fn last_30_days(now: i64) -> i64 {
    day_start(now) - 29 * DAY
}

/// One key of an account (`postal key list`): never the secret, which is not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLine {
    pub key_id: KeyId,
    /// The name its owner gave it, if any.
    pub name: Option<String>,
    /// Its first characters (`sk_AbCd`), to tell keys apart; `None` for keys made before
    /// keys kept them.
    pub hint: Option<String>,
    pub created_at: String,
    /// When it was revoked (or a rolled key's grace ended), `None` while active.
    pub revoked_at: Option<String>,
    /// A rolled key still in its grace: when it ends.
    pub expires_at: Option<String>,
    /// `None` for a secret key.
    pub publishable: Option<Publishable>,
    /// When a charge of it was last written, to the minute (`2026-11-28T21:04:00Z`);
    /// `None` if never (since version 11 counted keys).
    pub last_used_at: Option<String>,
    /// Its billed queries in the last 30 UTC days, today included.
    pub queries_30d: u64,
}

/// `postal ledger verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerReport {
    pub accounts: u64,
    pub entries: u64,
    pub mismatches: Vec<Mismatch>,
}

/// An account whose balance is not the sum of its ledger (micro-dollars, raw: a tampered
/// value need not be a valid `Micros`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub account_id: AccountId,
    pub balance: i64,
    pub ledger_sum: i64,
}

/// A provider customers sign in with (`postal provider add`).
#[derive(Debug, Clone)]
pub struct Provider {
    pub name: ProviderName,
    pub kind: ProviderKind,
    /// The issuer URL (OpenID Connect kinds; Microsoft's with its tenant), or the GitHub's
    /// address (`github`).
    pub issuer: String,
    pub client_id: String,
    pub client_secret: SecretString,
    /// Who may sign in: GitHub organizations (`github`) or Microsoft tenants
    /// (`microsoft`); empty, anyone.
    pub allowed: Vec<String>,
}

impl Provider {
    /// `allowed` as stored: the names separated by spaces (a name has none).
    pub fn allowed_stored(&self) -> String {
        self.allowed.join(" ")
    }

    /// `allowed` from its stored text.
    pub fn allowed_from_stored(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }
}

/// A sign-in under way: what its callback needs.
#[derive(Debug, Clone)]
pub struct SignIn {
    pub provider: ProviderName,
    pub nonce: String,
    /// The PKCE code verifier: whoever holds it with the code gets the customer's tokens.
    pub verifier: SecretString,
    /// The account of the signed-in customer who links this provider, if any.
    pub link_account: Option<AccountId>,
    pub purpose: SignInPurpose,
    /// The session that started a link or a sign-in again (its id's hash): only it
    /// completes them.
    pub session_hash: Option<[u8; 32]>,
    /// When it started (unix seconds; `put_signin` stores its own `now`).
    pub started_at: i64,
}

/// An identity of a provider, as it signed in (or as the account lists it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityView {
    pub issuer: String,
    pub subject: String,
    pub provider: ProviderName,
    /// Only when the provider said it is verified; display only, never a link.
    pub email: Option<String>,
    /// What the provider calls the person, when the provider vouches for it (GitHub's
    /// login): the name of an account its first sign-in makes, when there is no verified
    /// e-mail. Not stored: `None` in a listing.
    pub name: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// When the person last signed in at the provider (unix seconds), as a sign-in's ID
    /// token says (`auth_time`); `None` when it says nothing, and in a listing.
    pub signed_in_at: Option<i64>,
}

impl IdentityView {
    /// The name of the account its first sign-in makes: the verified e-mail, else the
    /// provider's name for the person, else the subject.
    pub fn account_name(&self) -> &str {
        self.email
            .as_deref()
            .or(self.name.as_deref())
            .unwrap_or(&self.subject)
    }
}

/// Whether a first sign-in may make an account (`postal serve --signups`,
/// `--max-new-accounts-per-ip-day`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signups {
    pub open: bool,
    /// The client address the sign-in came from, as it is counted
    /// (`domain::dashboard::address_key`).
    pub from: String,
    /// Accounts one address may make by signing in per UTC day.
    pub per_address_day: u32,
}

/// The account an identity signed in to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub account_id: AccountId,
    /// Made by this sign-in (with the free allowance).
    pub created: bool,
}

/// A dashboard session (its id is only ever stored hashed).
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub public_id: SessionId,
    pub account_id: AccountId,
    pub csrf: SecretString,
    /// Unix seconds of the sign-in.
    pub created_at: i64,
    pub client: Option<String>,
    /// The identity that opened it; `None` for a session opened before schema 13.
    pub identity: Option<SessionIdentity>,
    /// Unix seconds of its holder's last sign-in with that identity (the sign-in, or a
    /// sign-in again); 0 when never recorded.
    pub authenticated_at: i64,
    /// An identity a link brought back, waiting for the customer's confirmation.
    pub link_offer: Option<LinkOffer>,
}

/// The identity a session was opened (and last proved) with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    pub provider: ProviderName,
    pub issuer: String,
    pub subject: String,
}

impl SessionIdentity {
    pub fn of(identity: &IdentityView) -> SessionIdentity {
        SessionIdentity {
            provider: identity.provider.clone(),
            issuer: identity.issuer.clone(),
            subject: identity.subject.clone(),
        }
    }

    /// Whether `identity` is this one (the provider's name may have changed since).
    pub fn is(&self, identity: &IdentityView) -> bool {
        self.issuer == identity.issuer && self.subject == identity.subject
    }
}

/// An identity a link's callback brought back, kept on the session until the customer
/// confirms or drops it (at most [`crate::domain::dashboard::SIGNIN_SECS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkOffer {
    pub identity: IdentityView,
    /// Unix seconds it came back.
    pub at: i64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredOffer {
    provider: String,
    issuer: String,
    subject: String,
    email: Option<String>,
    at: i64,
}

impl LinkOffer {
    /// As the `link_offer` column stores it: JSON.
    pub(crate) fn stored(&self) -> String {
        let i = &self.identity;
        serde_json::to_string(&StoredOffer {
            provider: i.provider.as_str().to_owned(),
            issuer: i.issuer.clone(),
            subject: i.subject.clone(),
            email: i.email.clone(),
            at: self.at,
        })
        .expect("an offer serializes")
    }

    /// The offer a stored `link_offer` holds; `None` for none, or one no longer read.
    pub(crate) fn from_stored(text: Option<&str>) -> Option<LinkOffer> {
        let o: StoredOffer = serde_json::from_str(text?).ok()?;
        Some(LinkOffer {
            identity: IdentityView {
                issuer: o.issuer,
                subject: o.subject,
                provider: ProviderName::new(o.provider),
                email: o.email,
                name: None,
                created_at: o.at,
                signed_in_at: None,
            },
            at: o.at,
        })
    }
}

/// The live (not ended) session whose id hashes to the first parameter, with its
/// account's public id, in either dialect (`mark`: `?` for SQLite, `$` for PostgreSQL).
/// Its columns: public id, account, CSRF token, created, seen, client, provider, issuer,
/// subject, authenticated, link offer.
pub(crate) fn session_query(mark: char) -> String {
    format!(
        "SELECT s.public_id, a.public_id, s.csrf, s.created_at, s.seen_at, s.client,
                s.provider, s.issuer, s.subject, s.authenticated_at, s.link_offer
         FROM sessions s JOIN accounts a ON a.id = s.account_id
         WHERE s.id_hash = {mark}1 AND s.ended_at IS NULL"
    )
}

/// A session's identity from its three stored columns (all set, or none).
pub(crate) fn session_identity(
    provider: Option<ProviderName>,
    issuer: Option<String>,
    subject: Option<String>,
) -> Option<SessionIdentity> {
    Some(SessionIdentity {
        provider: provider?,
        issuer: issuer?,
        subject: subject?,
    })
}

/// A live session as its account lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub session_id: SessionId,
    pub created_at: i64,
    pub seen_at: i64,
    pub client: Option<String>,
}

/// One line of an account's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Unix seconds.
    pub at: i64,
    pub actor: String,
    pub action: AuditAction,
    pub detail: String,
}

/// Whose change an audit line records: an account, or the account holding a key.
#[derive(Debug, Clone, Copy)]
pub enum Audited<'a> {
    Account(&'a AccountId),
    Key(&'a KeyId),
}

impl<'a> Audited<'a> {
    /// The audit line's INSERT, in either dialect (its parameters numbered after `mark`:
    /// `?` for SQLite, `$` for PostgreSQL), and its first parameter, the public id; then
    /// come at, actor, action and detail.
    pub(crate) fn insert(self, mark: char) -> (String, &'a str) {
        let (from, id) = match self {
            Audited::Account(id) => ("SELECT id FROM accounts", id.as_str()),
            Audited::Key(id) => ("SELECT account_id FROM api_keys", id.as_str()),
        };
        let insert = format!(
            "INSERT INTO audit_log (account_id, at, actor, action, detail)
             SELECT ({from} WHERE public_id = {mark}1), {mark}2, {mark}3, {mark}4, {mark}5"
        );
        (insert, id)
    }
}

pub(crate) const DAY: i64 = 86_400;

/// The start (unix seconds) of the UTC day holding `now`.
pub fn day_start(now: i64) -> i64 {
    now - now.rem_euclid(DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_starts_at_midnight_utc() {
        assert_eq!(day_start(86_400 * 3 + 5), 86_400 * 3);
        assert_eq!(day_start(86_400 * 3), 86_400 * 3);
    }
}

/// The card processor's settings (`postal payments stripe`, docs/payments.md).
#[derive(Debug, Clone)]
pub struct PaymentSettings {
    pub secret_key: SecretString,
    pub webhook_secret: SecretString,
    /// `https://api.stripe.com`, or a proxy's (tests: a stand-in), without a trailing `/`.
    pub api_base: String,
    /// The largest top-up a customer may start.
    pub max_topup: Micros,
}

/// The operator's mail relay (`postal mail smtp`, docs/alerts.md) as stored: checked, and
/// made into a transport, by `alerts::mail`. Its `Debug` shows whether a password is set,
/// never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct MailSettings {
    /// `smtp://HOST[:PORT]` (STARTTLS) or `smtps://HOST[:PORT]` (implicit TLS).
    pub url: String,
    /// The From mailbox: `Postal <billing@example.com>`.
    pub sender: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// When the operator set them, Unix seconds.
    pub updated_at: i64,
}

impl std::fmt::Debug for MailSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailSettings")
            .field("url", &self.url)
            .field("sender", &self.sender)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// A top-up as the customer and the operator see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopupView {
    pub topup_id: TopupId,
    /// Asked for.
    pub amount: Micros,
    pub status: TopupStatus,
    pub session_id: Option<String>,
    /// The payment page, while pending.
    pub url: Option<String>,
    pub payment: Option<String>,
    /// What was paid and credited.
    pub credited: Option<Micros>,
    /// Refunded by the processor, and of that what the balance gave back.
    pub refunded: Micros,
    pub taken_back: Micros,
    pub created_at: i64,
    pub paid_at: Option<i64>,
}

impl TopupView {
    /// Refunded but not taken back (the balance was spent).
    pub fn shortfall(&self) -> Micros {
        self.refunded
            .checked_sub(self.taken_back)
            .unwrap_or(Micros::ZERO)
    }
}

/// A payment the processor confirmed: the Checkout Session as its API gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub session_id: String,
    /// The session's `metadata.topup_id` (found by it when the session id was never stored).
    pub topup_id: Option<TopupId>,
    /// The session's `client_reference_id`.
    pub account_id: Option<AccountId>,
    /// `amount_total`, read as USD cents (whatever `currency` says).
    pub amount: Micros,
    /// `currency`, as Stripe writes it (`usd`).
    pub currency: String,
    /// The PaymentIntent (`pi_…`), which refunds name.
    pub payment: Option<String>,
}

/// What a confirmed payment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credited {
    /// Credited now: the account's balance after it.
    Now {
        account_id: AccountId,
        topup_id: TopupId,
        amount: Micros,
        balance: Micros,
    },
    /// Credited before (a redelivery, another node): nothing changed.
    Already { topup_id: TopupId },
    /// Paid another amount or currency than the top-up asked: nothing credited, the
    /// top-up failed (the operator's to settle, in Stripe's Dashboard).
    Mismatch {
        account_id: AccountId,
        topup_id: TopupId,
        /// What the top-up asked, USD.
        asked: Micros,
    },
    /// Paid while the account's top-ups are frozen (a dispute): nothing credited, the
    /// top-up failed (the operator's to settle: refund it in Stripe, or credit it after
    /// `account unfreeze` with `account topup`).
    Frozen {
        account_id: AccountId,
        topup_id: TopupId,
        /// Why they are frozen.
        why: String,
    },
    /// No top-up of this server has that session (another product on the same Stripe
    /// account), or its account differs: nothing changed.
    Unknown,
}

impl Credited {
    /// Why a payment for top-up `topup_id` (which asked `asked` USD) of `account_id` is
    /// not credited, if it is not: the account's top-ups are frozen (`frozen`: why), or it
    /// paid another amount or currency. Both ledgers then mark the top-up failed.
    pub(crate) fn refused(
        account_id: &AccountId,
        topup_id: &TopupId,
        frozen: Option<String>,
        paid: &Payment,
        asked: Micros,
    ) -> Option<Credited> {
        let (account_id, topup_id) = (account_id.clone(), topup_id.clone());
        match frozen {
            Some(why) => Some(Credited::Frozen {
                account_id,
                topup_id,
                why,
            }),
            None => (!crate::domain::payments::pays_for(paid.amount, &paid.currency, asked))
                .then_some(Credited::Mismatch {
                    account_id,
                    topup_id,
                    asked,
                }),
        }
    }
}

/// What a refund did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refunded {
    Now {
        account_id: AccountId,
        topup_id: TopupId,
        /// Refunded by this event (beyond what earlier ones counted).
        owed: Micros,
        split: crate::domain::payments::RefundSplit,
        balance: Micros,
    },
    /// Counted before (a refund total, or a dispute id, seen already): nothing changed.
    Already,
    /// The payment's top-up (named by the charge's metadata, or found through its
    /// PaymentIntent's Checkout Session) is pending or expired, not credited yet: the
    /// webhook answers 503, Stripe delivers the refund again later, after the credit.
    Early,
    /// No top-up of this server has that payment: nothing changed.
    Unknown,
}

/// The condition of an account's live keys at `now` (SQL, `now` a parameter's text): not
/// revoked and not past a roll's end. A rolled key in its grace is live: it counts for
/// the cap until its end, so rolling cannot multiply working keys.
pub(crate) fn live_keys(now: &str) -> String {
    format!("revoked_at IS NULL AND (expires_at IS NULL OR expires_at > {now})")
}

/// The SQL that revokes the account's rolled keys past their end at `now`, at that end
/// (parameters' texts): run by every key change of the account, so a listing, the cap and
/// the servers' books agree that such a key is gone.
pub(crate) fn end_rolled_keys(account: &str, now: &str) -> String {
    format!(
        "UPDATE api_keys SET revoked_at = expires_at
         WHERE account_id = {account} AND revoked_at IS NULL AND expires_at <= {now}"
    )
}

/// Whether the account, holding `live` live keys, may get one more: a new key needs room
/// under [`MAX_LIVE_KEYS`]; a roll's successor may take the one place above it (the rolled
/// key leaves at its grace's end, and a key in its grace cannot be rolled again).
pub(crate) fn key_room(live: u64, roll: bool) -> Result<(), AccountError> {
    let cap = MAX_LIVE_KEYS + u64::from(roll);
    if live >= cap {
        return Err(AccountError::Invalid(
            DashboardRefused::TooManyKeys.to_string(),
        ));
    }
    Ok(())
}

/// What a rolled key's successor keeps of the old key's kind (both ledgers' `roll_key`): a
/// publishable key's rules (`rules`, read only for one), a secret key none. A revoked or
/// ended key is not rolled (400), nor a key in its grace (409: its successor is the key
/// to roll).
pub(crate) fn successor_rules(
    revoked: bool,
    in_grace: bool,
    kind: KeyKind,
    rules: impl FnOnce() -> Result<Publishable, AccountError>,
) -> Result<Option<Publishable>, AccountError> {
    if revoked {
        return Err(AccountError::Invalid(
            DashboardRefused::RollRevoked.to_string(),
        ));
    }
    if in_grace {
        return Err(AccountError::Conflict(
            DashboardRefused::RolledAlready.to_string(),
        ));
    }
    match kind {
        KeyKind::Publishable => rules().map(Some),
        KeyKind::Secret => Ok(None),
    }
}
