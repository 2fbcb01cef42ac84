//! Idempotency keys on the billing path: a request's claim of its key (`Billing::claim`,
//! in the ledger too in a cluster), the body of an answer stored under it, and the
//! `ClaimedKey` the request holds until it answers or ends.

use super::*;

impl Billing {
    /// What a request of `endpoint` with the body `fingerprint` finds under `key` of
    /// `account_id` (`answers::Answers::claim`); when nothing live, the key is claimed for
    /// it until the returned `ClaimedKey` answers or is dropped. With grants (a cluster),
    /// a key this node holds nothing of is claimed in the ledger too, which every node
    /// asks: the first answer given on any node is replayed, a request running on another
    /// node is 409. `Unavailable` when the ledger cannot be asked.
    pub async fn claim(
        &self,
        account_id: i64,
        key: &IdempotencyKey,
        endpoint: Endpoint,
        fingerprint: Fingerprint,
    ) -> Result<Claim<ClaimedKey>, BillingError> {
        let (local, leasing) = {
            let mut books = self.books();
            let now = SystemTime::now();
            let local = books
                .answers
                .claim(account_id, key, endpoint, fingerprint, now);
            (local, books.leasing())
        };
        let claim = local.map_run(|ticket| ClaimedKey {
            billing: self.clone(),
            account_id,
            key: key.clone(),
            ticket,
            open: true,
            in_ledger: false,
        });
        let Claim::Run(mut claimed) = claim else {
            return Ok(claim);
        };
        if leasing != Leasing::Grants {
            return Ok(Claim::Run(claimed));
        }
        let ask = KeyClaim {
            account_id,
            key: key.clone(),
            endpoint,
            fingerprint,
            ticket: claimed.ticket,
            since: SystemTime::now()
                .checked_sub(ANSWER_TTL)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        };
        // Dropped on an error (503), the claim is released in the ledger too: the call may
        // have committed with its answer lost (a release of another ticket's claim deletes
        // nothing).
        claimed.in_ledger = true;
        let holder = self.on_writer(move |store| store.claim_key(&ask)).await?;
        let (used, stage) = match holder {
            Holder::Claimed => return Ok(Claim::Run(claimed)),
            Holder::Running {
                endpoint,
                fingerprint,
            } => ((endpoint, fingerprint), Claim::InProgress),
            Holder::Answered {
                endpoint,
                fingerprint,
                body,
            } => ((endpoint, fingerprint), Claim::Replay(Some(body))),
        };
        // Not this node's: freed here only.
        claimed.in_ledger = false;
        drop(claimed);
        Ok(answers::found(used, (endpoint, fingerprint), stage))
    }

    /// The body of an answer stored under `key` (a replay of an answer whose flush has
    /// committed: `Claim::Replay(None)`), read by the writer from the store.
    pub async fn stored_body(
        &self,
        account_id: i64,
        key: &IdempotencyKey,
    ) -> Result<Option<Arc<[u8]>>, BillingError> {
        let key = key.clone();
        self.on_writer(move |store| store.answer_body(account_id, &key))
            .await
    }
}

/// An idempotency key claimed by the request running under it (`Billing::claim`). Its
/// charge (`Billing::charge_held`) waits on it; `answer` makes both pending. Dropped
/// without an answer (an error, a panic, a client gone), it frees the key, and a charge
/// it held is made pending alone: the work was done and billed, nothing is replayed.
pub struct ClaimedKey {
    billing: Billing,
    account_id: i64,
    key: IdempotencyKey,
    ticket: u64,
    open: bool,
    /// Claimed in a cluster's ledger too: released there by the next flush.
    in_ledger: bool,
}

impl ClaimedKey {
    /// Holds `charge` on this key until the request answers (`Answers::hold`); `false`
    /// when the key is no longer this request's (the charge is then made pending alone).
    pub(super) fn hold(&self, answers: &mut Answers, charge: Held) -> bool {
        answers.hold(self.account_id, &self.key, self.ticket, charge)
    }

    /// The request answered `body`: the key replays it from now on, and its charge and
    /// the answer go into the same pending batch, whose number this returns (durable mode
    /// waits for it).
    pub fn answer(mut self, body: Arc<[u8]>) -> u64 {
        self.open = false;
        let mut books = self.billing.books();
        let batch = books.answer_key(self.account_id, &self.key, self.ticket, body);
        let wake = self.billing.writer_to_wake(&books);
        drop(books);
        self.billing.wake_writer(wake);
        batch
    }
}

impl Drop for ClaimedKey {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let mut books = self.billing.books();
        books.release_key(self.account_id, &self.key, self.ticket, self.in_ledger);
        let wake = self.billing.writer_to_wake(&books);
        drop(books);
        self.billing.wake_writer(wake);
    }
}
