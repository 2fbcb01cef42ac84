//! What billing counts for metrics (`/metrics`): totals since start and the state of the
//! books now.

use super::*;

/// Totals since start, for metrics: what was charged, refused and flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BillingStats {
    /// Charges decided and applied (each of N queries counts once).
    pub charges: u64,
    /// Charges refused 401 / 402 / 429.
    pub refusals: u64,
    /// Requests refused 503 because flushes failed.
    pub unavailable: u64,
    /// Flushes committed, and those that failed.
    pub flushes: u64,
    pub failed_flushes: u64,
    /// Time spent in committed flushes.
    pub flush_busy: Duration,
    /// Reloads of accounts and keys after an outside change.
    pub reloads: u64,
    /// Calls of the account store (the dashboard's, the sign-in's, the webhook's).
    pub account_calls: u64,
    /// The last committed flush's duration, and when it committed.
    pub last_flush: Duration,
    pub last_commit: Option<std::time::SystemTime>,
    /// Charge rows (account x endpoint) waiting for the next flush.
    pub pending: u64,
    /// Cluster mode only (zero for the single file): grants asked of the ledger, recalls
    /// heard from other nodes, grants handed back, and the grants held now (how many,
    /// how much is left of them).
    pub grant_requests: u64,
    pub recalls: u64,
    pub handbacks: u64,
    pub grants_held: u64,
    pub granted: Micros,
}

#[derive(Default)]
pub(super) struct Counts {
    pub(super) charges: AtomicU64,
    pub(super) refusals: AtomicU64,
    pub(super) unavailable: AtomicU64,
    pub(super) flushes: AtomicU64,
    pub(super) failed_flushes: AtomicU64,
    pub(super) flush_busy_nanos: AtomicU64,
    pub(super) reloads: AtomicU64,
    pub(super) account_calls: AtomicU64,
    /// The last committed flush: how long it took, and when it ended (µs since 1970).
    pub(super) last_flush_nanos: AtomicU64,
    pub(super) last_commit_unix_micros: AtomicU64,
    pub(super) grant_requests: AtomicU64,
    pub(super) recalls: AtomicU64,
    pub(super) handbacks: AtomicU64,
}

impl Billing {
    /// How many times the books took in the store's accounts and keys after a change made
    /// elsewhere (the CLI, another node): what is cached beside the books (the dashboard's
    /// payment settings) is read again when this moves. One atomic read, no lock.
    pub fn reloads(&self) -> u64 {
        self.shared.counts.reloads.load(Ordering::Relaxed)
    }

    /// Counts a call of the account store (`accounts::Accounts::run`), for `/metrics`.
    pub fn count_account_call(&self) {
        self.shared
            .counts
            .account_calls
            .fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> BillingStats {
        let c = &self.shared.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (pending, grants_held, granted) = self.books().held_now();
        BillingStats {
            charges: get(&c.charges),
            refusals: get(&c.refusals),
            unavailable: get(&c.unavailable),
            flushes: get(&c.flushes),
            failed_flushes: get(&c.failed_flushes),
            flush_busy: Duration::from_nanos(get(&c.flush_busy_nanos)),
            reloads: get(&c.reloads),
            account_calls: get(&c.account_calls),
            last_flush: Duration::from_nanos(get(&c.last_flush_nanos)),
            last_commit: match get(&c.last_commit_unix_micros) {
                0 => None,
                micros => Some(std::time::UNIX_EPOCH + Duration::from_micros(micros)),
            },
            pending,
            grant_requests: get(&c.grant_requests),
            recalls: get(&c.recalls),
            handbacks: get(&c.handbacks),
            grants_held,
            granted,
        }
    }
}
