//! The idempotency keys in the books (docs/money.md, "Idempotent bulk requests"): for
//! each (account, `Idempotency-Key`), the request running under it or the answer it got.
//!
//! Why here, beside the charges: an answer is kept so that a retry is never billed twice,
//! so it must be in the file exactly when its charge is. A request's charge is decided
//! like any other (balance and windows change at once, in memory) but *held* on its key
//! until its answer is rendered; then the charge and the answer go into the pending batch
//! together, under the books' mutex, and one commit writes both. A crash before that
//! commit loses both (the retry runs and is charged once), never one of them.
//!
//! Memory holds every key answered in the last 24 hours without its body, and a body only
//! until the flush that writes it commits; a replay of an older answer reads its body
//! from the file (`db::sqlite::idempotency::body`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::db::rows::{AnswerIndex, StoredAnswer};
use crate::domain::charge::Endpoint;
use crate::domain::idempotency::{Fingerprint, IdempotencyKey, replayable};
use crate::domain::money::Micros;

/// What a request with an `Idempotency-Key` finds under it; `R` names the claim made
/// when nothing live is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim<R = u64> {
    /// Nothing live: the request runs, the key is its own until it answers or fails.
    Run(R),
    /// The answer of the same request: its body while it is not yet in the file, else
    /// `None` (read it there).
    Replay(Option<Arc<[u8]>>),
    /// The key was used for another request: another body...
    OtherBody,
    /// ...or another operation.
    OtherEndpoint(Endpoint),
    /// The request that claimed the key has not answered yet.
    InProgress,
}

impl<R> Claim<R> {
    pub(super) fn map_run<S>(self, run: impl FnOnce(R) -> S) -> Claim<S> {
        match self {
            Claim::Run(r) => Claim::Run(run(r)),
            Claim::Replay(body) => Claim::Replay(body),
            Claim::OtherBody => Claim::OtherBody,
            Claim::OtherEndpoint(e) => Claim::OtherEndpoint(e),
            Claim::InProgress => Claim::InProgress,
        }
    }
}

/// What a request of `asked` (endpoint, body) gets from a live key used by `found`: the
/// key's `stage` (in progress, or its answer replayed) when they are the same request.
pub fn found<R>(
    found: (Endpoint, Fingerprint),
    asked: (Endpoint, Fingerprint),
    stage: Claim<R>,
) -> Claim<R> {
    match stage {
        _ if found.0 != asked.0 => Claim::OtherEndpoint(found.0),
        _ if found.1 != asked.1 => Claim::OtherBody,
        stage => stage,
    }
}

/// A charge decided and held on its key: `queries` and their `amount`, made with the API
/// key `key_id` (row id; the request that claimed the idempotency key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub key_id: i64,
    pub endpoint: Endpoint,
    pub queries: u64,
    pub amount: Micros,
}

/// The keys of every account.
#[derive(Debug, Default)]
pub(super) struct Answers {
    entries: HashMap<(i64, IdempotencyKey), Entry>,
    next_ticket: u64,
}

#[derive(Debug)]
struct Entry {
    endpoint: Endpoint,
    fingerprint: Fingerprint,
    state: Stage,
}

#[derive(Debug)]
enum Stage {
    /// A request is working under the key (its claim's ticket); its charge, once decided,
    /// waits here for its answer.
    Running { ticket: u64, held: Option<Held> },
    /// Answered at `answered`; the body until the flush that writes it commits.
    Answered {
        answered: SystemTime,
        body: Option<Arc<[u8]>>,
    },
}

impl Answers {
    /// The keys answered in the file (`db::sqlite::idempotency::load_index`).
    pub(super) fn from_index(index: Vec<AnswerIndex>) -> Answers {
        let entries = index
            .into_iter()
            .map(|a| {
                let entry = Entry {
                    endpoint: a.endpoint,
                    fingerprint: a.fingerprint,
                    state: Stage::Answered {
                        answered: a.answered,
                        body: None,
                    },
                };
                ((a.account_id, a.key), entry)
            })
            .collect();
        Answers {
            entries,
            next_ticket: 1,
        }
    }

    /// What a request of `endpoint` with `fingerprint` finds under `key` at `now`; when
    /// nothing live, the key is claimed for it.
    pub(super) fn claim(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        endpoint: Endpoint,
        fingerprint: Fingerprint,
        now: SystemTime,
    ) -> Claim {
        if let Some(entry) = self.entries.get(&(account_id, key.clone())) {
            let stage = match &entry.state {
                Stage::Running { .. } => Some(Claim::InProgress),
                Stage::Answered { answered, body } => {
                    replayable(*answered, now).then(|| Claim::Replay(body.clone()))
                }
            };
            if let Some(stage) = stage {
                let used = (entry.endpoint, entry.fingerprint);
                return found(used, (endpoint, fingerprint), stage);
            }
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.entries.insert(
            (account_id, key.clone()),
            Entry {
                endpoint,
                fingerprint,
                state: Stage::Running { ticket, held: None },
            },
        );
        Claim::Run(ticket)
    }

    /// Holds `charge` on the claim `ticket`; `false` when the claim is gone (then the
    /// caller makes it pending at once).
    pub(super) fn hold(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        ticket: u64,
        charge: Held,
    ) -> bool {
        match self.running(account_id, key, ticket) {
            Some(held) => {
                *held = Some(held.map_or(charge, |h| Held {
                    queries: h.queries + charge.queries,
                    amount: h.amount.checked_add(charge.amount).unwrap_or(Micros::MAX),
                    ..h
                }));
                true
            }
            None => false,
        }
    }

    /// The claim `ticket` answered `body` at `now`: the key now replays it. The charge it
    /// held, and the answer to write.
    pub(super) fn answer(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        ticket: u64,
        body: Arc<[u8]>,
        now: SystemTime,
    ) -> (Option<Held>, Option<StoredAnswer>) {
        let Some(held) = self.running(account_id, key, ticket).map(|h| h.take()) else {
            return (None, None);
        };
        let Some(entry) = self.entries.get_mut(&(account_id, key.clone())) else {
            return (held, None);
        };
        entry.state = Stage::Answered {
            answered: now,
            body: Some(body.clone()),
        };
        let stored = StoredAnswer {
            account_id,
            key: key.clone(),
            endpoint: entry.endpoint,
            fingerprint: entry.fingerprint,
            body,
            answered: now,
        };
        (held, Some(stored))
    }

    /// The claim `ticket` ends without an answer (an error, a panic, a client gone): the
    /// key is free again. The charge it held, if any.
    pub(super) fn release(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        ticket: u64,
    ) -> Option<Held> {
        let held = self.running(account_id, key, ticket)?.take();
        self.entries.remove(&(account_id, key.clone()));
        held
    }

    /// The flush holding `answers` committed: their bodies are in the file now.
    pub(super) fn written(&mut self, answers: &[StoredAnswer]) {
        for stored in answers {
            let key = (stored.account_id, stored.key.clone());
            if let Some(Entry {
                state: Stage::Answered { answered, body },
                ..
            }) = self.entries.get_mut(&key)
                && *answered == stored.answered
            {
                *body = None;
            }
        }
    }

    /// Forgets the answers no longer replayable at `now` (their rows are purged from the
    /// file separately). How many.
    pub(super) fn expire(&mut self, now: SystemTime) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, entry| match &entry.state {
            Stage::Running { .. } => true,
            // A body not yet written stays until it is.
            Stage::Answered { answered, body } => body.is_some() || replayable(*answered, now),
        });
        before - self.entries.len()
    }

    /// Per account, what it has been charged on claims that have not answered yet.
    pub(super) fn held(&self) -> HashMap<i64, Micros> {
        let mut sums: HashMap<i64, Micros> = HashMap::new();
        for ((id, _), entry) in &self.entries {
            if let Stage::Running {
                held: Some(held), ..
            } = &entry.state
            {
                let sum = sums.entry(*id).or_insert(Micros::ZERO);
                *sum = sum.checked_add(held.amount).unwrap_or(*sum);
            }
        }
        sums
    }

    /// Keys in memory.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn running(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
        ticket: u64,
    ) -> Option<&mut Option<Held>> {
        match self.entries.get_mut(&(account_id, key.clone())) {
            Some(Entry {
                state: Stage::Running { ticket: t, held },
                ..
            }) if *t == ticket => Some(held),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::idempotency::ANSWER_TTL;

    fn key(text: &str) -> IdempotencyKey {
        IdempotencyKey::parse(text.as_bytes()).unwrap()
    }

    const BODY: Fingerprint = Fingerprint::from_bytes([1; 32]);
    const OTHER: Fingerprint = Fingerprint::from_bytes([2; 32]);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000 + secs)
    }

    fn held(queries: u64) -> Held {
        Held {
            key_id: 1,
            endpoint: Endpoint::ValidateBulk,
            queries,
            amount: Micros::new(28 * queries as i64).unwrap(),
        }
    }

    #[test]
    fn a_key_runs_once_then_replays_its_answer_to_the_same_body_only() {
        let mut answers = Answers::default();
        let k = key("k");
        let Claim::Run(ticket) = answers.claim(1, &k, Endpoint::ValidateBulk, BODY, at(0)) else {
            panic!("a new key runs")
        };
        // While it runs: the same request is in progress; others are refused as they
        // would be after.
        assert_eq!(
            answers.claim(1, &k, Endpoint::ValidateBulk, BODY, at(0)),
            Claim::InProgress
        );
        assert_eq!(
            answers.claim(1, &k, Endpoint::ValidateBulk, OTHER, at(0)),
            Claim::OtherBody
        );
        assert!(answers.hold(1, &k, ticket, held(3)));
        assert_eq!(answers.held().get(&1), Some(&Micros::new(84).unwrap()));
        assert_eq!(answers.held().get(&2), None);
        let body: Arc<[u8]> = Arc::from(&b"{}"[..]);
        let (charge, stored) = answers.answer(1, &k, ticket, body.clone(), at(1));
        assert_eq!(charge, Some(held(3)));
        let stored = stored.unwrap();
        assert_eq!((stored.account_id, stored.answered), (1, at(1)));
        assert_eq!(answers.held().get(&1), None);
        assert_eq!(
            answers.claim(1, &k, Endpoint::ValidateBulk, BODY, at(2)),
            Claim::Replay(Some(body))
        );
        assert_eq!(
            answers.claim(1, &k, Endpoint::NearestBulk, BODY, at(2)),
            Claim::OtherEndpoint(Endpoint::ValidateBulk)
        );
        assert_eq!(
            answers.claim(1, &k, Endpoint::ValidateBulk, OTHER, at(2)),
            Claim::OtherBody
        );
        // Another account's same key is another request.
        assert!(matches!(
            answers.claim(2, &k, Endpoint::ValidateBulk, OTHER, at(2)),
            Claim::Run(_)
        ));
        // Once written, the body is read from the file.
        answers.written(&[stored]);
        assert_eq!(
            answers.claim(1, &k, Endpoint::ValidateBulk, BODY, at(3)),
            Claim::Replay(None)
        );
    }

    #[test]
    fn a_claim_that_ends_without_an_answer_frees_its_key_and_gives_back_its_charge() {
        let mut answers = Answers::default();
        let k = key("k");
        let Claim::Run(ticket) = answers.claim(1, &k, Endpoint::NearestBulk, BODY, at(0)) else {
            panic!()
        };
        assert!(answers.hold(1, &k, ticket, held(2)));
        assert_eq!(answers.release(1, &k, ticket), Some(held(2)));
        assert_eq!(answers.len(), 0);
        // A stale ticket touches nothing.
        let Claim::Run(second) = answers.claim(1, &k, Endpoint::NearestBulk, OTHER, at(1)) else {
            panic!("a freed key runs again, with any body")
        };
        assert_eq!(answers.release(1, &k, ticket), None);
        assert!(!answers.hold(1, &k, ticket, held(1)));
        assert_eq!(
            answers.claim(1, &k, Endpoint::NearestBulk, OTHER, at(1)),
            Claim::InProgress
        );
        assert_eq!(answers.release(1, &k, second), None);
    }

    #[test]
    fn an_answer_is_replayed_for_24_hours_then_its_key_runs_again() {
        let mut answers = Answers::from_index(vec![AnswerIndex {
            account_id: 1,
            key: key("k"),
            endpoint: Endpoint::ValidateBulk,
            fingerprint: BODY,
            answered: at(0),
        }]);
        let last = at(0) + ANSWER_TTL - Duration::from_secs(1);
        assert_eq!(
            answers.claim(1, &key("k"), Endpoint::ValidateBulk, OTHER, last),
            Claim::OtherBody
        );
        assert_eq!(answers.expire(last), 0);
        assert_eq!(answers.expire(at(0) + ANSWER_TTL), 1);
        // Expired (forgotten or not yet), the key runs as new, with any body.
        let mut kept = Answers::from_index(vec![AnswerIndex {
            account_id: 1,
            key: key("k"),
            endpoint: Endpoint::ValidateBulk,
            fingerprint: BODY,
            answered: at(0),
        }]);
        assert!(matches!(
            kept.claim(
                1,
                &key("k"),
                Endpoint::NearestBulk,
                OTHER,
                at(0) + ANSWER_TTL
            ),
            Claim::Run(_)
        ));
    }
}
