//! The account dashboard's tables in the ledger: providers, identities, sign-ins under
//! way and sessions, shared by every node. The twin of `db::sqlite::dashboard`. A new
//! account bumps the version (`changes::bump`), as `account create` does.

use secrecy::ExposeSecret;
use tokio_postgres::{Client, GenericClient};

use crate::db::admin::{
    AccountError, AuditEntry, Audited, IdentityView, LinkOffer, Page, Paging, Provider,
    SessionIdentity, SessionRow, SessionView, SignIn, SignedIn, Signups, session_identity,
    session_query,
};
use crate::domain::admin::AuditAction;
use crate::domain::dashboard::{self, DashboardRefused};
use crate::domain::ids::{AccountId, KeyId, ProviderName, SessionId};

use super::accounts::insert_account;
use super::changes::bump;
use super::reports::account_rowid;

fn refused(why: DashboardRefused) -> AccountError {
    AccountError::Invalid(why.to_string())
}

/// Adds the provider; the version (`changes::bump`: the nodes read the providers again).
pub async fn add_provider(
    client: &mut Client,
    p: &Provider,
    now: i64,
) -> Result<i64, AccountError> {
    let tx = client.transaction().await?;
    let added = tx
        .execute(
            "INSERT INTO oidc_providers (name, issuer, client_id, client_secret, created_at,
                                         kind, allowed)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO NOTHING",
            &[
                &p.name,
                &p.issuer,
                &p.client_id,
                &p.client_secret.expose_secret(),
                &now,
                &p.kind,
                &p.allowed_stored(),
            ],
        )
        .await?;
    if added == 0 {
        return Err(AccountError::Invalid(format!(
            "a provider named {:?} exists; remove it first",
            p.name.as_str()
        )));
    }
    let version = super::changes::bump(&tx).await?;
    tx.commit().await?;
    Ok(version)
}

pub async fn providers(client: &Client) -> Result<Vec<Provider>, AccountError> {
    let rows = client
        .query(
            "SELECT name, kind, issuer, client_id, client_secret, allowed FROM oidc_providers
             ORDER BY name",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Provider {
            name: r.get(0),
            kind: r.get(1),
            issuer: r.get(2),
            client_id: r.get(3),
            client_secret: r.get::<_, String>(4).into(),
            allowed: Provider::allowed_from_stored(r.get(5)),
        })
        .collect())
}

/// Removes the provider: whether it was there, and the version.
pub async fn remove_provider(
    client: &mut Client,
    name: &ProviderName,
    now: i64,
) -> Result<(bool, i64), AccountError> {
    let tx = client.transaction().await?;
    let removed = tx
        .execute("DELETE FROM oidc_providers WHERE name = $1", &[&name])
        .await?
        > 0;
    tx.execute(
        "UPDATE sessions SET ended_at = $2 WHERE provider = $1 AND ended_at IS NULL",
        &[&name, &now],
    )
    .await?;
    let version = super::changes::bump(&tx).await?;
    tx.commit().await?;
    Ok((removed, version))
}

pub async fn put_signin(
    client: &mut Client,
    state_hash: &[u8; 32],
    signin: &SignIn,
    now: i64,
) -> Result<(), AccountError> {
    let tx = client.transaction().await?;
    tx.execute(
        "DELETE FROM signins WHERE created_at < $1",
        &[&(now - dashboard::SIGNIN_SECS)],
    )
    .await?;
    tx.execute(
        "INSERT INTO signins (state_hash, provider, nonce, verifier, link_account, created_at,
                              purpose, session_hash)
         VALUES ($1, $2, $3, $4, (SELECT id FROM accounts WHERE public_id = $5), $6, $7, $8)",
        &[
            &&state_hash[..],
            &signin.provider,
            &signin.nonce,
            &signin.verifier.expose_secret(),
            &signin.link_account,
            &now,
            &signin.purpose,
            &signin.session_hash.as_ref().map(|h| &h[..]),
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn take_signin(
    client: &Client,
    state_hash: &[u8; 32],
    now: i64,
) -> Result<Option<SignIn>, AccountError> {
    // One statement: of two callbacks with the same state, one gets the row.
    let row = client
        .query_opt(
            "WITH taken AS (DELETE FROM signins WHERE state_hash = $1 RETURNING *)
             SELECT t.provider, t.nonce, t.verifier, a.public_id, t.created_at, t.purpose,
                    t.session_hash
             FROM taken t LEFT JOIN accounts a ON a.id = t.link_account",
            &[&&state_hash[..]],
        )
        .await?;
    Ok(row.and_then(|r| {
        let at: i64 = r.get(4);
        (now - at < dashboard::SIGNIN_SECS).then(|| SignIn {
            provider: r.get(0),
            nonce: r.get(1),
            verifier: r.get::<_, String>(2).into(),
            link_account: r.get(3),
            purpose: r.get(5),
            session_hash: r
                .get::<_, Option<Vec<u8>>>(6)
                .and_then(|h| h.try_into().ok()),
            started_at: at,
        })
    }))
}

/// As `db::sqlite::dashboard::sign_in`; and the version when it made an account.
pub async fn sign_in(
    client: &mut Client,
    identity: &IdentityView,
    signups: &Signups,
    now: i64,
) -> Result<(SignedIn, Option<i64>), AccountError> {
    let tx = client.transaction().await?;
    // Two first sign-ins of one identity at once: the second waits, then finds it.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1 || ' ' || $2))",
        &[&identity.issuer, &identity.subject],
    )
    .await?;
    let found = tx
        .query_opt(
            "SELECT a.public_id, i.unlinked_at IS NOT NULL
             FROM identities i JOIN accounts a ON a.id = i.account_id
             WHERE i.issuer = $1 AND i.subject = $2",
            &[&identity.issuer, &identity.subject],
        )
        .await?;
    let answer = match found.map(|r| (r.get::<_, AccountId>(0), r.get::<_, bool>(1))) {
        Some((_, true)) => return Err(refused(DashboardRefused::IdentityUnlinked)),
        Some((account_id, false)) => (
            SignedIn {
                account_id,
                created: false,
            },
            None,
        ),
        None if !signups.open => return Err(refused(DashboardRefused::SignupsClosed)),
        None => {
            // Two nodes making accounts for one address at once: the second waits, then
            // counts the first.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext('signups ' || $1))",
                &[&signups.from],
            )
            .await?;
            let made: i64 = tx
                .query_one(
                    "SELECT count(*) FROM accounts WHERE created_from = $1 AND created_at >= $2",
                    &[&signups.from, &dashboard::day_start(now)],
                )
                .await?
                .get(0);
            if made >= i64::from(signups.per_address_day) {
                return Err(AccountError::Limited(
                    dashboard::TOO_MANY_NEW_ACCOUNTS.to_owned(),
                ));
            }
            let name = identity.account_name();
            let (rowid, account_id) = insert_account(&tx, Some(name), now).await?;
            tx.execute(
                "UPDATE accounts SET created_from = $2 WHERE id = $1",
                &[&rowid, &signups.from],
            )
            .await?;
            insert_identity(&tx, rowid, identity, now).await?;
            let version = bump(&tx).await?;
            (
                SignedIn {
                    account_id,
                    created: true,
                },
                Some(version),
            )
        }
    };
    tx.commit().await?;
    Ok(answer)
}

async fn insert_identity(
    client: &impl GenericClient,
    account_rowid: i64,
    identity: &IdentityView,
    now: i64,
) -> Result<(), AccountError> {
    client
        .execute(
            "INSERT INTO identities (issuer, subject, account_id, provider, email, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &identity.issuer,
                &identity.subject,
                &account_rowid,
                &identity.provider,
                &identity.email,
                &now,
            ],
        )
        .await?;
    Ok(())
}

pub async fn link(
    client: &mut Client,
    account_id: &AccountId,
    identity: &IdentityView,
    now: i64,
) -> Result<(), AccountError> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1 || ' ' || $2))",
        &[&identity.issuer, &identity.subject],
    )
    .await?;
    let rowid = account_rowid(&tx, account_id).await?;
    let owner = tx
        .query_opt(
            "SELECT account_id, unlinked_at IS NOT NULL FROM identities
             WHERE issuer = $1 AND subject = $2",
            &[&identity.issuer, &identity.subject],
        )
        .await?
        .map(|r| (r.get::<_, i64>(0), r.get::<_, bool>(1)));
    match owner {
        None => insert_identity(&tx, rowid, identity, now).await?,
        Some((owner, _)) if owner != rowid => {
            return Err(refused(DashboardRefused::IdentityElsewhere));
        }
        Some((_, true)) => {
            tx.execute(
                "UPDATE identities SET unlinked_at = NULL WHERE issuer = $1 AND subject = $2",
                &[&identity.issuer, &identity.subject],
            )
            .await?;
        }
        Some((_, false)) => {}
    }
    tx.commit().await?;
    Ok(())
}

pub async fn unlink(
    client: &mut Client,
    account_id: &AccountId,
    issuer: &str,
    subject: &str,
    now: i64,
) -> Result<u64, AccountError> {
    let tx = client.transaction().await?;
    let rowid: i64 = tx
        .query_opt(
            "SELECT id FROM accounts WHERE public_id = $1 FOR UPDATE",
            &[&account_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(account_id.clone()))?
        .get(0);
    let linked: i64 = tx
        .query_one(
            "SELECT count(*) FROM identities WHERE account_id = $1 AND unlinked_at IS NULL",
            &[&rowid],
        )
        .await?
        .get(0);
    let changed = tx
        .execute(
            "UPDATE identities SET unlinked_at = $4
             WHERE account_id = $1 AND issuer = $2 AND subject = $3 AND unlinked_at IS NULL",
            &[&rowid, &issuer, &subject, &now],
        )
        .await?;
    if changed == 0 {
        return Err(AccountError::Invalid(
            "no such identity on this account".into(),
        ));
    }
    if linked <= 1 {
        return Err(refused(DashboardRefused::LastIdentity));
    }
    let ended = tx
        .execute(
            "UPDATE sessions SET ended_at = $4
             WHERE account_id = $1 AND issuer = $2 AND subject = $3 AND ended_at IS NULL",
            &[&rowid, &issuer, &subject, &now],
        )
        .await?;
    tx.commit().await?;
    Ok(ended)
}

pub async fn identities(
    client: &Client,
    account_id: &AccountId,
) -> Result<Vec<IdentityView>, AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let rows = client
        .query(
            "SELECT issuer, subject, provider, email, created_at FROM identities
             WHERE account_id = $1 AND unlinked_at IS NULL ORDER BY created_at, issuer, subject",
            &[&rowid],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| IdentityView {
            issuer: r.get(0),
            subject: r.get(1),
            provider: r.get(2),
            email: r.get(3),
            name: None,
            created_at: r.get(4),
            signed_in_at: None,
        })
        .collect())
}

pub async fn create_session(
    client: &Client,
    id_hash: &[u8; 32],
    session: &SessionRow,
) -> Result<(), AccountError> {
    let rowid = account_rowid(client, &session.account_id).await?;
    client
        .execute(
            "INSERT INTO sessions (id_hash, public_id, account_id, csrf, created_at, seen_at,
                                   client, provider, issuer, subject, authenticated_at)
             VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10)",
            &[
                &&id_hash[..],
                &session.public_id,
                &rowid,
                &session.csrf.expose_secret(),
                &session.created_at,
                &session.client,
                &session.identity.as_ref().map(|i| &i.provider),
                &session.identity.as_ref().map(|i| &i.issuer),
                &session.identity.as_ref().map(|i| &i.subject),
                &session.authenticated_at,
            ],
        )
        .await?;
    Ok(())
}

pub async fn session(
    client: &Client,
    id_hash: &[u8; 32],
    now: i64,
) -> Result<Option<SessionRow>, AccountError> {
    let row = client
        .query_opt(&session_query('$'), &[&&id_hash[..]])
        .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    let (created_at, seen): (i64, i64) = (r.get(3), r.get(4));
    if dashboard::session_expired(created_at, seen, now) {
        return Ok(None);
    }
    if dashboard::session_seen_is_stale(seen, now) {
        client
            .execute(
                "UPDATE sessions SET seen_at = $2 WHERE id_hash = $1 AND seen_at < $2",
                &[&&id_hash[..], &now],
            )
            .await?;
    }
    Ok(Some(SessionRow {
        public_id: r.get(0),
        account_id: r.get(1),
        csrf: r.get::<_, String>(2).into(),
        created_at,
        client: r.get(5),
        identity: session_identity(r.get(6), r.get(7), r.get(8)),
        authenticated_at: r.get(9),
        link_offer: LinkOffer::from_stored(r.get::<_, Option<String>>(10).as_deref()),
    }))
}

pub async fn prove_session(
    client: &Client,
    id_hash: &[u8; 32],
    identity: &SessionIdentity,
    now: i64,
) -> Result<bool, AccountError> {
    Ok(client
        .execute(
            "UPDATE sessions SET provider = $2, issuer = $3, subject = $4, authenticated_at = $5
             WHERE id_hash = $1 AND ended_at IS NULL",
            &[
                &&id_hash[..],
                &identity.provider,
                &identity.issuer,
                &identity.subject,
                &now,
            ],
        )
        .await?
        > 0)
}

pub async fn offer_link(
    client: &Client,
    id_hash: &[u8; 32],
    offer: Option<&LinkOffer>,
) -> Result<(), AccountError> {
    client
        .execute(
            "UPDATE sessions SET link_offer = $2 WHERE id_hash = $1 AND ended_at IS NULL",
            &[&&id_hash[..], &offer.map(LinkOffer::stored)],
        )
        .await?;
    Ok(())
}

pub async fn end_session(
    client: &Client,
    account_id: &AccountId,
    public_id: &SessionId,
    now: i64,
) -> Result<bool, AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    Ok(client
        .execute(
            "UPDATE sessions SET ended_at = $3
             WHERE account_id = $1 AND public_id = $2 AND ended_at IS NULL",
            &[&rowid, &public_id, &now],
        )
        .await?
        > 0)
}

pub async fn sessions(
    client: &Client,
    account_id: &AccountId,
    now: i64,
) -> Result<Vec<SessionView>, AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let rows = client
        .query(
            "SELECT public_id, created_at, seen_at, client FROM sessions
             WHERE account_id = $1 AND ended_at IS NULL ORDER BY created_at DESC, public_id",
            &[&rowid],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| SessionView {
            session_id: r.get(0),
            created_at: r.get(1),
            seen_at: r.get(2),
            client: r.get(3),
        })
        .filter(|s| !dashboard::session_expired(s.created_at, s.seen_at, now))
        .collect())
}

pub async fn rename_key(
    client: &Client,
    account_id: &AccountId,
    key_id: &KeyId,
    name: Option<&str>,
) -> Result<(), AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let changed = client
        .execute(
            "UPDATE api_keys SET name = $3 WHERE account_id = $1 AND public_id = $2",
            &[&rowid, &key_id, &name],
        )
        .await?;
    match changed {
        0 => Err(AccountError::UnknownKey(key_id.clone())),
        _ => Ok(()),
    }
}

/// As `db::sqlite::dashboard::audit`.
pub async fn audit(
    client: &Client,
    whose: Audited<'_>,
    at: i64,
    actor: &str,
    action: AuditAction,
    detail: &str,
) -> Result<(), AccountError> {
    let (insert, id) = whose.insert('$');
    client
        .execute(&insert, &[&id, &at, &actor, &action, &detail])
        .await?;
    Ok(())
}

pub async fn audit_entries(
    client: &Client,
    account_id: &AccountId,
    paging: &Paging,
) -> Result<Page<AuditEntry>, AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let sql = format!(
        "SELECT id, at, actor, action, detail FROM audit_log
         WHERE account_id = $1 AND {}",
        paging.rows("$2", "$3")
    );
    let (before, rows) = paging.bounds();
    let rows = match paging.page {
        Some(_) => client.query(&sql, &[&rowid, &before, &rows]).await?,
        None => client.query(&sql, &[&rowid, &before]).await?,
    };
    let rows = rows
        .iter()
        .map(|r| {
            Ok((
                r.get(0),
                AuditEntry {
                    at: r.get(1),
                    actor: r.get(2),
                    action: r.try_get(3)?,
                    detail: r.get(4),
                },
            ))
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
    Ok(paging.paged(rows))
}
