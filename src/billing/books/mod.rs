//! The books: everything charges are decided on (keys, accounts, window counters, the
//! charges not yet flushed, the idempotency keys, this node's grants), behind the one
//! mutex of `Billing`; how a charge is checked, how a flush's batch is taken and given
//! back, and how the store's accounts, keys and grants are taken in.

mod asking;
mod pending;
mod slices;

use super::*;
use crate::domain::rate_limit::{Window, WindowKey};
pub(super) use asking::{Ask, Asking, GRANT_PATIENCE, GRANT_WAIT, GrantRequest, Granted, Short};
use pending::Pending;
use slices::Slice;
pub(super) use slices::WindowShort;

/// Everything charges are decided on.
#[derive(Default)]
pub(super) struct Books {
    keys: FastMap<KeyHash, KeyEntry>,
    active_keys: FastSet<i64>,
    accounts: FastMap<i64, AccountState>,
    pending: Pending,
    /// Idempotency keys: requests running under them (and charges held on them), answers.
    pub(in crate::billing) answers: Answers,
    /// The batch number charges go into now (the next flush).
    batch: u64,
    /// Set while flushes fail: billed requests get 503 (with grants, after
    /// `FAILING_GRACE`).
    failing: Option<String>,
    /// When the flushes began to fail (the first failure's end).
    failing_since: Option<BootTime>,
    /// Durable mode: a request waits for its charge's commit, so one made while flushes
    /// fail would be charged and answered 503.
    durable: bool,
    reload_requests: Vec<std::sync::mpsc::Sender<()>>,
    stop: bool,
    /// A cluster's grants and slices (the store leases grants); `None` for the file,
    /// which leases the whole balance: the single file carries no cluster state.
    grants: Option<Grants>,
    /// Requests short of their grant, waiting for the writer to ask the store.
    grant_requests: Vec<GrantRequest>,
    /// Other calls of requests to the store, made by the writer (`Billing::on_writer`).
    store_calls: Vec<StoreCall>,
    /// Accounts answered 402 since the books last loaded (`note_empty`): the store hears
    /// of an account's first 402 only, until a change (a top-up) reloads the books.
    noted_empty: FastSet<i64>,
}

/// What a node of a cluster holds of the ledger beside the books.
#[derive(Default)]
struct Grants {
    /// This node's grant per account (the balances in `accounts` are then what the
    /// envelope shows, the grants what charges are decided on).
    leases: FastMap<i64, Lease>,
    /// This node's slice per account and limited window.
    slices: FastMap<(i64, Window), Slice>,
    /// The batch being flushed, or whose flush failed and is retried unchanged before
    /// any other (its commit may have happened: merged into the next one, it could be
    /// charged twice).
    in_flight: Option<Batch>,
}

/// With grants and write-behind, an account's charges wait in memory for at most this
/// long before a flush takes them (sooner when its grant is topped up or handed back, an
/// idempotent answer of it is stored, or everything is flushed: stop, a flush asked for,
/// durable mode). A flush then changes only the accounts due, not every account a node
/// served in the last 10 ms: with many accounts, nodes' flushes would otherwise each
/// lock nearly every account and wait for one another. A node killed loses at most
/// this much of its spend (in the customer's favour, as before: never more than its
/// grants).
pub(super) const FLUSH_AGE: Duration = Duration::from_millis(500);
/// With grants, how long a node whose flushes fail keeps answering from its grants: a
/// ledger slow for a moment (a flush past its call timeout on a saturated machine)
/// does not turn into 503s for requests its grants cover. Bounded, because what it
/// answers meanwhile is at risk if the outage outlasts the grants' TTL and other nodes
/// are given the expired grants' money (docs/cluster.md).
pub(super) const FAILING_GRACE: Duration = Duration::from_secs(2);
/// A flush takes the charges of at most this many accounts by age (more only when more
/// are due otherwise).
const FLUSH_ACCOUNTS: usize = 100;

impl Books {
    /// Empty books: batch 1 next, the idempotency keys `answers` loaded from the store,
    /// which leases money as `leasing`.
    pub(super) fn new(answers: Answers, leasing: Leasing, durable: bool) -> Books {
        Books {
            batch: 1,
            answers,
            grants: (leasing == Leasing::Grants).then(Grants::default),
            durable,
            ..Books::default()
        }
    }

    pub(super) fn key(&self, hash: &KeyHash) -> Option<&KeyEntry> {
        self.keys.get(hash)
    }

    pub(super) fn account(&self, account_id: i64) -> Option<&AccountState> {
        self.accounts.get(&account_id)
    }

    pub(super) fn leasing(&self) -> Leasing {
        match self.grants {
            Some(_) => Leasing::Grants,
            None => Leasing::WholeBalance,
        }
    }

    /// This node's grant of the account (a cluster's), to change.
    fn lease_mut(&mut self, account_id: i64) -> Option<&mut Lease> {
        self.grants.as_mut()?.leases.get_mut(&account_id)
    }

    /// This node's grants (none for the file).
    fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.grants.iter().flat_map(|g| g.leases.values())
    }

    /// This node's slice of the account's `window` (a cluster's).
    fn slice(&self, account_id: i64, window: Window) -> Option<&Slice> {
        self.grants.as_ref()?.slices.get(&(account_id, window))
    }

    fn slice_mut(&mut self, account_id: i64, window: Window) -> Option<&mut Slice> {
        self.grants.as_mut()?.slices.get_mut(&(account_id, window))
    }

    /// This node's slices (none for the file).
    fn slices(&self) -> impl Iterator<Item = (&(i64, Window), &Slice)> {
        self.grants.iter().flat_map(|g| g.slices.iter())
    }

    fn slices_mut(&mut self) -> impl Iterator<Item = (&(i64, Window), &mut Slice)> {
        self.grants.iter_mut().flat_map(|g| g.slices.iter_mut())
    }

    /// The batch being flushed or retried (a cluster's).
    fn in_flight(&self) -> Option<&Batch> {
        self.grants.as_ref()?.in_flight.as_ref()
    }

    /// Why flushes fail, while they do.
    pub(super) fn failing(&self) -> Option<&str> {
        self.failing.as_deref()
    }

    pub(super) fn stopping(&self) -> bool {
        self.stop
    }

    /// From now on charges are refused 503 and the writer flushes everything and ends.
    pub(super) fn stop(&mut self) {
        self.stop = true;
    }

    /// Anything charged and not yet taken by a flush.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Applies an admitted charge of `queries` of `endpoint` (`check` passed, the grant
    /// and slices cover it): the account's balance and windows, this node's grant, the
    /// windows' admissions (`billed`), and the charge itself, held on the idempotency key
    /// `hold_on` or pending for the next flush.
    pub(super) fn apply_charge(
        &mut self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        billed: bool,
        now: SystemTime,
        hold_on: Option<&ClaimedKey>,
    ) -> Result<Charged, BillingError> {
        let account = self
            .accounts
            .get_mut(&caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        let cost = account.charge(queries, now)?;
        let status = account.status(now);
        if let Some(lease) = self.lease_mut(caller.account_id) {
            lease.spend(cost, BootTime::now());
        }
        if billed {
            self.admit_in_windows(caller.account_id, queries, now);
            let charge = Held {
                key_id: caller.key_id,
                endpoint,
                queries,
                amount: cost,
            };
            let held = hold_on.is_some_and(|claimed| claimed.hold(&mut self.answers, charge));
            if !held {
                self.pending.add(caller, endpoint, queries, cost);
            }
        }
        Ok(Charged {
            balance: status.balance,
            rate: status.rate,
            cost,
            flush: self.batch,
        })
    }

    /// Counts `queries` of the replay of a stored answer in the caller's account's
    /// windows, charging nothing (`AccountState::count`; 429 when a window is full). In
    /// a cluster they join the node's window admissions (`admit_in_windows`) without
    /// asking the ledger for a slice first: a replay is checked against the counts this
    /// node holds.
    pub(super) fn count_uncharged(
        &mut self,
        caller: Caller,
        queries: u64,
        now: SystemTime,
    ) -> Result<(), BillingError> {
        let account = self
            .accounts
            .get_mut(&caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        account.count(queries, now)?;
        self.pending.counters.insert(caller.account_id);
        self.admit_in_windows(caller.account_id, queries, now);
        Ok(())
    }

    /// Queues a request short of its grant or slices for the writer; `Err` (503) while
    /// flushes fail.
    pub(super) fn ask_for_grant(&mut self, request: GrantRequest) -> Result<(), String> {
        if let Some(why) = &self.failing {
            return Err(why.clone());
        }
        self.grant_requests.push(request);
        Ok(())
    }

    /// Queues a call of a request to the store for the writer; `Err` (503) while flushes
    /// fail or after stop.
    pub(super) fn call_store(&mut self, call: StoreCall) -> Result<(), BillingError> {
        if let Some(why) = &self.failing {
            return Err(BillingError::Unavailable(why.clone()));
        }
        if self.stop {
            return Err(BillingError::Unavailable("billing stopped".into()));
        }
        self.store_calls.push(call);
        Ok(())
    }

    /// Asks the writer to take outside changes in; `done` hears when it has.
    pub(super) fn request_reload(&mut self, done: std::sync::mpsc::Sender<()>) {
        self.reload_requests.push(done);
    }

    /// What the writer has to do now, before its interval ends: stop, a reload, grant
    /// requests, store calls, or (`durable`) a charge to commit.
    pub(super) fn writer_has_work(&self, durable: bool) -> bool {
        self.stop
            || (durable && !self.pending.is_empty())
            || !self.reload_requests.is_empty()
            || !self.grant_requests.is_empty()
            || !self.store_calls.is_empty()
    }

    /// The writer's turn takes every reload request, grant request and store call queued.
    pub(super) fn take_requests(
        &mut self,
    ) -> (
        Vec<std::sync::mpsc::Sender<()>>,
        Vec<GrantRequest>,
        Vec<StoreCall>,
    ) {
        (
            std::mem::take(&mut self.reload_requests),
            std::mem::take(&mut self.grant_requests),
            std::mem::take(&mut self.store_calls),
        )
    }

    /// The batch of this writer turn, if any: the whole balance leased, everything
    /// pending; with grants, the batch whose flush failed (retried unchanged before any
    /// other: its commit may have happened), else what is due (`flush_due`), kept in
    /// flight until its flush commits.
    pub(super) fn next_batch(&mut self, all: bool) -> Option<Batch> {
        if self.grants.is_none() {
            return (!self.pending.is_empty()).then(|| self.take_batch(true));
        }
        if let Some(retried) = self.in_flight() {
            return Some(retried.clone());
        }
        if !self.flush_due(all) {
            return None;
        }
        let batch = self.take_batch(all);
        if let Some(grants) = &mut self.grants {
            grants.in_flight = Some(batch.clone());
        }
        Some(batch)
    }

    /// `batch`, sent at `sent`, committed as `applied`: its answers are written, the
    /// store's grants and windows taken in; why flushes had failed, if they had.
    pub(super) fn flushed(
        &mut self,
        batch: &Batch,
        applied: &Applied,
        sent: BootTime,
    ) -> Option<String> {
        self.answers.written(&batch.answers);
        if let Some(grants) = &mut self.grants {
            grants.in_flight = None;
        }
        self.sync_grants(applied, sent);
        self.sync_windows(applied, sent);
        self.failing_since = None;
        self.failing.take()
    }

    /// `batch` did not commit: the whole balance leased, it goes back into the pending
    /// charges; with grants it stays in flight, retried as it is. Charges are refused 503
    /// (with grants, after `FAILING_GRACE`); the requests waiting for grants are returned
    /// to be refused.
    pub(super) fn flush_failed(&mut self, batch: Batch) -> Vec<GrantRequest> {
        if self.grants.is_none() {
            self.put_back(batch);
        }
        self.failing = Some("the ledger cannot be written".into());
        self.failing_since.get_or_insert_with(BootTime::now);
        std::mem::take(&mut self.grant_requests)
    }

    /// What this node's grant of the account can spend at `at`.
    pub(super) fn usable_grant(&self, account_id: i64, at: BootTime) -> Micros {
        self.grants
            .as_ref()
            .and_then(|g| g.leases.get(&account_id))
            .map_or(Micros::ZERO, |l| l.usable(at))
    }

    /// Takes a grant the ledger answered a request sent at `sent` with.
    pub(super) fn take_grant(&mut self, grant: Grant, sent: BootTime) {
        let unflushed = self.unflushed(grant.account_id);
        self.sync_grant(grant, sent, unflushed);
        if let Some(lease) = self.lease_mut(grant.account_id) {
            lease.granted(sent);
        }
    }

    /// Another node asked for the account: its grant and slices go back at the next
    /// flush.
    pub(super) fn recalled(&mut self, account_id: i64) {
        if let Some(lease) = self.lease_mut(account_id) {
            lease.recalled = true;
        }
        self.recall_slices(account_id);
    }

    /// Metrics: charge rows pending, grants held with something usable, and how much.
    pub(super) fn held_now(&self) -> (u64, u64, Micros) {
        let now = BootTime::now();
        let (mut held, mut granted) = (0, Micros::ZERO);
        for lease in self.leases() {
            let usable = lease.usable(now);
            if usable > Micros::ZERO {
                held += 1;
                granted = granted.checked_add(usable).unwrap_or(Micros::MAX);
            }
        }
        (self.pending.rows.len() as u64, held, granted)
    }

    /// The request under the key (its `ticket`) answered `body`: the key replays it from
    /// now on, and its held charge and the answer go into the pending batch, whose
    /// number this returns.
    pub(super) fn answer_key(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        ticket: u64,
        body: Arc<[u8]>,
    ) -> u64 {
        let (held, stored) = self
            .answers
            .answer(account_id, key, ticket, body, SystemTime::now());
        if let Some(held) = held {
            self.pending.add_held(account_id, held);
        }
        self.pending.answers.extend(stored);
        self.batch
    }

    /// The request under the key ended without an answer: the key is free, a charge it
    /// held is made pending alone, and (`in_ledger`) its claim in the ledger is released
    /// by the next flush.
    pub(super) fn release_key(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        ticket: u64,
        in_ledger: bool,
    ) {
        if let Some(held) = self.answers.release(account_id, key, ticket) {
            self.pending.add_held(account_id, held);
        }
        if in_ledger {
            self.pending.released.push(ReleasedClaim {
                account_id,
                key: key.clone(),
                ticket,
            });
        }
    }

    /// Forgets the idempotency keys no longer replayable at `now`, and the rolled keys
    /// whose grace has ended (refused since by `authenticate`; the store revokes them at
    /// their end with the account's next key change and loads them no more).
    pub(super) fn expire(&mut self, now: SystemTime) {
        self.answers.expire(now);
        let now = crate::domain::date::unix_secs(now);
        let active = &mut self.active_keys;
        self.keys.retain(|_, key| {
            let live = key.expires_at.is_none_or(|end| end > now);
            if !live {
                active.remove(&key.caller.key_id);
            }
            live
        });
    }

    /// 503 while flushes fail or after stop; then the charge rule.
    pub(super) fn check(
        &self,
        caller: Caller,
        queries: u64,
        now: SystemTime,
    ) -> Result<(Micros, AccountStatus), BillingError> {
        if !self.active_keys.contains(&caller.key_id) {
            return Err(Refusal::InvalidKey.into());
        }
        let account = self
            .accounts
            .get(&caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        // The file, and durable mode: 503 from the first failed flush. With grants a node
        // keeps answering from the grants and slices it holds for `FAILING_GRACE` after
        // its flushes began to fail (the failed batch is retried unchanged, the charges
        // after it wait with it), and sooner when it must ask the ledger for more or its
        // grants expire by its own clock (docs/cluster.md).
        if let Some(why) = &self.failing {
            let grace = self.grants.is_some()
                && !self.durable
                && self
                    .failing_since
                    .is_some_and(|since| BootTime::now().since(since) < FAILING_GRACE);
            if !grace {
                return Err(BillingError::Unavailable(why.clone()));
            }
        }
        if self.stop {
            return Err(BillingError::Unavailable("shutting down".into()));
        }
        let cost = account.admits(queries, now)?;
        Ok((cost, account.status(now)))
    }

    /// With grants: when `queries` cost more than this node's usable grant on the
    /// caller's account, how much more it needs and how much to ask for. `None` when the
    /// grant covers them, or when the charge is refused for another reason first (401,
    /// 503) or the whole balance is this node's (the file).
    pub(super) fn short_of_grant(
        &mut self,
        caller: Caller,
        queries: u64,
        now: SystemTime,
    ) -> Option<Short> {
        self.grants.as_ref()?;
        match self.check(caller, queries, now) {
            Ok(_) | Err(BillingError::Refused(Refusal::InsufficientBalance)) => {}
            Err(_) => return None,
        }
        let cost = PRICE_PER_QUERY.checked_mul(queries)?;
        let grants = self.grants.as_mut()?;
        let lease = grants.leases.entry(caller.account_id).or_default();
        let usable = lease.usable(BootTime::now());
        let need = cost.checked_sub(usable).filter(|n| *n > Micros::ZERO)?;
        Some(Short {
            cost,
            want: lease.want(need),
        })
    }

    /// What this node charged of the account and the store does not hold yet: pending,
    /// held on idempotency keys, and (with grants) in the batch being flushed.
    pub(super) fn unflushed(&self, account_id: i64) -> Micros {
        self.unflushed_all()
            .get(&account_id)
            .copied()
            .unwrap_or(Micros::ZERO)
    }

    /// [`unflushed`](Self::unflushed) of every account, in one pass over the pending
    /// rows, the idempotency keys and the batch in flight (a reload or a flush's grants
    /// hold the books' mutex, which every billed request waits on, and a day of
    /// idempotency keys may be in `answers`).
    pub(super) fn unflushed_all(&self) -> FastMap<i64, Micros> {
        let mut sums = self.pending.amounts();
        let mut add = |id: i64, amount: Micros| {
            let sum = sums.entry(id).or_insert(Micros::ZERO);
            *sum = sum.checked_add(amount).unwrap_or(Micros::MAX);
        };
        for (id, amount) in self.answers.held() {
            add(id, amount);
        }
        for r in self.in_flight().iter().flat_map(|batch| &batch.charges) {
            add(r.account_id, r.amount);
        }
        sums
    }

    /// Takes what the store holds for this node on an account after a grant or a flush
    /// sent at `sent`: the grant left is its `remaining` minus the charges the store has
    /// not seen, spendable until `sent`'s deadline; the balance shown likewise.
    /// `unflushed`: the account's [`unflushed`](Self::unflushed).
    pub(super) fn sync_grant(&mut self, grant: Grant, sent: BootTime, unflushed: Micros) {
        let less = |m: Micros| m.checked_sub(unflushed).filter(|m| !m.is_negative());
        // A grant handed back in the batch being flushed is still in `remaining` until
        // that flush commits: it is not this node's to spend any more.
        let Some(grants) = &mut self.grants else {
            return;
        };
        let returning = grants.in_flight.as_ref().map_or(Micros::ZERO, |batch| {
            batch
                .returns
                .iter()
                .filter(|(id, _)| *id == grant.account_id)
                .fold(Micros::ZERO, |sum, (_, m)| {
                    sum.checked_add(*m).unwrap_or(sum)
                })
        });
        let lease = grants.leases.entry(grant.account_id).or_default();
        lease.left = less(grant.remaining)
            .and_then(|m| m.checked_sub(returning))
            .filter(|m| !m.is_negative())
            .unwrap_or(Micros::ZERO);
        lease.deadline = Some(sent.deadline());
        if let Some(account) = self.accounts.get_mut(&grant.account_id) {
            account.balance = less(grant.balance).unwrap_or(Micros::ZERO);
        }
    }

    /// After a flush sent at `sent`: the grants it reports as the store holds them (one
    /// of a touched account not listed is gone; one of another account not listed is
    /// as it was, spendable until the deadline of the flush or grant that last renewed it).
    pub(super) fn sync_grants(&mut self, applied: &Applied, sent: BootTime) {
        let Some(grants) = &mut self.grants else {
            return;
        };
        for id in &applied.touched {
            if let Some(lease) = grants.leases.get_mut(id) {
                lease.left = Micros::ZERO;
                lease.deadline = None;
            }
        }
        let unflushed = self.unflushed_all();
        for grant in &applied.grants {
            let of = unflushed.get(&grant.account_id).copied();
            self.sync_grant(*grant, sent, of.unwrap_or(Micros::ZERO));
        }
    }

    /// The account was answered 402 with less than one query's price left (a bulk
    /// request too big for a balance that still pays for lookups, or a node whose grants
    /// other nodes keep, is no empty balance): the next flush tells the store, which
    /// decides `balance.empty` (once until the balance rises, across nodes); a later 402
    /// is not told again until the books load again. Whether it was new (the writer is
    /// woken for it).
    pub(in crate::billing) fn note_empty(&mut self, account_id: i64) -> bool {
        let balance = self
            .accounts
            .get(&account_id)
            .map_or(Micros::ZERO, |a| a.balance);
        if balance >= PRICE_PER_QUERY || !self.noted_empty.insert(account_id) {
            return false;
        }
        self.pending.empties.push((account_id, balance));
        true
    }

    /// Takes the store's accounts and keys. A known account keeps its window counters
    /// (the server is their only writer) and its balance becomes the stored one minus
    /// what is charged and not yet flushed.
    pub(super) fn replace(&mut self, snapshot: Snapshot) {
        self.noted_empty.clear();
        let mut accounts =
            FastMap::with_capacity_and_hasher(snapshot.accounts.len(), Default::default());
        let unflushed_all = self.unflushed_all();
        let mut changed_limits = Vec::new();
        for (id, mut stored) in snapshot.accounts {
            if let Some(known) = self.accounts.get(&id) {
                stored.counters = known.counters;
                if known.limits != stored.limits {
                    changed_limits.push(id);
                }
            }
            let unflushed = unflushed_all.get(&id).copied().unwrap_or(Micros::ZERO);
            stored.balance = stored
                .balance
                .checked_sub(unflushed)
                .filter(|b| !b.is_negative())
                .unwrap_or(Micros::ZERO);
            accounts.insert(id, stored);
        }
        self.accounts = accounts;
        for id in changed_limits {
            self.void_slices(id);
        }
        self.active_keys = snapshot.keys.iter().map(|k| k.caller.key_id).collect();
        self.keys = snapshot
            .keys
            .into_iter()
            .map(|k| {
                let entry = KeyEntry {
                    caller: k.caller,
                    publishable: k.publishable.map(Arc::new),
                    expires_at: k.expires_at,
                };
                (k.hash, entry)
            })
            .collect();
    }

    /// The pending charges as a batch; the books start the next one.
    /// The last batch holding a charge (or an answer) decided so far: the one charges go
    /// into now, or, when it is empty, the one taken before it (committed, or being
    /// committed). Batches commit in order and a failed one goes back into the pending
    /// charges, so `done` reaching it means everything decided before is in the file.
    pub(super) fn last_charged_batch(&self) -> u64 {
        if self.pending.is_empty() {
            self.batch - 1
        } else {
            self.batch
        }
    }

    /// Takes the next batch: everything pending when `all` or when the whole balance is
    /// leased; otherwise what `flush_due` finds due, and the grants and slices to hand
    /// back or top up.
    pub(super) fn take_batch(&mut self, all: bool) -> Batch {
        let now = BootTime::now();
        let stopping = self.stop;
        let mut returns: Vec<(i64, Micros)> = Vec::new();
        let mut topups: Vec<(i64, Micros)> = Vec::new();
        for (id, lease) in self.grants.iter_mut().flat_map(|g| g.leases.iter_mut()) {
            if lease.to_return(now, stopping) {
                returns.push((*id, lease.left));
                lease.left = Micros::ZERO;
                lease.recalled = false;
                continue;
            }
            if let Some(want) = lease.top_up(now, stopping) {
                topups.push((*id, want));
                lease.topped_up = Some(now);
            }
            if lease.left == Micros::ZERO {
                lease.recalled = false;
            }
        }
        returns.sort_unstable();
        topups.sort_unstable();
        let slice_returns = self.take_slice_returns(SystemTime::now());
        let pending = if all || self.grants.is_none() {
            std::mem::take(&mut self.pending)
        } else {
            let mut due: FastSet<i64> = returns.iter().chain(&topups).map(|(id, _)| *id).collect();
            due.extend(slice_returns.iter().map(|q| q.account_id));
            due.extend(self.pending.answers.iter().map(|a| a.account_id));
            due.extend(self.pending.released.iter().map(|r| r.account_id));
            // The oldest charges first, up to `FLUSH_ACCOUNTS` accounts in all: flushes
            // stay short, and accounts that started together spread over several.
            let mut aged: Vec<(BootTime, i64)> = self
                .aged(now)
                .filter(|id| !due.contains(id))
                .map(|id| (self.pending.since[&id], id))
                .collect();
            let room = FLUSH_ACCOUNTS.saturating_sub(due.len());
            if aged.len() > room {
                aged.select_nth_unstable(room);
                aged.truncate(room);
            }
            due.extend(aged.into_iter().map(|(_, id)| id));
            self.pending.take_of(&due)
        };
        let number = self.batch;
        self.batch += 1;
        let counters = pending
            .counters
            .iter()
            .filter_map(|id| Some((*id, self.accounts.get(id)?.counters)))
            .collect();
        let answers = pending.answers;
        let released = pending.released;
        let empties = pending.empties;
        let mut admitted: Vec<WindowQueries> = pending
            .windows
            .into_iter()
            .map(|((account_id, window), queries)| WindowQueries {
                account_id,
                window,
                queries,
            })
            .collect();
        admitted.sort_unstable();
        let mut charges: Vec<ChargeRow> = pending
            .rows
            .into_iter()
            .map(
                |((account_id, key_id, endpoint), (queries, amount))| ChargeRow {
                    account_id,
                    key_id,
                    endpoint,
                    queries,
                    amount,
                },
            )
            .collect();
        charges.sort_by_key(|r| (r.account_id, r.key_id, r.endpoint));
        Batch {
            number,
            at: SystemTime::now(),
            charges,
            counters,
            answers,
            released,
            returns,
            topups,
            admitted,
            slice_returns,
            empties,
        }
    }

    /// The accounts whose oldest pending charge is `FLUSH_AGE` old.
    fn aged(&self, now: BootTime) -> impl Iterator<Item = i64> + '_ {
        self.pending
            .since
            .iter()
            .filter(move |(_, since)| now.since(**since) >= FLUSH_AGE)
            .map(|(id, _)| *id)
    }

    /// Is there anything to flush: with `all` (or the whole balance leased), anything
    /// pending; with grants, also a grant or slice to hand back or top up; otherwise
    /// (grants, write-behind) only charges of an account due (`FLUSH_AGE`), answers or
    /// released claims.
    pub(super) fn flush_due(&self, all: bool) -> bool {
        if self.grants.is_none() {
            return !self.pending.is_empty();
        }
        if all && !self.pending.is_empty() {
            return true;
        }
        let now = BootTime::now();
        !self.pending.answers.is_empty()
            || !self.pending.released.is_empty()
            || !self.pending.empties.is_empty()
            || self.aged(now).next().is_some()
            || self.leases().any(|lease| {
                lease.to_return(now, self.stop) || lease.top_up(now, self.stop).is_some()
            })
            || self.slices_due()
    }

    /// Is anything not yet in the store: charges, or (with grants) a grant left?
    pub(super) fn holds_anything(&self) -> bool {
        !self.pending.is_empty()
            || self.in_flight().is_some()
            || self.leases().any(|l| l.left > Micros::ZERO)
            || self.holds_slices()
    }

    /// A batch that did not commit goes back into the pending charges.
    pub(super) fn put_back(&mut self, batch: Batch) {
        for row in batch.charges {
            let caller = Caller {
                account_id: row.account_id,
                key_id: row.key_id,
            };
            self.pending
                .add(caller, row.endpoint, row.queries, row.amount);
        }
        self.pending
            .counters
            .extend(batch.counters.into_iter().map(|(id, _)| id));
        self.pending.answers.extend(batch.answers);
        self.pending.empties.extend(batch.empties);
        self.pending.released.extend(batch.released);
        for q in batch.admitted {
            *self
                .pending
                .windows
                .entry((q.account_id, q.window))
                .or_default() += q.queries;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: i64) -> Micros {
        Micros::new(v).unwrap()
    }

    fn cluster() -> Books {
        Books::new(Answers::default(), Leasing::Grants, false)
    }

    /// The account's key of the same number.
    fn caller(account_id: i64) -> Caller {
        Caller {
            account_id,
            key_id: account_id,
        }
    }

    #[test]
    fn with_grants_a_flush_takes_the_accounts_due_and_leaves_the_others_pending() {
        let mut books = cluster();
        books.pending.add(caller(1), Endpoint::Lookup, 1, m(28));
        books.pending.add(caller(2), Endpoint::Lookup, 2, m(56));
        assert!(!books.flush_due(false), "nothing is old enough yet");
        assert!(books.flush_due(true));
        let old = BootTime::now().before(FLUSH_AGE);
        books.pending.since.insert(1, old);
        assert!(books.flush_due(false));
        let batch = books.take_batch(false);
        let accounts: Vec<i64> = batch.charges.iter().map(|c| c.account_id).collect();
        assert_eq!(accounts, vec![1]);
        assert_eq!(batch.charges[0].amount, m(28));
        // Account 2 waits, and counts as unflushed.
        assert_eq!(books.pending.rows.len(), 1);
        assert_eq!(books.unflushed(2), m(56));
        assert!(!books.flush_due(false));
        // Everything goes when everything is asked for (stop, durable, a flush asked).
        let rest = books.take_batch(true);
        assert_eq!(rest.charges.len(), 1);
        assert_eq!(rest.charges[0].account_id, 2);
        assert!(books.pending.is_empty());
    }

    #[test]
    fn a_grant_running_low_makes_its_account_due_with_a_top_up() {
        let mut books = cluster();
        let now = BootTime::now();
        let mut lease = Lease::default();
        lease.left = m(2_800);
        lease.deadline = Some(now.deadline());
        lease.spend(m(1_428), now);
        books.grants.as_mut().unwrap().leases.insert(7, lease);
        books.pending.add(caller(7), Endpoint::Lookup, 51, m(1_428));
        books.pending.add(caller(8), Endpoint::Lookup, 1, m(28));
        assert!(books.flush_due(false));
        let batch = books.take_batch(false);
        assert_eq!(batch.topups.len(), 1);
        assert_eq!(batch.topups[0].0, 7);
        let accounts: Vec<i64> = batch.charges.iter().map(|c| c.account_id).collect();
        assert_eq!(accounts, vec![7], "account 8 is not due");
    }

    #[test]
    fn the_whole_balance_leased_takes_everything_pending() {
        let mut books = Books::default();
        books.pending.add(caller(1), Endpoint::Lookup, 1, m(28));
        books.pending.add(caller(2), Endpoint::Lookup, 1, m(28));
        assert!(books.flush_due(false));
        assert_eq!(books.take_batch(false).charges.len(), 2);
    }
}
