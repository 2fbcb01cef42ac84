//! What both ledgers (the SQLite file, `db::sqlite`; a cluster's PostgreSQL, `db::pg`)
//! hold for the server's books and hand it, in either dialect: active keys,
//! the charge rows a flush appends, idempotent answers and claims; and how a time, a count,
//! the limits and the closed sets of words are stored.

use std::sync::Arc;
use std::time::SystemTime;

use crate::domain::api_key::{KeyHash, Publishable};
use crate::domain::charge::{Caller, Endpoint};
use crate::domain::idempotency::{Fingerprint, IdempotencyKey};
use crate::domain::money::Micros;
use crate::domain::rate_limit::Limits;

/// An active key as the server's books hold it.
#[derive(Debug)]
pub struct ActiveKey {
    pub hash: KeyHash,
    pub caller: Caller,
    /// `None` for a secret key.
    pub publishable: Option<Publishable>,
    /// A rolled key's end (unix seconds): from then on it is refused as revoked.
    pub expires_at: Option<i64>,
}

/// What one account was charged on one endpoint with one API key since the last flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChargeRow {
    pub account_id: i64,
    /// The API key's row id (`api_keys.id`).
    pub key_id: i64,
    pub endpoint: Endpoint,
    pub queries: u64,
    pub amount: Micros,
}

/// An answer to keep for retries: whose, under which key, for which request, and its body
/// byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub account_id: i64,
    pub key: IdempotencyKey,
    pub endpoint: Endpoint,
    pub fingerprint: Fingerprint,
    pub body: Arc<[u8]>,
    pub answered: SystemTime,
}

/// A stored answer without its body: what the server holds in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerIndex {
    pub account_id: i64,
    pub key: IdempotencyKey,
    pub endpoint: Endpoint,
    pub fingerprint: Fingerprint,
    pub answered: SystemTime,
}

/// A claim of a key in a cluster's ledger (`db::pg::idempotency`): the request of
/// `endpoint` with `fingerprint` running on this node under its local `ticket`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    pub account_id: i64,
    pub key: IdempotencyKey,
    pub endpoint: Endpoint,
    pub fingerprint: Fingerprint,
    pub ticket: u64,
    /// Answers given before this are no longer replayable.
    pub since: SystemTime,
}

/// What a claim found in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Nothing live: the key is this node's, for the claim's ticket.
    Claimed,
    /// A request under the key is running on a live node (another, or this one before a
    /// restart of its memory), for `endpoint` with `fingerprint`.
    Running {
        endpoint: Endpoint,
        fingerprint: Fingerprint,
    },
    /// The key was answered: the first answer, byte for byte.
    Answered {
        endpoint: Endpoint,
        fingerprint: Fingerprint,
        body: Arc<[u8]>,
    },
}

/// A claim that ended without an answer (an error, a client gone): the flush deletes it
/// from the ledger, if it is still this ticket's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleasedClaim {
    pub account_id: i64,
    pub key: IdempotencyKey,
    pub ticket: u64,
}

pub(crate) use crate::domain::date::unix_secs;

/// A stored count (never negative: a negative one reads as 0).
pub(crate) fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

/// A count as stored (beyond `i64`: `i64::MAX`).
pub(crate) fn stored_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The three limit columns (per minute, hour, day) as stored.
pub(crate) fn stored_limits(limits: Limits) -> [Option<i64>; 3] {
    [limits.per_minute, limits.per_hour, limits.per_day].map(|l| l.map(stored_count))
}

/// The closed sets of words both ledgers store as their text, each with what an error
/// calls it, handed to a dialect's `$store` macro: one list, so a new word is stored by
/// both or by neither.
macro_rules! stored_words {
    ($store:ident) => {
        $store!(
            $crate::domain::api_key::KeyKind => "key kind",
            $crate::domain::dashboard::ProviderKind => "provider kind",
            $crate::domain::dashboard::SignInPurpose => "sign-in purpose",
            $crate::domain::payments::TopupStatus => "top-up status",
            $crate::domain::admin::LedgerKind => "ledger entry kind",
            $crate::domain::admin::AuditAction => "audit action",
        );
    };
}
pub(crate) use stored_words;
