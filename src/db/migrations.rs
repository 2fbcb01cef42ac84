//! The ladder of schema versions: how `open` brings a file of any older version to
//! [`SCHEMA_VERSION`], each rung the SQL (or code) that gives it what `schema.sql` added
//! at that version, all of them in one IMMEDIATE transaction.

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, TransactionBehavior};

use super::{SCHEMA, SCHEMA_VERSION};

/// Version 1 to 2: the dataset generation (`dataset` in schema.sql), which the import
/// bumps when it swaps a new dataset in, instead of `PRAGMA schema_version`, which every
/// staging table created or dropped also changes.
const MIGRATION_2: &str = "
    CREATE TABLE dataset (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        generation  INTEGER NOT NULL,
        imported_at INTEGER
    ) STRICT;
    INSERT INTO dataset (id, generation) VALUES (1, 0);
    PRAGMA user_version = 2;";

/// Version 2 to 3: city search v3. The gazetteer table comes (empty until the next
/// import); what nothing read goes: the `(country, compact_key)` index (lookups answer from
/// memory; an import names a staging table's indexes after their generation,
/// `postal_codes_by_key_g4`, so every generation's name is dropped), and the FTS5 trigram
/// index `places_trigram` over `places` with the columns that bounded it per country
/// (city search answers from memory, docs/city.md).
fn migration_3(tx: &Connection) -> Result<()> {
    let names: Vec<String> = tx
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index'
             AND (name = 'postal_codes_by_key' OR name GLOB 'postal_codes_by_key_g[0-9]*')",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for name in names {
        tx.execute_batch(&format!("DROP INDEX \"{name}\""))?;
    }
    tx.execute_batch(MIGRATION_3)?;
    Ok(())
}

const MIGRATION_3: &str = "
    DROP TABLE IF EXISTS places_trigram;
    DROP TABLE IF EXISTS places;
    DROP TABLE IF EXISTS places_trigram_next;
    DROP TABLE IF EXISTS places_next;
    DROP TABLE IF EXISTS places_trigram_old;
    DROP TABLE IF EXISTS places_old;
    ALTER TABLE countries DROP COLUMN place_first;
    ALTER TABLE countries DROP COLUMN place_last;
    CREATE TABLE gazetteer (
        id              INTEGER PRIMARY KEY,
        country         TEXT NOT NULL,
        name            TEXT NOT NULL,
        alternate_names TEXT NOT NULL,
        latitude        REAL NOT NULL,
        longitude       REAL NOT NULL,
        admin1          TEXT,
        population      INTEGER NOT NULL,
        timezone        TEXT
    ) STRICT;
    CREATE INDEX gazetteer_by_country ON gazetteer (country);
    PRAGMA user_version = 3;";

/// Version 3 to 4: key kinds (publishable keys for web pages: their origins and per-IP
/// limit). Every existing key is a secret key.
const MIGRATION_4: &str = "
    ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'secret'
        CHECK (kind IN ('secret', 'publishable'));
    ALTER TABLE api_keys ADD COLUMN origins TEXT CHECK (origins IS NULL OR length(origins) > 0);
    ALTER TABLE api_keys ADD COLUMN per_ip_minute INTEGER
        CHECK (per_ip_minute IS NULL OR per_ip_minute > 0);
    PRAGMA user_version = 4;";

/// Version 4 to 5: the dataset's history (issue 23, docs/dataset.md): retired codes,
/// each import's provenance and changes, the operator's overrides. Empty until the next
/// import.
const MIGRATION_5: &str = "
    CREATE TABLE retired_codes (
        country     TEXT NOT NULL,
        compact_key TEXT NOT NULL,
        postal_code TEXT NOT NULL,
        city        TEXT NOT NULL,
        since       INTEGER NOT NULL,
        PRIMARY KEY (country, compact_key)
    ) STRICT;
    CREATE TABLE imports (
        generation   INTEGER PRIMARY KEY,
        started_at   INTEGER NOT NULL,
        finished_at  INTEGER NOT NULL,
        records      INTEGER NOT NULL,
        codes        INTEGER NOT NULL,
        countries    INTEGER NOT NULL,
        bad_lines    INTEGER NOT NULL,
        allow_shrink INTEGER NOT NULL CHECK (allow_shrink IN (0, 1)),
        overrides    INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE import_sources (
        generation     INTEGER NOT NULL,
        position       INTEGER NOT NULL,
        role           TEXT NOT NULL CHECK (role IN ('postal', 'country_info', 'gazetteer', 'overrides')),
        location       TEXT NOT NULL,
        bytes          INTEGER NOT NULL,
        sha256         TEXT NOT NULL,
        last_modified  TEXT,
        etag           TEXT,
        entry          TEXT,
        entry_modified TEXT,
        PRIMARY KEY (generation, position)
    ) STRICT;
    CREATE TABLE import_countries (
        generation INTEGER NOT NULL,
        country    TEXT NOT NULL,
        records    INTEGER NOT NULL,
        codes      INTEGER NOT NULL,
        added      INTEGER NOT NULL,
        removed    INTEGER NOT NULL,
        moved      INTEGER NOT NULL,
        PRIMARY KEY (generation, country)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE code_changes (
        generation         INTEGER NOT NULL,
        country            TEXT NOT NULL,
        postal_code        TEXT NOT NULL,
        change             TEXT NOT NULL CHECK (change IN ('added', 'removed', 'moved')),
        city               TEXT NOT NULL,
        latitude           REAL,
        longitude          REAL,
        previous_city      TEXT,
        previous_latitude  REAL,
        previous_longitude REAL
    ) STRICT;
    CREATE INDEX code_changes_by_generation ON code_changes (generation, country);
    CREATE TABLE overrides (
        line        INTEGER PRIMARY KEY,
        action      TEXT NOT NULL CHECK (action IN ('add', 'remove')),
        fields      TEXT NOT NULL
    ) STRICT;
    PRAGMA user_version = 5;";

/// Version 5 to 6: the stored answers of idempotent bulk requests (`Idempotency-Key`).
const MIGRATION_6: &str = "
    CREATE TABLE idempotent_answers (
        id              INTEGER PRIMARY KEY,
        account_id      INTEGER NOT NULL REFERENCES accounts (id),
        idempotency_key TEXT NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
        endpoint        TEXT NOT NULL,
        fingerprint     BLOB NOT NULL CHECK (length(fingerprint) = 32),
        body            BLOB NOT NULL,
        created_at      INTEGER NOT NULL,
        UNIQUE (account_id, idempotency_key)
    ) STRICT;
    CREATE INDEX idempotent_answers_by_age ON idempotent_answers (created_at);
    PRAGMA user_version = 6;";

/// Version 6 to 7: the account dashboard's providers, identities, sessions, sign-ins and
/// key names (as in schema.sql).
const MIGRATION_7: &str = "
    -- The account dashboard (docs/account.md). The OpenID Connect providers customers sign
    -- in with (`postal provider add`); the client secret is kept here, as the file keeps the
    -- keys' hashes: whoever reads the file can sign in as this service at the provider.
    CREATE TABLE oidc_providers (
        name          TEXT PRIMARY KEY,       -- [a-z0-9-], in the redirect URI
        issuer        TEXT NOT NULL,          -- the issuer URL as given, discovery from it
        client_id     TEXT NOT NULL,
        client_secret TEXT NOT NULL,
        created_at    INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;

    -- An identity (issuer, subject) belongs to one account, for ever: its first sign-in made
    -- the account (with the free allowance), or a signed-in customer linked it. Never by
    -- e-mail address. An unlinked identity keeps its row (`unlinked_at`), so that signing in
    -- with it again makes no second free allowance.
    CREATE TABLE identities (
        issuer      TEXT NOT NULL,
        subject     TEXT NOT NULL,
        account_id  INTEGER NOT NULL REFERENCES accounts (id),
        provider    TEXT NOT NULL,            -- the provider's name when it was linked
        email       TEXT,                     -- display only, when the provider says it is verified
        created_at  INTEGER NOT NULL,
        unlinked_at INTEGER,
        PRIMARY KEY (issuer, subject)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX identities_by_account ON identities (account_id);

    -- Dashboard sessions: the SHA-256 of the cookie's random id (the id itself is never
    -- stored); idle and absolute expiry are checked against `seen_at` and `created_at`.
    CREATE TABLE sessions (
        id_hash    BLOB PRIMARY KEY CHECK (length(id_hash) = 32),
        public_id  TEXT NOT NULL UNIQUE,      -- 'ses_' + 12 base62: how the customer names one
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        csrf       TEXT NOT NULL,             -- the token every state-changing request carries
        created_at INTEGER NOT NULL,
        seen_at    INTEGER NOT NULL,
        ended_at   INTEGER,
        client     TEXT                       -- the browser's User-Agent, cut to 200 characters
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX sessions_by_account ON sessions (account_id);

    -- Sign-ins under way: the SHA-256 of `state`, with the nonce and PKCE verifier the
    -- callback needs; taken (deleted) by the callback, so a state serves once.
    CREATE TABLE signins (
        state_hash   BLOB PRIMARY KEY CHECK (length(state_hash) = 32),
        provider     TEXT NOT NULL,
        nonce        TEXT NOT NULL,
        verifier     TEXT NOT NULL,
        link_account INTEGER REFERENCES accounts (id), -- set when a signed-in customer links
        created_at   INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;

    -- Who changed what of an account (keys, limits, money, sign-ins), from the dashboard or
    -- the CLI: append-only, shown to the customer and as CSV.
    CREATE TABLE audit_log (
        id         INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        at         INTEGER NOT NULL,
        actor      TEXT NOT NULL,   -- 'operator (CLI)', 'customer (session ses_…)'
        action     TEXT NOT NULL,   -- 'key.create', 'limits.set', 'topup', ...
        detail     TEXT NOT NULL
    ) STRICT;
    CREATE INDEX audit_log_by_account ON audit_log (account_id, id);

    -- Keys get a name the customer gives them, and show their first characters.
    ALTER TABLE api_keys ADD COLUMN name TEXT CHECK (name IS NULL OR length(name) BETWEEN 1 AND 100);
    ALTER TABLE api_keys ADD COLUMN hint TEXT; -- the key's first characters ('sk_AbCd'), to tell keys apart
    -- A rolled key works until then (unix seconds), then is refused as if revoked.
    ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
    PRAGMA user_version = 7;";

/// Version 7 to 8: top-ups by card, their processor's settings (as in schema.sql).
const MIGRATION_8: &str = "
    -- Top-ups by card (docs/payments.md). The processor's settings (`postal payments stripe`),
    -- one row; its secret key and webhook secret are kept here, as the providers' secrets are:
    -- whoever reads the file can charge cards and forge webhooks as this service.
    CREATE TABLE payment_settings (
        id             INTEGER PRIMARY KEY CHECK (id = 1),
        processor      TEXT NOT NULL CHECK (processor = 'stripe'),
        secret_key     TEXT NOT NULL,
        webhook_secret TEXT NOT NULL,
        api_base       TEXT NOT NULL,           -- 'https://api.stripe.com', or a proxy's
        max_topup      INTEGER NOT NULL CHECK (max_topup >= 5000000), -- micro-USD
        updated_at     INTEGER NOT NULL
    ) STRICT;

    -- A top-up a customer started: 'pending' until the processor says it is paid, then 'paid'
    -- in the transaction that writes its ledger row (so it is credited once, whichever node
    -- gets the webhook and however often), or 'expired' / 'failed'. A refund of its payment
    -- is counted here: `refunded` as the processor counts it, `taken_back` what the balance
    -- gave (never below zero); the difference is the shortfall the operator is shown.
    CREATE TABLE topups (
        id         INTEGER PRIMARY KEY,
        public_id  TEXT NOT NULL UNIQUE,        -- 'top_' + 16 base62, the session's idempotency key
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        amount     INTEGER NOT NULL CHECK (amount > 0),  -- asked, micro-USD
        status     TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'expired', 'failed')),
        session_id TEXT UNIQUE,                 -- the Checkout Session ('cs_…'), once made
        url        TEXT,                        -- its payment page
        payment    TEXT UNIQUE,                 -- the PaymentIntent ('pi_…'), once paid
        credited   INTEGER CHECK (credited > 0), -- what was paid, credited in full
        refunded   INTEGER NOT NULL DEFAULT 0,
        taken_back INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        paid_at    INTEGER,
        CHECK ((status = 'paid') = (credited IS NOT NULL AND paid_at IS NOT NULL)),
        CHECK (taken_back BETWEEN 0 AND refunded)
    ) STRICT;
    CREATE INDEX topups_by_account ON topups (account_id, id);
    PRAGMA user_version = 8;";

/// Version 8 to 9: a publishable key's budget (as in schema.sql).
const MIGRATION_9: &str = "
    -- A publishable key's budget: at most this many requests in a UTC minute, in a UTC day,
    -- over every client IP (NULL: no bound). Counted in memory by each node.
    ALTER TABLE api_keys ADD COLUMN max_per_minute INTEGER
        CHECK (max_per_minute IS NULL OR max_per_minute > 0);
    ALTER TABLE api_keys ADD COLUMN max_per_day INTEGER
        CHECK (max_per_day IS NULL OR max_per_day > 0);
    PRAGMA user_version = 9;";

/// Version 9 to 10: a provider's kind and who may sign in with it (as in schema.sql).
const MIGRATION_10: &str = "
    ALTER TABLE oidc_providers ADD COLUMN kind TEXT NOT NULL DEFAULT 'oidc'
        CHECK (kind IN ('oidc', 'google', 'github', 'microsoft'));
    ALTER TABLE oidc_providers ADD COLUMN allowed TEXT NOT NULL DEFAULT '';
    PRAGMA user_version = 10;";

/// Version 10 to 11: usage per key (as in schema.sql): the key of each charge from now on,
/// and the charges so far summed per account, day and endpoint under key 0.
const MIGRATION_11: &str = "
    ALTER TABLE ledger ADD COLUMN key_id INTEGER REFERENCES api_keys (id);
    CREATE TABLE usage_days (
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        day        INTEGER NOT NULL,
        key_id     INTEGER NOT NULL,
        endpoint   TEXT NOT NULL,
        queries    INTEGER NOT NULL CHECK (queries >= 0),
        charged    INTEGER NOT NULL CHECK (charged >= 0),
        last_at    INTEGER NOT NULL,
        PRIMARY KEY (account_id, day, key_id, endpoint)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO usage_days (account_id, day, key_id, endpoint, queries, charged, last_at)
        SELECT account_id, at - at % 86400, 0, endpoint, sum(query_count), -sum(amount), max(at)
        FROM ledger WHERE kind = 'charge'
        GROUP BY account_id, at - at % 86400, endpoint;
    PRAGMA user_version = 11;";

/// Version 11 to 12 (as in schema.sql): the ledger's index by account, and the count of
/// changes to what the server holds in memory, with its triggers.
const MIGRATION_12: &str = "
    CREATE INDEX ledger_by_account ON ledger (account_id, id);
    CREATE TABLE books_version (
        id      INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL
    ) STRICT;
    INSERT INTO books_version (id, version) VALUES (1, 0);
    CREATE TRIGGER accounts_inserted AFTER INSERT ON accounts
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER accounts_updated AFTER UPDATE ON accounts
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER accounts_deleted AFTER DELETE ON accounts
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER api_keys_inserted AFTER INSERT ON api_keys
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER api_keys_updated AFTER UPDATE ON api_keys
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER api_keys_deleted AFTER DELETE ON api_keys
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER oidc_providers_inserted AFTER INSERT ON oidc_providers
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER oidc_providers_updated AFTER UPDATE ON oidc_providers
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER oidc_providers_deleted AFTER DELETE ON oidc_providers
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER payment_settings_inserted AFTER INSERT ON payment_settings
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER payment_settings_updated AFTER UPDATE ON payment_settings
        BEGIN UPDATE books_version SET version = version + 1; END;
    CREATE TRIGGER payment_settings_deleted AFTER DELETE ON payment_settings
        BEGIN UPDATE books_version SET version = version + 1; END;
    PRAGMA user_version = 12;";

/// Version 12 to 13 (as in schema.sql): sessions know the identity that opened them and
/// when it was last proved, and hold a link waiting for confirmation; sign-ins say what
/// they are for and which session started them.
const MIGRATION_13: &str = "
    ALTER TABLE sessions ADD COLUMN provider TEXT;
    ALTER TABLE sessions ADD COLUMN issuer TEXT;
    ALTER TABLE sessions ADD COLUMN subject TEXT;
    ALTER TABLE sessions ADD COLUMN authenticated_at INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN link_offer TEXT;
    ALTER TABLE signins ADD COLUMN purpose TEXT NOT NULL DEFAULT 'signin'
        CHECK (purpose IN ('signin', 'link', 'reauth'));
    ALTER TABLE signins ADD COLUMN session_hash BLOB
        CHECK (session_hash IS NULL OR length(session_hash) = 32);
    ALTER TABLE accounts ADD COLUMN topups_frozen TEXT;
    ALTER TABLE accounts ADD COLUMN created_from TEXT;
    CREATE INDEX accounts_by_origin ON accounts (created_from, created_at);
    CREATE TABLE disputes (
        dispute    TEXT PRIMARY KEY,
        topup_id   INTEGER NOT NULL REFERENCES topups (id),
        owed       INTEGER NOT NULL CHECK (owed >= 0),
        taken_back INTEGER NOT NULL CHECK (taken_back BETWEEN 0 AND owed),
        created_at INTEGER NOT NULL
    ) STRICT;
    PRAGMA user_version = 13;";

/// Version 13 to 14: the alerts' tables and triggers, which schema.sql adds after its
/// "Alerts" heading up to its line setting version 14, applied as written there, so the
/// two cannot differ. (A later version adds its part after that line.)
fn migration_14(conn: &Connection) -> Result<()> {
    const HEADING: &str = "-- Alerts (version 14";
    const END: &str = "PRAGMA user_version = 14;";
    let start = SCHEMA
        .find(HEADING)
        .context("schema.sql's Alerts heading")?;
    let end = SCHEMA[start..]
        .find(END)
        .context("schema.sql's version 14 line")?;
    conn.execute_batch(&SCHEMA[start..start + end + END.len()])?;
    Ok(())
}

/// One rung of the ladder: SQL, or code where SQL alone cannot say it.
enum Migration {
    Sql(&'static str),
    Code(fn(&Connection) -> Result<()>),
}

/// `MIGRATIONS[i]` takes a file from version `i + 1` to `i + 2`; a file of version `v`
/// gets every one from `MIGRATIONS[v - 1]` on, in order, in one transaction.
const MIGRATIONS: [Migration; SCHEMA_VERSION as usize - 1] = [
    Migration::Sql(MIGRATION_2),
    Migration::Code(migration_3),
    Migration::Sql(MIGRATION_4),
    Migration::Sql(MIGRATION_5),
    Migration::Sql(MIGRATION_6),
    Migration::Sql(MIGRATION_7),
    Migration::Sql(MIGRATION_8),
    Migration::Sql(MIGRATION_9),
    Migration::Sql(MIGRATION_10),
    Migration::Sql(MIGRATION_11),
    Migration::Sql(MIGRATION_12),
    Migration::Sql(MIGRATION_13),
    Migration::Code(migration_14),
];

pub(super) fn migrate(conn: &mut Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    match version {
        0 => tx.execute_batch(SCHEMA).context("applying schema.sql")?,
        1..SCHEMA_VERSION => {
            for (i, migration) in MIGRATIONS.iter().enumerate().skip(version as usize - 1) {
                let to = i + 2;
                match migration {
                    Migration::Sql(sql) => tx.execute_batch(sql).map_err(Into::into),
                    Migration::Code(apply) => apply(&tx),
                }
                .with_context(|| format!("migrating the schema to version {to}"))?;
            }
        }
        SCHEMA_VERSION => {}
        other => {
            bail!("database schema version {other} is newer than this program's ({SCHEMA_VERSION})")
        }
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests;
