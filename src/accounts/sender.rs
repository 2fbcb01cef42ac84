//! The sender: delivers the outbox's due attempts (`alert_deliveries`) after the commits
//! that made them, on the account store's threads, so nothing of the billed path waits on
//! a delivery. Every node of a cluster runs one; a claim holds an attempt for
//! [`LEASE_SECS`] (a sender that dies lets it go then, so a crash delays a delivery,
//! never loses it), and each attempt is recorded as it ends, with the next one when it
//! failed (`events::next_attempt`: 5 s, then four times longer each time, for 24 hours).
//!
//! A crash between a receiver's 2xx and its record sends that attempt again after the
//! lease: with the same `webhook-id`, which receivers use to drop a duplicate, as the
//! Standard Webhooks specification asks of them.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::accounts::Admin;
use crate::alerts::mail::{MailSettings, Mailer};
use crate::alerts::webhook;
use crate::db::admin::AccountError;
use crate::domain::alerts::{Due, Finished, next_attempt};
use crate::domain::date::unix_secs;

/// The first pause before a failed delivery is tried again, in milliseconds.
pub const RETRY_BASE_MS: u64 = 5_000;
/// How often the sender looks for due attempts: twice a second while it has work, every
/// 2 s when its last look found nothing (an idle server pays 2 reads of an empty index a
/// second less); at once when woken (a test alert sent, an attempt ended).
const POLL_BUSY: Duration = Duration::from_millis(500);
const POLL_IDLE: Duration = Duration::from_secs(2);
/// Attempts in flight at once, on this node (each a blocking thread for up to 10 s).
const IN_FLIGHT: usize = 8;
/// How long a claim holds an attempt: longer than any attempt takes. A webhook takes 10 s
/// at most; an e-mail 10 s per step of its conversation with the relay (connect,
/// greeting, EHLO, STARTTLS, EHLO, AUTH, MAIL, RCPT, DATA, the end: about 100 s at
/// worst). A claim that lapsed under a slower attempt sends it again: at least once.
const LEASE_SECS: i64 = 300;

/// How the sender runs (`postal serve --allow-private-webhooks`).
#[derive(Debug, Clone, Copy)]
pub struct SenderOptions {
    pub allow_private_webhooks: bool,
    pub retry_base_ms: u64,
}

/// Where the sender gets its admin interface (the account store).
pub(crate) trait Opener: Clone + Send + Sync + 'static {
    fn admin(&self) -> impl Future<Output = Result<Admin, AccountError>> + Send;
}

/// How long sent attempts and their events are kept (the dashboard shows the last 50).
const KEEP_SECS: i64 = 30 * 24 * 3600;
/// How often they are purged.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Runs until the store's runtime stops.
pub(crate) async fn run(store: impl Opener, options: SenderOptions, wake: Arc<Notify>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut next_purge = tokio::time::Instant::now();
    loop {
        if tokio::time::Instant::now() >= next_purge {
            next_purge += PURGE_EVERY;
            let before = unix_secs(SystemTime::now()) - KEEP_SECS;
            let purged = match store.admin().await {
                Ok(mut admin) => admin.purge_alerts(before).await,
                Err(e) => Err(e),
            };
            if let Err(e) = purged {
                tracing::error!("purging old alert deliveries: {e:#}");
            }
        }
        let free = slots.available_permits();
        let mut claimed = false;
        if free > 0 {
            match claim(&store, free as u32).await {
                Ok((due, mail)) => {
                    for d in due {
                        let Ok(permit) = slots.clone().try_acquire_owned() else {
                            break;
                        };
                        claimed = true;
                        let (store, mail, wake) = (store.clone(), mail.clone(), wake.clone());
                        tokio::spawn(async move {
                            deliver(store, d, mail, options, permit).await;
                            wake.notify_one();
                        });
                    }
                }
                Err(e) => tracing::error!("claiming alert deliveries: {e:#}"),
            }
        }
        let busy = claimed || slots.available_permits() < IN_FLIGHT;
        let pause = if busy { POLL_BUSY } else { POLL_IDLE };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = wake.notified() => {}
        }
    }
}

/// Up to `limit` due attempts, and the mail relay when one of them is an e-mail.
async fn claim(
    store: &impl Opener,
    limit: u32,
) -> Result<(Vec<Due>, Option<Arc<MailSettings>>), AccountError> {
    let mut admin = store.admin().await?;
    let due = admin.claim_deliveries(limit, LEASE_SECS).await?;
    let mail = match due.iter().any(|d| d.channel == "email") {
        true => admin.mail_settings().await?.map(Arc::new),
        false => None,
    };
    Ok((due, mail))
}

/// One attempt, then its record.
async fn deliver(
    store: impl Opener,
    due: Due,
    mail: Option<Arc<MailSettings>>,
    options: SenderOptions,
    _slot: OwnedSemaphorePermit,
) {
    let (id, event_at, attempt_no) = (due.delivery_id, due.event.at, due.attempt);
    let (delivered, result, retry) =
        match tokio::task::spawn_blocking(move || attempt(&due, mail.as_deref(), options)).await {
            Ok(outcome) => outcome,
            Err(e) => (false, format!("the sender failed: {e}"), true),
        };
    let now = unix_secs(SystemTime::now());
    let retry_at = match delivered || !retry {
        true => None,
        false => next_attempt(event_at, attempt_no, now, options.retry_base_ms),
    };
    if !delivered {
        tracing::warn!(
            "alert delivery {id} (attempt {attempt_no}) failed: {result}; {}",
            retry_at.map_or("not tried again".to_owned(), |at| format!(
                "tried again in {} s",
                at - now
            ))
        );
    }
    let finished = Finished {
        delivered,
        result,
        retry_at,
    };
    let recorded = match store.admin().await {
        Ok(mut admin) => admin.finish_delivery(id, &finished).await,
        Err(e) => Err(e),
    };
    if let Err(e) = recorded {
        // The claim lapses and the attempt is made again: once more, not lost.
        tracing::error!("recording alert delivery {id}: {e:#}");
    }
}

/// Sends one attempt (blocking): delivered?, what the receiver said, and whether a
/// failure is worth another attempt (not when the channel is gone).
fn attempt(due: &Due, mail: Option<&MailSettings>, options: SenderOptions) -> (bool, String, bool) {
    match due.channel.as_str() {
        "webhook" => {
            let Some((url, secret)) = &due.webhook else {
                return (
                    false,
                    "the account has no webhook any more".to_owned(),
                    false,
                );
            };
            let body = due.event.body(&due.account);
            let outcome = webhook::deliver(
                &webhook::Attempt {
                    url,
                    secret,
                    id: &due.event.public_id,
                    timestamp: unix_secs(SystemTime::now()),
                    body: &body,
                },
                options.allow_private_webhooks,
            );
            (outcome.delivered, outcome.result, true)
        }
        _ => {
            let Some(settings) = mail else {
                return (false, "no mail relay is set".to_owned(), false);
            };
            let Some(to) = &due.email_to else {
                return (
                    false,
                    "the account has no verified e-mail address".to_owned(),
                    false,
                );
            };
            let (subject, text) = due.event.email(&due.account);
            match Mailer::new(settings).and_then(|m| m.send(to, &subject, &text)) {
                Ok(reply) => (true, reply, true),
                Err(why) => (false, why, true),
            }
        }
    }
}
