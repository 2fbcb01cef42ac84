//! What the books charged and no flush has taken yet: charge rows per account, key and
//! endpoint, window admissions, counters changed, idempotent answers and released
//! claims, and how a flush takes part of it.

use super::*;

/// Charged, not yet flushed.
#[derive(Default)]
pub(super) struct Pending {
    /// Queries and amount per (account, key, endpoint): a key's usage is counted here,
    /// with its account's charge, and written by the same flush.
    pub(super) rows: FastMap<(i64, i64, Endpoint), (u64, Micros)>,
    /// With grants: queries admitted per account and window.
    pub(super) windows: FastMap<(i64, WindowKey), u64>,
    /// Accounts whose window counters changed.
    pub(super) counters: FastSet<i64>,
    /// Answers of idempotent requests whose charges are in `rows`.
    pub(super) answers: Vec<StoredAnswer>,
    /// Claims in the ledger of keys whose requests ended without an answer.
    pub(super) released: Vec<ReleasedClaim>,
    /// With grants: when each account's oldest charge here was made (`Books::flush_due`).
    pub(super) since: FastMap<i64, BootTime>,
    /// Accounts answered 402 (with the balance the books held), for the store to decide
    /// `balance.empty` (docs/alerts.md); every flush takes them all.
    pub(super) empties: Vec<(i64, Micros)>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty()
            && self.counters.is_empty()
            && self.answers.is_empty()
            && self.released.is_empty()
            && self.windows.is_empty()
            && self.empties.is_empty()
    }

    /// Per account, the amount charged and not yet flushed (one pass over the rows).
    pub(super) fn amounts(&self) -> FastMap<i64, Micros> {
        let mut sums: FastMap<i64, Micros> = FastMap::default();
        for ((id, _, _), (_, amount)) in &self.rows {
            let sum = sums.entry(*id).or_insert(Micros::ZERO);
            *sum = sum.checked_add(*amount).unwrap_or(*sum);
        }
        sums
    }

    pub(super) fn add(&mut self, caller: Caller, endpoint: Endpoint, queries: u64, amount: Micros) {
        let account_id = caller.account_id;
        let row = self
            .rows
            .entry((account_id, caller.key_id, endpoint))
            .or_insert((0, Micros::ZERO));
        row.0 += queries;
        row.1 = row.1.checked_add(amount).unwrap_or(Micros::MAX);
        self.counters.insert(account_id);
        self.since.entry(account_id).or_insert_with(BootTime::now);
    }

    /// A charge held on an idempotency key of `account_id`, made pending.
    pub(super) fn add_held(&mut self, account_id: i64, held: Held) {
        let caller = Caller {
            account_id,
            key_id: held.key_id,
        };
        self.add(caller, held.endpoint, held.queries, held.amount);
    }

    /// Takes out what is pending of the accounts `due` (everything of the answers,
    /// released claims and 402s, whose accounts are always due); the rest stays.
    pub(super) fn take_of(&mut self, due: &FastSet<i64>) -> Pending {
        let mut taken = Pending {
            answers: std::mem::take(&mut self.answers),
            released: std::mem::take(&mut self.released),
            empties: std::mem::take(&mut self.empties),
            ..Pending::default()
        };
        self.rows.retain(|&(id, key, endpoint), &mut row| {
            let keep = !due.contains(&id);
            if !keep {
                taken.rows.insert((id, key, endpoint), row);
            }
            keep
        });
        self.windows.retain(|&(id, key), &mut queries| {
            let keep = !due.contains(&id);
            if !keep {
                taken.windows.insert((id, key), queries);
            }
            keep
        });
        self.counters.retain(|id| {
            let keep = !due.contains(id);
            if !keep {
                taken.counters.insert(*id);
            }
            keep
        });
        self.since.retain(|id, _| !due.contains(id));
        taken
    }
}
