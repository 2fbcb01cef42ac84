//! Where an admin change acts: the SQLite file, whose running server is told of it
//! (`notify::announce`: it reloads before its next request), or a cluster's ledger, where
//! a change returns once every live node holds it (docs/cluster.md). One interface over
//! the two ledgers, for every caller of an admin operation (the CLI's `account`, `key`,
//! `ledger` and `usage` commands): each operation and its answer are written once, the
//! rules of a change once (`domain::admin`), the SQL once per dialect (`db::sqlite`,
//! `db::pg`, twins file for file).

mod payments;

use std::time::{Duration, SystemTime};

use rusqlite::Connection;
use tokio_postgres::Client;

use crate::billing::notify;
use crate::db::admin::{
    AccountError, AccountLine, AccountView, AuditEntry, Audited, IdentityView, KeyLine,
    LedgerEntry, NewAccount, NewKey, Provider, SessionRow, SessionView, SignIn, SignedIn,
    UsageLine,
};
use crate::db::{pg, sqlite};
use crate::domain::admin::{BalanceChange, LimitsChange};
use crate::domain::api_key::Publishable;
use crate::domain::money::Micros;
use crate::domain::rate_limit::Limits;

/// How long a change to a cluster's ledger waits for the nodes to acknowledge it.
const CONFIRM_WAIT: Duration = Duration::from_secs(10);

/// Where the admin operations act (the file, or the cluster's ledger, connected and its
/// schema migrated) and who acts, as the audit log names them.
pub struct Admin {
    store: Store,
    actor: String,
}

enum Store {
    File(Connection),
    Ledger(Client),
}

/// Who made a change from the command line.
pub const OPERATOR: &str = "operator (CLI)";

impl Admin {
    /// On the file, acting as `actor`.
    pub fn file(conn: Connection, actor: &str) -> Admin {
        Admin {
            store: Store::File(conn),
            actor: actor.to_owned(),
        }
    }

    /// On the cluster's ledger, acting as `actor`.
    pub fn ledger(client: Client, actor: &str) -> Admin {
        Admin {
            store: Store::Ledger(client),
            actor: actor.to_owned(),
        }
    }

    /// A change committed at `version` (the ledger's; none for the file) holds where the
    /// change acts. Nodes that did not confirm within [`CONFIRM_WAIT`] are warned about
    /// on stderr: the change holds there after their next read of the ledger.
    async fn changed(&self, version: i64) -> anyhow::Result<()> {
        match &self.store {
            Store::File(conn) => notify::announce(conn),
            Store::Ledger(client) => {
                let laggards = pg::changes::wait_for_nodes(client, version, CONFIRM_WAIT).await?;
                if !laggards.is_empty() {
                    eprintln!(
                        "warning: nodes {laggards:?} did not confirm the change within \
                         {CONFIRM_WAIT:?}; it holds there after their next read of the ledger"
                    );
                }
            }
        }
        Ok(())
    }

    /// Appends `action` on `whose` account to the audit log, as this admin's actor. Written
    /// once the change is committed (a crash between the two loses the line, not the change).
    async fn audit(
        &mut self,
        whose: Audited<'_>,
        action: &str,
        detail: &str,
    ) -> Result<(), AccountError> {
        let at = crate::db::rows::unix_secs(SystemTime::now());
        let actor = self.actor.clone();
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::audit(conn, whose, at, &actor, action, detail),
            Store::Ledger(client) => {
                pg::dashboard::audit(client, whose, at, &actor, action, detail).await
            }
        }
    }

    /// The account's audit log, newest first.
    pub async fn audit_entries(
        &mut self,
        account_id: &str,
    ) -> Result<Vec<AuditEntry>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::audit_entries(conn, account_id),
            Store::Ledger(client) => pg::dashboard::audit_entries(client, account_id).await,
        }
    }

    pub async fn create_account(
        &mut self,
        name: Option<&str>,
        now: SystemTime,
    ) -> anyhow::Result<NewAccount> {
        let (created, version) = match &mut self.store {
            Store::File(conn) => (sqlite::accounts::create_account(conn, name, now)?, 0),
            Store::Ledger(client) => pg::accounts::create_account(client, name, now).await?,
        };
        self.changed(version).await?;
        self.audit(
            Audited::Account(&created.account_id),
            "account.create",
            &format!("with key {}", created.key_id),
        )
        .await?;
        Ok(created)
    }

    /// The account as stored. A server on the file is asked to flush first, so the balance
    /// holds every charge answered before the call; cluster nodes flush every 10 ms.
    pub async fn show(&mut self, account_id: &str) -> Result<AccountView, AccountError> {
        match &mut self.store {
            Store::File(conn) => {
                notify::announce(conn);
                sqlite::accounts::show(conn, account_id)
            }
            Store::Ledger(client) => pg::accounts::show(client, account_id).await,
        }
    }

    /// Applies a checked top-up or adjustment; the new balance.
    pub async fn change_balance(
        &mut self,
        account_id: &str,
        change: &BalanceChange,
        now: SystemTime,
    ) -> anyhow::Result<Micros> {
        let (balance, version) = match &mut self.store {
            Store::File(conn) => (
                sqlite::accounts::change_balance(conn, account_id, change, now)?,
                0,
            ),
            Store::Ledger(client) => {
                pg::accounts::change_balance(client, account_id, change, now).await?
            }
        };
        self.changed(version).await?;
        let detail = format!(
            "{} USD{}; balance {} USD",
            change.amount(),
            change.note().map(|n| format!(" ({n})")).unwrap_or_default(),
            balance
        );
        self.audit(Audited::Account(account_id), change.kind(), &detail)
            .await?;
        Ok(balance)
    }

    /// Applies a checked change of limits; the limits in force.
    pub async fn set_limits(
        &mut self,
        account_id: &str,
        change: LimitsChange,
    ) -> anyhow::Result<Limits> {
        let (limits, version) = match &mut self.store {
            Store::File(conn) => (sqlite::accounts::set_limits(conn, account_id, change)?, 0),
            Store::Ledger(client) => pg::accounts::set_limits(client, account_id, change).await?,
        };
        self.changed(version).await?;
        let window = |l: Option<u64>| l.map_or("off".to_owned(), |n| n.to_string());
        let detail = format!(
            "per minute {}, per hour {}, per day {}",
            window(limits.per_minute),
            window(limits.per_hour),
            window(limits.per_day)
        );
        self.audit(Audited::Account(account_id), "limits.set", &detail)
            .await?;
        Ok(limits)
    }

    pub async fn create_key(
        &mut self,
        account_id: &str,
        publishable: Option<&Publishable>,
        name: Option<&str>,
        now: SystemTime,
    ) -> Result<NewKey, AccountError> {
        let (key, version) = match &mut self.store {
            Store::File(conn) => (
                sqlite::keys::create_key(conn, account_id, publishable, name, now)?,
                0,
            ),
            Store::Ledger(client) => {
                pg::keys::create_key(client, account_id, publishable, name, now).await?
            }
        };
        self.changed(version).await?;
        let detail = format!(
            "{} ({}{})",
            key.key_id,
            if publishable.is_some() {
                "publishable"
            } else {
                "secret"
            },
            name.map(|n| format!(", named {n:?}")).unwrap_or_default()
        );
        self.audit(Audited::Account(account_id), "key.create", &detail)
            .await?;
        Ok(key)
    }

    pub async fn revoke_key(&mut self, key_id: &str, now: SystemTime) -> anyhow::Result<()> {
        let version = match &mut self.store {
            Store::File(conn) => {
                sqlite::keys::revoke_key(conn, key_id, now)?;
                0
            }
            Store::Ledger(client) => pg::keys::revoke_key(client, key_id, now).await?,
        };
        self.changed(version).await?;
        self.audit(Audited::Key(key_id), "key.revoke", key_id)
            .await?;
        Ok(())
    }

    /// Every account, oldest first (`now`, unix seconds: for "today").
    pub async fn account_lines(&mut self, now: i64) -> anyhow::Result<Vec<AccountLine>> {
        match &mut self.store {
            Store::File(conn) => sqlite::reports::account_lines(conn, now),
            Store::Ledger(client) => pg::reports::account_lines(client, now).await,
        }
    }

    /// The account's ledger in the order it was written, from `since` (unix seconds) on;
    /// as `show`, a server on the file flushes first.
    pub async fn ledger_entries(
        &mut self,
        account_id: &str,
        since: Option<i64>,
    ) -> Result<Vec<LedgerEntry>, AccountError> {
        match &mut self.store {
            Store::File(conn) => {
                notify::announce(conn);
                sqlite::reports::ledger_entries(conn, account_id, since)
            }
            Store::Ledger(client) => pg::reports::ledger_entries(client, account_id, since).await,
        }
    }

    /// Charges of the last `days` UTC days, per day, account and endpoint (a server on the
    /// file flushes first).
    pub async fn usage(&mut self, days: u32, now: i64) -> anyhow::Result<Vec<UsageLine>> {
        match &mut self.store {
            Store::File(conn) => {
                notify::announce(conn);
                sqlite::reports::usage(conn, days, now)
            }
            Store::Ledger(client) => pg::reports::usage(client, days, now).await,
        }
    }

    /// The account's keys, oldest first.
    pub async fn keys(&mut self, account_id: &str) -> Result<Vec<KeyLine>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::reports::keys(conn, account_id),
            Store::Ledger(client) => pg::reports::keys(client, account_id).await,
        }
    }

    // The account dashboard (docs/account.md): the providers, identities, sign-ins and
    // sessions, in the same ledger as the accounts they belong to.

    pub async fn add_provider(&mut self, p: &Provider, now: i64) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::add_provider(conn, p, now),
            Store::Ledger(client) => pg::dashboard::add_provider(client, p, now).await,
        }
    }

    pub async fn providers(&mut self) -> Result<Vec<Provider>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::providers(conn),
            Store::Ledger(client) => pg::dashboard::providers(client).await,
        }
    }

    /// Whether a provider of that name was there.
    pub async fn remove_provider(&mut self, name: &str) -> Result<bool, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::remove_provider(conn, name),
            Store::Ledger(client) => pg::dashboard::remove_provider(client, name).await,
        }
    }

    pub async fn put_signin(
        &mut self,
        state_hash: &[u8; 32],
        signin: &SignIn,
        now: i64,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::put_signin(conn, state_hash, signin, now),
            Store::Ledger(client) => {
                pg::dashboard::put_signin(client, state_hash, signin, now).await
            }
        }
    }

    /// The sign-in of this state, once: a second call, or one too late, finds none.
    pub async fn take_signin(
        &mut self,
        state_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<SignIn>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::take_signin(conn, state_hash, now),
            Store::Ledger(client) => pg::dashboard::take_signin(client, state_hash, now).await,
        }
    }

    /// The account of an identity that signed in: found, or made with the free allowance
    /// (held by the server, every node, before this returns).
    pub async fn sign_in(
        &mut self,
        identity: &IdentityView,
        signups_open: bool,
        now: i64,
    ) -> Result<SignedIn, AccountError> {
        let (signed_in, version) = match &mut self.store {
            Store::File(conn) => {
                let signed_in = sqlite::dashboard::sign_in(conn, identity, signups_open, now)?;
                let created = signed_in.created.then_some(0);
                (signed_in, created)
            }
            Store::Ledger(client) => {
                pg::dashboard::sign_in(client, identity, signups_open, now).await?
            }
        };
        if let Some(version) = version {
            self.changed(version).await?;
            let detail = format!("first sign-in with {}", identity.provider);
            self.audit(
                Audited::Account(&signed_in.account_id),
                "account.create",
                &detail,
            )
            .await?;
        }
        Ok(signed_in)
    }

    pub async fn link(
        &mut self,
        account_id: &str,
        identity: &IdentityView,
        now: i64,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::link(conn, account_id, identity, now)?,
            Store::Ledger(client) => pg::dashboard::link(client, account_id, identity, now).await?,
        }
        let detail = format!("{} ({})", identity.provider, identity.issuer);
        self.audit(Audited::Account(account_id), "identity.link", &detail)
            .await
    }

    pub async fn unlink(
        &mut self,
        account_id: &str,
        issuer: &str,
        subject: &str,
        now: i64,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::unlink(conn, account_id, issuer, subject, now)?,
            Store::Ledger(client) => {
                pg::dashboard::unlink(client, account_id, issuer, subject, now).await?
            }
        }
        self.audit(Audited::Account(account_id), "identity.unlink", issuer)
            .await
    }

    pub async fn identities(
        &mut self,
        account_id: &str,
    ) -> Result<Vec<IdentityView>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::identities(conn, account_id),
            Store::Ledger(client) => pg::dashboard::identities(client, account_id).await,
        }
    }

    pub async fn create_session(
        &mut self,
        id_hash: &[u8; 32],
        session: &SessionRow,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::create_session(conn, id_hash, session),
            Store::Ledger(client) => pg::dashboard::create_session(client, id_hash, session).await,
        }
    }

    /// The live session of this id (marked seen now), `None` when unknown, ended or expired.
    pub async fn session(
        &mut self,
        id_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<SessionRow>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::session(conn, id_hash, now),
            Store::Ledger(client) => pg::dashboard::session(client, id_hash, now).await,
        }
    }

    /// Ends the account's session `public_id`; whether it was live.
    pub async fn end_session(
        &mut self,
        account_id: &str,
        public_id: &str,
        now: i64,
    ) -> Result<bool, AccountError> {
        let ended = match &mut self.store {
            Store::File(conn) => sqlite::dashboard::end_session(conn, account_id, public_id, now)?,
            Store::Ledger(client) => {
                pg::dashboard::end_session(client, account_id, public_id, now).await?
            }
        };
        if ended {
            self.audit(Audited::Account(account_id), "session.end", public_id)
                .await?;
        }
        Ok(ended)
    }

    pub async fn sessions(
        &mut self,
        account_id: &str,
        now: i64,
    ) -> Result<Vec<SessionView>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::sessions(conn, account_id, now),
            Store::Ledger(client) => pg::dashboard::sessions(client, account_id, now).await,
        }
    }

    pub async fn rename_key(
        &mut self,
        account_id: &str,
        key_id: &str,
        name: Option<&str>,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::rename_key(conn, account_id, key_id, name)?,
            Store::Ledger(client) => {
                pg::dashboard::rename_key(client, account_id, key_id, name).await?
            }
        }
        let detail = format!(
            "{key_id} named {}",
            name.map_or("nothing".to_owned(), |n| format!("{n:?}"))
        );
        self.audit(Audited::Account(account_id), "key.rename", &detail)
            .await
    }

    /// Rolls a live key of the account: the new key (shown once); the old one works until
    /// `ends` (unix seconds), on every node.
    pub async fn roll_key(
        &mut self,
        account_id: &str,
        key_id: &str,
        ends: i64,
        now: SystemTime,
    ) -> Result<NewKey, AccountError> {
        let (key, version) = match &mut self.store {
            Store::File(conn) => (
                sqlite::keys::roll_key(conn, account_id, key_id, ends, now)?,
                0,
            ),
            Store::Ledger(client) => {
                pg::keys::roll_key(client, account_id, key_id, ends, now).await?
            }
        };
        self.changed(version).await?;
        let end = crate::domain::date::rfc3339(ends);
        let detail = format!("{key_id} to {}; {key_id} works until {end}", key.key_id);
        self.audit(Audited::Account(account_id), "key.roll", &detail)
            .await?;
        Ok(key)
    }

    /// Revokes a key of this account (`UnknownKey` for a key of another account).
    pub async fn revoke_own_key(
        &mut self,
        account_id: &str,
        key_id: &str,
        now: SystemTime,
    ) -> Result<(), AccountError> {
        if !self
            .keys(account_id)
            .await?
            .iter()
            .any(|k| k.key_id == key_id)
        {
            return Err(AccountError::UnknownKey(key_id.to_owned()));
        }
        Ok(self.revoke_key(key_id, now).await?)
    }
}
