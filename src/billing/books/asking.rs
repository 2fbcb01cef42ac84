//! A charge short of its grant or slices (cluster mode): what it asks the writer for, and
//! how it reads the ledger's answers until it can be decided (`Billing::charge`).

use super::slices::WindowShort;
use super::*;

/// A request short of its grant, or of its slices, asks the writer for more.
pub(in crate::billing) struct GrantRequest {
    pub(in crate::billing) account_id: i64,
    pub(in crate::billing) ask: Ask,
    pub(in crate::billing) reply: tokio::sync::oneshot::Sender<Result<Granted, String>>,
}

/// What a request is short of: money, or room in limited windows.
#[derive(Debug, Clone)]
pub(in crate::billing) enum Ask {
    Money(Short),
    Windows(WindowShort),
}

/// A charge the node's grant does not cover: its cost, and how much to ask for (what is
/// missing is decided when the writer asks: other requests may have spent some since).
#[derive(Debug, Clone, Copy)]
pub(in crate::billing) struct Short {
    pub(in crate::billing) cost: Micros,
    pub(in crate::billing) want: Micros,
}

/// One charge asking the ledger for grants: what the answers so far decide.
pub(in crate::billing) struct Asking {
    pub(in crate::billing) give_up: Instant,
    /// Nothing was free, but other nodes held grants of the account and were told to hand
    /// them back: wait, ask again.
    pub(in crate::billing) recall_wait: bool,
    pub(in crate::billing) recalls: u32,
    pub(in crate::billing) granted: u32,
}

impl Asking {
    pub(in crate::billing) fn new() -> Asking {
        Asking {
            give_up: Instant::now() + GRANT_PATIENCE,
            recall_wait: false,
            recalls: 0,
            granted: 0,
        }
    }

    /// After the ledger's answer: `Some` verdict to give (402 when nothing was free and
    /// no other node held any of the account, or still held some after `RECALLS` recall
    /// waits; 503 when the ledger cannot be reached or other requests of the node kept
    /// taking the grants), or `None`: decide again (after the recall wait when
    /// `recall_wait`).
    pub(in crate::billing) fn after(
        &mut self,
        answer: Result<Granted, String>,
    ) -> Option<Result<Charged, BillingError>> {
        self.recall_wait = false;
        match answer {
            Ok(Granted::More) => self.granted += 1,
            Ok(Granted::Nothing { elsewhere: false }) => {
                return Some(Err(Refusal::InsufficientBalance.into()));
            }
            Ok(Granted::Nothing { elsewhere: true }) if self.recalls >= RECALLS => {
                return Some(Err(Refusal::InsufficientBalance.into()));
            }
            Ok(Granted::Nothing { elsewhere: true }) => {
                self.recalls += 1;
                self.recall_wait = true;
            }
            Ok(Granted::Full { window, elsewhere }) if !elsewhere || self.recalls >= RECALLS => {
                let retry_after_secs = window.seconds_left(SystemTime::now());
                return Some(Err(Refusal::RateLimited { retry_after_secs }.into()));
            }
            Ok(Granted::Full { .. }) => {
                self.recalls += 1;
                self.recall_wait = true;
            }
            Err(why) => {
                tracing::warn!("a charge short of its grant gets 503: {why}");
                return Some(Err(BillingError::Unavailable(why)));
            }
        }
        if Instant::now() >= self.give_up {
            tracing::warn!(
                "a charge short of its grant gets 503: asked for {GRANT_PATIENCE:?} \
                 ({} grants taken by other requests, {} recalls)",
                self.granted,
                self.recalls
            );
            return Some(Err(BillingError::Unavailable(
                "the grants of this node were taken by its other requests".into(),
            )));
        }
        None
    }
}

/// What the ledger answered a grant request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::billing) enum Granted {
    /// The grant grew (or already covered the need): decide again.
    More,
    /// Less than the need is free; `elsewhere`: other nodes hold grants of the account
    /// (they were told to hand them back).
    Nothing { elsewhere: bool },
    /// A limited window has less room than the need (the first such, shortest first);
    /// `elsewhere`: other nodes hold slices of it that could cover the need (they were
    /// told to hand them back).
    Full { window: Window, elsewhere: bool },
}

/// How many recall waits a charge short of money sits through while other nodes still
/// hold grants of the account, before it answers 402 (a live node hands back within a
/// flush or two; a dead one's grant expires after `lease::LEASE_TTL`).
pub(in crate::billing) const RECALLS: u32 = 5;

/// How long one charge keeps asking for grants before it gives up with 503 (the ledger
/// kept granting, and other requests of the node kept taking it first).
pub(in crate::billing) const GRANT_PATIENCE: Duration = Duration::from_secs(5);
/// How long a request waits for the writer to answer its grant request.
pub(in crate::billing) const GRANT_WAIT: Duration = Duration::from_secs(2);
