//! What the dashboard holds in memory of the store, so that a stranger's request costs the
//! store nothing: the sign-in page's providers and the webhook's payment settings. A copy
//! is read again when the books reloaded after a change made elsewhere (the CLI tells
//! every server of a change of providers or payments before it returns: the file's
//! server, or every node through the ledger's version), after [`FRESH`] whatever happened,
//! and on demand at most once every [`REREAD_AFTER`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A copy is read again after this long, whatever happened.
pub(super) const FRESH: Duration = Duration::from_secs(10);
/// A copy asked to be read again (a webhook's signature matched no secret held) is, at
/// most this often.
pub(super) const REREAD_AFTER: Duration = Duration::from_secs(1);

/// A copy of `T` as read from the store, and when.
pub(super) struct Held<T> {
    slot: Mutex<Option<Copy<T>>>,
}

struct Copy<T> {
    read_at: Instant,
    /// The books' reloads when it was read (`Billing::reloads`).
    reloads: u64,
    value: T,
}

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held {
            slot: Mutex::new(None),
        }
    }
}

impl<T: Clone> Held<T> {
    /// The copy held, unless the books reloaded since (`reloads` now) or it is stale;
    /// with `reread`, also when it was read more than [`REREAD_AFTER`] ago.
    pub(super) fn fresh(&self, reloads: u64, reread: bool) -> Option<T> {
        let slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        let copy = slot.as_ref()?;
        let age = copy.read_at.elapsed();
        let stale = copy.reloads != reloads || age >= FRESH || (reread && age >= REREAD_AFTER);
        (!stale).then(|| copy.value.clone())
    }

    /// Holds `value`, read from the store from `read_at` on, when the books had reloaded
    /// `reloads` times (taken before the read: a reload during it makes the copy stale).
    pub(super) fn put(&self, value: T, read_at: Instant, reloads: u64) {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(Copy {
            read_at,
            reloads,
            value,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_holds_until_the_books_reload_or_a_reread_after_a_second() {
        let held = Held::default();
        assert_eq!(held.fresh(0, false), None);
        held.put(7, Instant::now(), 3);
        assert_eq!(held.fresh(3, false), Some(7));
        assert_eq!(held.fresh(3, true), Some(7), "read less than a second ago");
        assert_eq!(held.fresh(4, false), None, "the books reloaded");
        held.put(8, Instant::now() - REREAD_AFTER, 4);
        assert_eq!(held.fresh(4, false), Some(8));
        assert_eq!(held.fresh(4, true), None);
        held.put(9, Instant::now() - FRESH, 4);
        assert_eq!(held.fresh(4, false), None, "stale");
    }
}
