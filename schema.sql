-- The one schema of the service: postal data, accounts, keys, ledger, rate-limit counters.
-- `db::open` applies this whole file in one IMMEDIATE transaction when the file's
-- `PRAGMA user_version` is 0 (a new file), so two processes opening a new file at once
-- cannot both apply it. The last statement sets the version. This file states the
-- current version whole: a change of schema edits it and adds the numbered migration in
-- `src/db/migrations.rs` that brings an older file to the same tables and columns, in the same
-- column order (its tests compare a migrated file with a new one). The PostgreSQL ledger's
-- copy of the money and account tables is `src/db/pg/mod.rs`; `ledger migrate` moves them
-- (`src/db/pg/from_file.rs`, which lists every table here as moved or not).

---------------------------------------------------------------------------------------
-- Postal data. Owned by `postal-import`, which builds new copies of `postal_codes`,
-- `gazetteer` and `retired_codes` beside these (`<name>_next`, from the definitions
-- below) and swaps them in,
-- with the rows of `countries`, in one short transaction (`db::dataset`); nothing else
-- writes them.
---------------------------------------------------------------------------------------

-- Which dataset the postal tables hold: the swap transaction of every import adds 1 to
-- `generation`, and nothing else changes it. A server keeps the postal data in memory and
-- loads it again when it sees a new generation (`index::loader`).
CREATE TABLE dataset (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    generation  INTEGER NOT NULL,
    imported_at INTEGER                          -- unix seconds of the swap; NULL: never
) STRICT;
INSERT INTO dataset (id, generation) VALUES (1, 0);

-- All 252 ISO 3166-1 alpha-2 codes of GeoNames' countryInfo.txt, whether or not any
-- postal data is loaded for them, with what the API needs to know about a country
-- without scanning `postal_codes`.
CREATE TABLE countries (
    code          TEXT PRIMARY KEY,          -- 'US'
    name          TEXT NOT NULL,             -- 'United States'
    postal_format TEXT NOT NULL,             -- '#####-####', '' when the country has none
    postal_regex  TEXT NOT NULL,             -- '^\d{5}(-\d{4})?$', '' when none
    record_count  INTEGER NOT NULL DEFAULT 0,
    -- Distinct shapes of the country's stored compact keys, space-separated and sorted
    -- ('A9 A99 AA9 AA99 A9A AA9A' for GB): a letter is written 'A', a digit '9'. A
    -- query whose key has one of these shapes is well-formed (decisions.md, invalid_format).
    key_shapes    TEXT NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;

-- One row per line of the GeoNames files. `id` is the line's order in the source (files
-- in the order given), so "the first record of a code" is the lowest id.
CREATE TABLE postal_codes (
    id           INTEGER PRIMARY KEY,
    country      TEXT NOT NULL,   -- ISO alpha-2, upper case
    postal_code  TEXT NOT NULL,   -- as the data writes it: '100-0001', 'SW1A', 'LV-1001'
    compact_key  TEXT NOT NULL,   -- upper case, spaces and hyphens removed: '1000001', 'LV1001'
    place_name   TEXT NOT NULL,
    place_folded TEXT NOT NULL,   -- place_name through `domain::text::fold`: 'munchen'
    admin_name1  TEXT,            -- empty source columns are NULL
    admin_code1  TEXT,
    admin_name2  TEXT,
    admin_code2  TEXT,
    admin_name3  TEXT,
    admin_code3  TEXT,
    latitude     REAL,
    longitude    REAL,
    accuracy     INTEGER,
    timezone     TEXT             -- IANA zone at (latitude, longitude), computed at import
) STRICT;

-- /api/city exact match: (country, folded place name) -> rows.
CREATE INDEX postal_codes_by_place ON postal_codes (country, place_folded);

-- The GeoNames gazetteer (`cities500.zip`): populated places with their population and
-- alternate names, of the countries with postal data; empty when the import found none.
-- City search joins them to postal codes by country, name and distance when the dataset
-- loads (`index::city`, docs/city.md); no query reads this table.
CREATE TABLE gazetteer (
    id              INTEGER PRIMARY KEY,  -- GeoNames' geonameid
    country         TEXT NOT NULL,
    name            TEXT NOT NULL,
    alternate_names TEXT NOT NULL,        -- comma-separated, every language and script
    latitude        REAL NOT NULL,
    longitude       REAL NOT NULL,
    admin1          TEXT,                 -- GeoNames' admin1 code (not the postal file's)
    population      INTEGER NOT NULL,
    timezone        TEXT
) STRICT;
CREATE INDEX gazetteer_by_country ON gazetteer (country);

-- Codes that an import removed: `/api/lookup`, `/api/metacode`, `/api/places` still answer
-- 404 but name the code's last place and the day it went; validation answers `retired`
-- (docs/dataset.md). Owned by the import like `postal_codes` (rebuilt beside it and swapped
-- in with it): the previous retired codes minus those the new data holds again, plus the
-- codes this import removed. A code that comes back is no longer retired.
CREATE TABLE retired_codes (
    country     TEXT NOT NULL,
    compact_key TEXT NOT NULL,
    postal_code TEXT NOT NULL,    -- as the data wrote it
    city        TEXT NOT NULL,    -- its first place when it was removed
    since       INTEGER NOT NULL, -- unix seconds of the swap of the import that removed it
    PRIMARY KEY (country, compact_key)
) STRICT;

---------------------------------------------------------------------------------------
-- The dataset's history (docs/dataset.md). Written by `postal-import`, append-only: the
-- rows of an import are written before its swap under its generation, and count once the
-- swap has committed its `imports` row (an interrupted import's rows are removed by the
-- next one).
---------------------------------------------------------------------------------------

-- One row per import that swapped a dataset in, committed in the swap transaction.
CREATE TABLE imports (
    generation   INTEGER PRIMARY KEY,      -- the `dataset.generation` it made
    started_at   INTEGER NOT NULL,         -- unix seconds
    finished_at  INTEGER NOT NULL,         -- the swap
    records      INTEGER NOT NULL,
    codes        INTEGER NOT NULL,
    countries    INTEGER NOT NULL,
    bad_lines    INTEGER NOT NULL,
    allow_shrink INTEGER NOT NULL CHECK (allow_shrink IN (0, 1)),
    overrides    INTEGER NOT NULL          -- override lines applied
) STRICT;

-- What each import read: every file (or zip entry) of every source.
CREATE TABLE import_sources (
    generation     INTEGER NOT NULL,
    position       INTEGER NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('postal', 'country_info', 'gazetteer', 'overrides')),
    location       TEXT NOT NULL,          -- the path or URL as given
    bytes          INTEGER NOT NULL,       -- of the file read (the whole zip)
    sha256         TEXT NOT NULL,          -- lower-case hex, of the same bytes
    last_modified  TEXT,                   -- the upstream answer's headers, when downloaded
    etag           TEXT,
    entry          TEXT,                   -- the zip entry read
    entry_modified TEXT,                   -- its time as the zip stores it (no zone)
    PRIMARY KEY (generation, position)
) STRICT;

-- Per import and country: records and codes imported, and the codes added, removed and
-- moved against the dataset it replaced.
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

-- The codes each import added, removed or moved (its first record more than 1 km away, or
-- another first place). A country's first import is counted in `import_countries`, its
-- codes not listed one by one.
CREATE TABLE code_changes (
    generation         INTEGER NOT NULL,
    country            TEXT NOT NULL,
    postal_code        TEXT NOT NULL,
    change             TEXT NOT NULL CHECK (change IN ('added', 'removed', 'moved')),
    city               TEXT NOT NULL,      -- the first place: new (added, moved) or last (removed)
    latitude           REAL,
    longitude          REAL,
    previous_city      TEXT,               -- moved: the first place before
    previous_latitude  REAL,
    previous_longitude REAL
) STRICT;
CREATE INDEX code_changes_by_generation ON code_changes (generation, country);

-- The operator's corrections (`postal-import --overrides FILE`), applied by every import
-- until replaced: a line of the postal format after `add` or `remove`.
CREATE TABLE overrides (
    line        INTEGER PRIMARY KEY,       -- its line in the file
    action      TEXT NOT NULL CHECK (action IN ('add', 'remove')),
    fields      TEXT NOT NULL              -- the line's 12 columns, tab-separated
) STRICT;

---------------------------------------------------------------------------------------
-- Money: accounts, API keys, ledger, rate-limit counters. Owned by `db::sqlite` (accounts, keys, ledger) and
-- `billing`; `postal-import` never touches them.
---------------------------------------------------------------------------------------

-- Times are unix seconds (UTC). Money is integer micro-dollars (1 USD = 1,000,000; a
-- query costs 28), never floating point.

-- An account: its balance, its optional rate limits and its rate-limit counters.
-- `balance` is the cached sum of the account's ledger rows: every statement that changes
-- it inserts the matching ledger row in the same transaction (`postal ledger verify`
-- checks the equality), and the CHECK makes a negative balance impossible whatever the
-- code above does.
CREATE TABLE accounts (
    id               INTEGER PRIMARY KEY,
    public_id        TEXT NOT NULL UNIQUE,           -- 'acct_' + 12 base62
    name             TEXT,
    balance          INTEGER NOT NULL CHECK (balance >= 0),
    created_at       INTEGER NOT NULL,
    -- Limits in billed queries per fixed UTC window; NULL = no limit on that window,
    -- all three NULL = rate limiting off (the default).
    limit_per_minute INTEGER CHECK (limit_per_minute > 0),
    limit_per_hour   INTEGER CHECK (limit_per_hour > 0),
    limit_per_day    INTEGER CHECK (limit_per_day > 0),
    -- Counters: (start of the window counted, billed queries in it). A start that is not
    -- the current window's start means 0 (`domain::rate_limit::Counters`). Kept on the
    -- account row so that a charge updates one row; persisted, so a restart resets no
    -- window.
    minute_start     INTEGER NOT NULL DEFAULT 0,
    minute_count     INTEGER NOT NULL DEFAULT 0 CHECK (minute_count >= 0),
    hour_start       INTEGER NOT NULL DEFAULT 0,
    hour_count       INTEGER NOT NULL DEFAULT 0 CHECK (hour_count >= 0),
    day_start        INTEGER NOT NULL DEFAULT 0,
    day_count        INTEGER NOT NULL DEFAULT 0 CHECK (day_count >= 0),
    -- Why the account may start no top-up by card (version 13): a dispute of one of its
    -- payments ('dispute dp_… of top_…'), until `postal account unfreeze`; NULL when free.
    topups_frozen    TEXT,
    -- The client address (an IPv4 address, or an IPv6 /64) whose first sign-in made the
    -- account, counted against `serve --max-new-accounts-per-ip-day` (version 13); NULL
    -- for accounts the operator made or made before.
    created_from     TEXT
) STRICT;
CREATE INDEX accounts_by_origin ON accounts (created_from, created_at);

-- API keys: only the SHA-256 of the secret is stored. A revoked key stays (with its
-- revocation time) so listings and the ledger keep their history.
CREATE TABLE api_keys (
    id          INTEGER PRIMARY KEY,
    public_id   TEXT NOT NULL UNIQUE,                -- 'key_' + 12 base62
    key_hash    BLOB NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    -- 'secret' (servers: every operation) or 'publishable' (web pages: the read
    -- operations a form needs, from `origins` only, at most `per_ip_minute` requests a
    -- minute per client IP). Keys made before version 4 are secret.
    kind          TEXT NOT NULL DEFAULT 'secret' CHECK (kind IN ('secret', 'publishable')),
    origins       TEXT CHECK (origins IS NULL OR length(origins) > 0), -- canonical patterns, one per line
    per_ip_minute INTEGER CHECK (per_ip_minute IS NULL OR per_ip_minute > 0),
    -- The name the customer gives it, and its first characters ('sk_AbCd'), to tell keys
    -- apart (version 7).
    name          TEXT CHECK (name IS NULL OR length(name) BETWEEN 1 AND 100),
    hint          TEXT,
    -- A rolled key works until then (unix seconds), then is refused as if revoked.
    expires_at    INTEGER,
    -- A publishable key's budget: at most this many requests in a UTC minute, in a UTC
    -- day, over every client IP (NULL: no bound). Counted in memory by each node
    -- (version 9).
    max_per_minute INTEGER CHECK (max_per_minute IS NULL OR max_per_minute > 0),
    max_per_day    INTEGER CHECK (max_per_day IS NULL OR max_per_day > 0)
) STRICT;

CREATE INDEX api_keys_by_account ON api_keys (account_id);

-- Every change of a balance, append-only. `amount` is signed (a charge is negative);
-- `balance_after` is the account's balance once this row applies. A charge row covers the
-- `query_count` queries of one account on one endpoint committed in one transaction (the
-- billing writer's group commit), so the ledger grows by batches, not by requests.
CREATE TABLE ledger (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts (id),
    at            INTEGER NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('grant', 'topup', 'charge', 'adjustment')),
    amount        INTEGER NOT NULL,
    balance_after INTEGER NOT NULL CHECK (balance_after >= 0),
    query_count   INTEGER NOT NULL DEFAULT 0 CHECK (query_count >= 0),
    endpoint      TEXT,                              -- charges: '/api/lookup', ...
    note          TEXT,                              -- adjustments: the reason
    -- Charges: the API key they were made with (version 11; NULL for charges made before).
    key_id        INTEGER REFERENCES api_keys (id),
    CHECK ((kind = 'charge') = (query_count > 0 AND endpoint IS NOT NULL)),
    CHECK (kind <> 'adjustment' OR note IS NOT NULL)
) STRICT;

-- (no index by account: the billing writer appends rows of many accounts per commit, and an
-- index would add a random page per account to every commit; verify scans the table.)

CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only');
END;

CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
BEGIN
    SELECT RAISE(ABORT, 'the ledger is append-only');
END;

-- Usage per account, UTC day, API key and endpoint: the charge rows of the ledger summed,
-- written by the flush that appends them (`db::sqlite::ledger::append_charges`), so the
-- dashboard, `postal usage` and `postal key list` read an account's usage by its key here
-- instead of scanning the ledger. `key_id` 0 holds the charges made before version 11,
-- which did not record their key. `day`: the UTC day's start (unix seconds); `charged`:
-- micro-USD taken; `last_at`: the last flush that counted here. (No comment inside: the
-- migration's text is this one's.)
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

-- The answers of bulk requests sent with an `Idempotency-Key` (docs/money.md, "Idempotent
-- bulk requests"), so that a retry within 24 hours replays the answer instead of running
-- and charging again. Only 200 answers are kept. The billing writer inserts a row in the
-- transaction that writes the request's charge, so after any crash an answer is here
-- exactly when its charge is in the ledger; it deletes rows a day old.
CREATE TABLE idempotent_answers (
    id              INTEGER PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts (id),
    idempotency_key TEXT NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    endpoint        TEXT NOT NULL,                   -- 'validate-bulk', 'nearest-bulk'
    -- SHA-256 of the request body's canonical JSON without `apiKey`
    fingerprint     BLOB NOT NULL CHECK (length(fingerprint) = 32),
    body            BLOB NOT NULL,                   -- the 200's JSON, byte for byte
    created_at      INTEGER NOT NULL,                -- when it was answered
    UNIQUE (account_id, idempotency_key)
) STRICT;

CREATE INDEX idempotent_answers_by_age ON idempotent_answers (created_at);


-- The account dashboard (docs/account.md). The providers customers sign in with
-- (`postal provider add`); the client secret is kept here, as the file keeps the keys'
-- hashes: whoever reads the file can sign in as this service at the provider.
CREATE TABLE oidc_providers (
    name          TEXT PRIMARY KEY,       -- [a-z0-9-], in the redirect URI
    issuer        TEXT NOT NULL,          -- the issuer URL (discovery from it), or GitHub's
    client_id     TEXT NOT NULL,
    client_secret TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    kind          TEXT NOT NULL DEFAULT 'oidc'
                  CHECK (kind IN ('oidc', 'google', 'github', 'microsoft')),
    allowed       TEXT NOT NULL DEFAULT ''  -- GitHub orgs or Microsoft tenants, by spaces
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
    client     TEXT,                      -- the browser's User-Agent, cut to 200 characters
    -- The identity that opened it (version 13; NULL in sessions opened before): unlinking
    -- it, or removing its provider, ends the session.
    provider   TEXT,
    issuer     TEXT,
    subject    TEXT,
    -- When its holder last proved that identity at the provider (the sign-in, or a later
    -- sign-in again); a roll, revoke, limit change, unlink or top-up asks for one within
    -- 15 minutes. 0 in sessions opened before version 13.
    authenticated_at INTEGER NOT NULL DEFAULT 0,
    -- An identity a link brought back, waiting for the customer's confirmation: JSON of
    -- its provider, issuer, subject, e-mail and when it came (version 13).
    link_offer TEXT
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
    created_at   INTEGER NOT NULL,
    -- What it is for (version 13): a sign-in, a link of another identity, or a session's
    -- sign-in again; the two last only in the session that started them (its id's hash).
    purpose      TEXT NOT NULL DEFAULT 'signin' CHECK (purpose IN ('signin', 'link', 'reauth')),
    session_hash BLOB CHECK (session_hash IS NULL OR length(session_hash) = 32)
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

-- A dispute (chargeback) of a top-up's payment, counted once (version 13): what was left
-- of the top-up's credit (`owed`: its credit less what refunds counted) and what the
-- balance gave back of it (never below zero); the top-up's `refunded`/`taken_back` count
-- it as a refund of everything left, and the account's top-ups are frozen.
CREATE TABLE disputes (
    dispute    TEXT PRIMARY KEY,            -- Stripe's 'dp_…'
    topup_id   INTEGER NOT NULL REFERENCES topups (id),
    owed       INTEGER NOT NULL CHECK (owed >= 0),
    taken_back INTEGER NOT NULL CHECK (taken_back BETWEEN 0 AND owed),
    created_at INTEGER NOT NULL
) STRICT;

-- An account's ledger, newest first, a page at a time (the dashboard's; version 12).
CREATE INDEX ledger_by_account ON ledger (account_id, id);

-- How often what the server holds in memory changed in the file: accounts and keys (its
-- books), providers and payment settings (its dashboard). Every change of those tables,
-- by any connection, counts one here (the triggers below); the server reloads them when
-- the count moved past its own flushes. Sessions, sign-ins, audit lines and usage never
-- count, so signed-in customers never make it reload (version 12).
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

---------------------------------------------------------------------------------------
-- Alerts (version 14; docs/alerts.md): what a customer wants to hear of, the events the
-- database decides in the transaction that causes them (the triggers below), and the
-- deliveries a sender makes of them after the commit (the outbox).
---------------------------------------------------------------------------------------

-- The operator's mail relay (`postal mail smtp`), one row; its password is kept here as
-- the payment settings' secrets are.
CREATE TABLE mail_settings (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    url        TEXT NOT NULL,                   -- 'smtp://HOST:PORT' (STARTTLS) or 'smtps://HOST:PORT'
    sender     TEXT NOT NULL,                   -- the From mailbox: 'Postal <billing@example.com>'
    username   TEXT,
    password   TEXT,
    updated_at INTEGER NOT NULL
) STRICT;

-- An account's alerts: its settings, and the state that makes each alert once. No row is
-- the defaults: e-mail on, no threshold, no webhook. `low_armed`: `balance.low` may be
-- sent (set again when the balance is back at or above `balance_below`); `empty_armed`:
-- `balance.empty` may be sent (set again by any rise of the balance); `near_*`: the start
-- of the last window of each kind `limit.near` was sent for.
CREATE TABLE alert_settings (
    account_id     INTEGER PRIMARY KEY REFERENCES accounts (id),
    balance_below  INTEGER CHECK (balance_below > 0),          -- micro-USD
    limit_percent  INTEGER CHECK (limit_percent BETWEEN 1 AND 100),
    email          INTEGER NOT NULL DEFAULT 1 CHECK (email IN (0, 1)),
    webhook_url    TEXT,
    webhook_secret TEXT,                                       -- 'whsec_' + base64 of the key
    low_armed      INTEGER NOT NULL DEFAULT 1 CHECK (low_armed IN (0, 1)),
    empty_armed    INTEGER NOT NULL DEFAULT 1 CHECK (empty_armed IN (0, 1)),
    near_minute    INTEGER NOT NULL DEFAULT 0,
    near_hour      INTEGER NOT NULL DEFAULT 0,
    near_day       INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    CHECK ((webhook_url IS NULL) = (webhook_secret IS NULL))
) STRICT;

-- An event, decided once, in the transaction of its cause. `public_id` is its stable id
-- (the webhook's `webhook-id`). The figures are those of the moment: `balance` (the
-- balance after), `amount` (balance.low: the threshold; topup.succeeded: the amount
-- credited), `period`/`period_start`/`queries`/`lim` (limit.near), `subject` (key.created:
-- the key's public id).
CREATE TABLE alert_events (
    id           INTEGER PRIMARY KEY,
    public_id    TEXT NOT NULL UNIQUE,              -- 'msg_' + 24 hex
    account_id   INTEGER NOT NULL REFERENCES accounts (id),
    type         TEXT NOT NULL CHECK (type IN ('balance.low', 'balance.empty', 'limit.near',
                                               'topup.succeeded', 'key.created', 'test')),
    at           INTEGER NOT NULL,
    balance      INTEGER,
    amount       INTEGER,
    period       TEXT CHECK (period IN ('minute', 'hour', 'day')),
    period_start INTEGER,
    queries      INTEGER,
    lim          INTEGER,
    subject      TEXT
) STRICT;
CREATE INDEX alert_events_by_account ON alert_events (account_id, id);

-- One attempt to deliver an event on a channel: 'pending' until a sender tries it (a
-- sender claims it until `claimed_until`, so a crashed sender's claim lapses), then
-- 'delivered', 'retrying' (a next attempt is its own row) or 'failed' (the last).
CREATE TABLE alert_deliveries (
    id            INTEGER PRIMARY KEY,
    event_id      INTEGER NOT NULL REFERENCES alert_events (id),
    account_id    INTEGER NOT NULL REFERENCES accounts (id),
    channel       TEXT NOT NULL CHECK (channel IN ('email', 'webhook')),
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    status        TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'retrying', 'failed')),
    due_at        INTEGER NOT NULL,
    claimed_until INTEGER NOT NULL DEFAULT 0,
    tried_at      INTEGER,
    result        TEXT
) STRICT;
CREATE INDEX alert_deliveries_due ON alert_deliveries (due_at) WHERE status = 'pending';
CREATE INDEX alert_deliveries_by_account ON alert_deliveries (account_id, id);

-- Every event's deliveries, made with it: an e-mail when the account wants e-mail, the
-- operator has a relay and the account has a verified address; a webhook when the
-- account has a URL (never for key.created, a notice to the account's owner).
CREATE TRIGGER alert_events_deliveries AFTER INSERT ON alert_events
BEGIN
    INSERT INTO alert_deliveries (event_id, account_id, channel, attempt, status, due_at)
        SELECT new.id, new.account_id, 'email', 1, 'pending', new.at
        WHERE coalesce((SELECT email FROM alert_settings WHERE account_id = new.account_id), 1) = 1
          AND EXISTS (SELECT 1 FROM mail_settings)
          AND EXISTS (SELECT 1 FROM identities WHERE account_id = new.account_id
                      AND unlinked_at IS NULL AND email IS NOT NULL);
    INSERT INTO alert_deliveries (event_id, account_id, channel, attempt, status, due_at)
        SELECT new.id, new.account_id, 'webhook', 1, 'pending', new.at
        FROM alert_settings WHERE account_id = new.account_id AND webhook_url IS NOT NULL
          AND new.type <> 'key.created';
END;

-- balance.low when a fall of the balance crosses the threshold while armed; armed again
-- once the balance is back at or above it; balance.empty armed again by any rise. Only
-- for an account with settings (no row: nothing is armed off, nothing to decide), so a
-- flush of the others pays one index probe per row.
CREATE TRIGGER alerts_on_balance AFTER UPDATE OF balance ON accounts
WHEN new.balance <> old.balance
     AND EXISTS (SELECT 1 FROM alert_settings WHERE account_id = new.id)
BEGIN
    INSERT INTO alert_events (public_id, account_id, type, at, balance, amount)
        SELECT 'msg_' || lower(hex(randomblob(12))), new.id, 'balance.low', unixepoch(),
               new.balance, balance_below
        FROM alert_settings
        WHERE account_id = new.id AND low_armed = 1 AND new.balance < balance_below
          AND new.balance < old.balance;
    UPDATE alert_settings SET low_armed = 0
        WHERE account_id = new.id AND low_armed = 1 AND new.balance < balance_below
          AND new.balance < old.balance;
    UPDATE alert_settings SET low_armed = 1
        WHERE account_id = new.id AND low_armed = 0 AND new.balance >= balance_below;
    UPDATE alert_settings SET empty_armed = 1
        WHERE account_id = new.id AND empty_armed = 0 AND new.balance > old.balance;
END;

-- limit.near once per window: a window's count reaches `limit_percent` of its limit.
CREATE TRIGGER alerts_on_windows AFTER UPDATE OF minute_count, hour_count, day_count ON accounts
WHEN EXISTS (SELECT 1 FROM alert_settings
             WHERE account_id = new.id AND limit_percent IS NOT NULL)
BEGIN
    INSERT INTO alert_events (public_id, account_id, type, at, period, period_start, queries, lim)
        SELECT 'msg_' || lower(hex(randomblob(12))), new.id, 'limit.near', unixepoch(),
               w.name, w.start, w.count, w.lim
        FROM alert_settings s,
             (SELECT 'minute' AS name, new.minute_start AS start, new.minute_count AS count,
                     new.limit_per_minute AS lim
              UNION ALL SELECT 'hour', new.hour_start, new.hour_count, new.limit_per_hour
              UNION ALL SELECT 'day', new.day_start, new.day_count, new.limit_per_day) w
        WHERE s.account_id = new.id AND s.limit_percent IS NOT NULL AND w.lim IS NOT NULL
          AND w.count * 100 >= w.lim * s.limit_percent
          AND w.start <> CASE w.name WHEN 'minute' THEN s.near_minute
                                     WHEN 'hour' THEN s.near_hour ELSE s.near_day END;
    UPDATE alert_settings SET
        near_minute = CASE WHEN new.limit_per_minute IS NOT NULL
            AND new.minute_count * 100 >= new.limit_per_minute * limit_percent
            THEN new.minute_start ELSE near_minute END,
        near_hour = CASE WHEN new.limit_per_hour IS NOT NULL
            AND new.hour_count * 100 >= new.limit_per_hour * limit_percent
            THEN new.hour_start ELSE near_hour END,
        near_day = CASE WHEN new.limit_per_day IS NOT NULL
            AND new.day_count * 100 >= new.limit_per_day * limit_percent
            THEN new.day_start ELSE near_day END
        WHERE account_id = new.id AND limit_percent IS NOT NULL;
END;

-- topup.succeeded: every top-up of the ledger (by card, or the operator's).
CREATE TRIGGER alerts_on_topup AFTER INSERT ON ledger WHEN new.kind = 'topup'
BEGIN
    INSERT INTO alert_events (public_id, account_id, type, at, balance, amount)
        VALUES ('msg_' || lower(hex(randomblob(12))), new.account_id, 'topup.succeeded',
                unixepoch(), new.balance_after, new.amount);
END;

-- key.created: a notice to the account's owner.
CREATE TRIGGER alerts_on_key AFTER INSERT ON api_keys
BEGIN
    INSERT INTO alert_events (public_id, account_id, type, at, subject)
        VALUES ('msg_' || lower(hex(randomblob(12))), new.account_id, 'key.created',
                unixepoch(), new.public_id);
END;

PRAGMA user_version = 14;
