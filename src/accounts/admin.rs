//! The one admin interface, over the SQLite file or a cluster's ledger, for every caller
//! of an admin operation (the CLI's `account`, `key`, `ledger`, `usage`, `provider` and
//! `payments` commands, and the dashboard): each operation and its answer are written
//! once, the rules of a change once (`domain::admin`), the SQL once per dialect
//! (`db::sqlite`, `db::pg`, twins file for file). Where a change acts: on the file, the
//! running server holds it before the call returns (a command tells it over its socket,
//! `notify::announce`; the server's own dashboard tells its books directly); on a cluster's
//! ledger, a change returns once every live node holds it (docs/cluster.md).
//!
//! The operations are split by area, each an `impl Admin` block: `customers` (accounts,
//! balances, limits, reports), `keys`, `signin` (providers, sign-ins, identities),
//! `sessions`, `payments` (settings and top-ups); the audit log is here.

use std::ops::DerefMut;
use std::time::{Duration, SystemTime};

use rusqlite::Connection;
use tokio_postgres::Client;

use crate::billing::{Billing, notify};
use crate::db::admin::{AccountError, AuditEntry, Audited, Page, Paging};
use crate::db::{pg, sqlite};
use crate::domain::admin::AuditAction;
use crate::domain::ids::AccountId;

/// How long a change to a cluster's ledger waits for the nodes to acknowledge it, and a
/// change to the file for its server's books.
const CONFIRM_WAIT: Duration = Duration::from_secs(10);

/// Where the admin operations act (the file, or the cluster's ledger, connected and its
/// schema migrated) and who acts, as the audit log names them.
pub struct Admin {
    pub(super) store: Store,
    actor: String,
    /// The books of the server this admin runs in (its dashboard), told of a change to
    /// the file directly; `None` for a command, which tells the server over its socket.
    pub(super) books: Option<Billing>,
    /// Run by the server (its dashboard), which logs; a command writes to stderr.
    in_server: bool,
}

/// A connection of its own (a command's) or one lent by a pool (the server's).
pub(super) type FileConnection = Box<dyn DerefMut<Target = Connection> + Send>;
pub(super) type LedgerClient = Box<dyn DerefMut<Target = Client> + Send>;

pub(super) enum Store {
    File(FileConnection),
    Ledger(LedgerClient),
}

/// Who made a change from the command line.
pub const OPERATOR: &str = "operator (CLI)";

impl Admin {
    /// On the file, acting as `actor`; its running server is told over its socket.
    pub fn file(conn: Connection, actor: &str) -> Admin {
        Admin::on_file(Box::new(Box::new(conn)), actor, None)
    }

    /// On the cluster's ledger, acting as `actor`.
    pub fn ledger(client: Client, actor: &str) -> Admin {
        Admin::on_ledger(Box::new(Box::new(client)), actor, false)
    }

    /// On the file through `conn`; `books`, the server's own, are told of each change.
    pub(super) fn on_file(conn: FileConnection, actor: &str, books: Option<Billing>) -> Admin {
        Admin {
            store: Store::File(conn),
            actor: actor.to_owned(),
            in_server: books.is_some(),
            books,
        }
    }

    /// On the ledger through `client`; `in_server` for the server's own dashboard.
    pub(super) fn on_ledger(client: LedgerClient, actor: &str, in_server: bool) -> Admin {
        Admin {
            store: Store::Ledger(client),
            actor: actor.to_owned(),
            books: None,
            in_server,
        }
    }

    /// Makes the server on the file hold what the file holds now (its books reloaded, its
    /// charges flushed), before an answer is read or a change returns.
    pub(super) fn tell_server(books: Option<&Billing>, conn: &Connection) {
        match books {
            Some(books) => {
                if !books.reload_now(CONFIRM_WAIT) {
                    tracing::warn!(
                        "the books did not hold an account change within {CONFIRM_WAIT:?}; \
                         it holds after the next flush"
                    );
                }
            }
            None => notify::announce(conn),
        }
    }

    /// Before a report is read from the file by a command: its running server flushes
    /// what it answered, so that the report holds it. The server's own dashboard never
    /// flushes for a read (a GET changes nothing): its reports hold what was flushed, at
    /// most a flush interval behind (docs/account.md).
    pub(super) fn flush_for_command(books: Option<&Billing>, conn: &Connection) {
        if books.is_none() {
            notify::announce(conn);
        }
    }

    /// A change committed at `version` (the ledger's; none for the file) holds where the
    /// change acts. Nodes that did not confirm within [`CONFIRM_WAIT`] are warned about
    /// on stderr: the change holds there after their next read of the ledger.
    pub(super) async fn changed(&mut self, version: i64) -> anyhow::Result<()> {
        match &mut self.store {
            Store::File(conn) => Admin::tell_server(self.books.as_ref(), conn),
            Store::Ledger(client) => {
                let laggards = pg::changes::wait_for_nodes(client, version, CONFIRM_WAIT).await?;
                if !laggards.is_empty() {
                    let warning = format!(
                        "nodes {laggards:?} did not confirm the change within \
                         {CONFIRM_WAIT:?}; it holds there after their next read of the ledger"
                    );
                    match self.in_server {
                        true => tracing::warn!("{warning}"),
                        false => eprintln!("warning: {warning}"),
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends `action` on `whose` account to the audit log, as this admin's actor. Written
    /// once the change is committed (a crash between the two loses the line, not the change).
    pub(super) async fn audit(
        &mut self,
        whose: Audited<'_>,
        action: AuditAction,
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

    /// The account's audit log lines `paging` asks for (a page, newest or oldest first;
    /// or all, oldest first).
    pub async fn audit_entries(
        &mut self,
        account_id: &AccountId,
        paging: &Paging,
    ) -> Result<Page<AuditEntry>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::audit_entries(conn, account_id, paging),
            Store::Ledger(client) => pg::dashboard::audit_entries(client, account_id, paging).await,
        }
    }
}
