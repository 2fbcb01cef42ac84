//! What each `/account/api` operation can answer besides its success, word for word, for
//! the OpenAPI document: the dashboard's own 401 and 403, never the API's 401 of a key or
//! its 402 (`crate::api::OperationError`).

/// An error of a dashboard operation, documented as `D` lists it: never the API's 401 of
/// a key nor its 402, which the dashboard does not answer.
pub(super) type Failed<D> = crate::api::OperationError<D>;

// What the operations answer besides their success, word for word. An account gone while
// signed in is also `Not signed in` (`account_error`).
const UNSIGNED_401: (u16, &str) = (
    401,
    "No live session: no session cookie, or its session ended or was signed out \
     (`Not signed in`).",
);
const REFUSED_403: (u16, &str) = (
    403,
    "The change lacks its session's `X-CSRF-Token` (`Missing or wrong X-CSRF-Token`) or \
     comes from another `Origin` than the public URL's (`Origin not allowed for the \
     dashboard`); nothing changed.",
);
const RECENT_403: (u16, &str) = (
    403,
    "The change lacks its session's `X-CSRF-Token` (`Missing or wrong X-CSRF-Token`), \
     comes from another `Origin` than the public URL's (`Origin not allowed for the \
     dashboard`), or the session's last sign-in is more than 15 minutes old (`Sign in again \
     to do this: this session's last sign-in is more than 15 minutes old`: sign in again \
     with `signInAgain`, then retry); nothing changed.",
);
const TOO_LARGE_413: (u16, &str) = (
    413,
    "The request body is larger than 64 KiB (`Request body too large`); nothing changed.",
);
const LIMITED_429: (u16, &str) = (
    429,
    "Too many requests a minute from the client's address (`Too many requests to the \
     dashboard from your address`: 120 by default, a quarter of it for changes) or in \
     the session (`Too many requests in this session`: 120 by default); nothing changed. Retry after \
     `Retry-After` seconds.",
);
const INTERNAL_500: (u16, &str) = (500, "Internal server error (`Internal server error`).");
const QUERY_400: (u16, &str) = (
    400,
    "A query parameter outside its documented values (`Invalid JSON body`, the text of any \
     request that cannot be parsed).",
);
const NO_KEY_404: (u16, &str) = (
    404,
    "The account holds no key of that id (`no key \"<keyId>\"`); nothing changed.",
);

/// `$name`, a marker type whose `Documented::ERRORS` are the statuses and texts listed.
macro_rules! documented {
    ($(#[$doc:meta])* $name:ident: $errors:expr) => {
        $(#[$doc])*
        pub(super) struct $name;

        impl crate::api::Documented for $name {
            const ERRORS: &'static [(u16, &'static str)] = &$errors;
        }
    };
}

/// A 400 of a change whose body is not a JSON object, or `$rest`.
macro_rules! bad_body {
    ($rest:literal) => {
        (
            400,
            concat!(
                "The body is not a JSON object (`Request body must be a JSON object`), ",
                $rest
            ),
        )
    };
}

/// What a change with a JSON body answers: its 400 (`bad_body!($rest)`), the dashboard's
/// 401 and 403, any of `$also` (its 404), 413 and 500.
macro_rules! body_change {
    ($rest:literal $(, $also:expr)*) => {
        body_change!(REFUSED_403; $rest $(, $also)*)
    };
    ($refused:ident; $rest:literal $(, $also:expr)*) => {
        [
            bad_body!($rest),
            UNSIGNED_401,
            $refused,
            $($also,)*
            TOO_LARGE_413,
            LIMITED_429,
            INTERNAL_500,
        ]
    };
}

documented! {
    /// A read of the signed-in account.
    Read: [UNSIGNED_401, LIMITED_429, INTERNAL_500]
}

documented! {
    /// `accountUsage`: a read with query parameters, one of them a key of the account.
    UsageRead: [
        QUERY_400,
        UNSIGNED_401,
        (
            404,
            "`key` names no key of the account (`no key \"<keyId>\"`).",
        ),
        LIMITED_429,
        INTERNAL_500,
    ]
}

documented! {
    /// `accountLedger`, `accountAudit`: a page of a listing.
    PagedRead: [
        (
            400,
            "A query parameter outside its documented values (`limit` not 1 to 500, another \
             `format`: `Invalid JSON body`), or a `cursor` that is not one this operation \
             answers (`Invalid 'cursor'`).",
        ),
        UNSIGNED_401,
        LIMITED_429,
        INTERNAL_500,
    ]
}

documented! {
    /// `createKey`.
    NewKey: body_change!(
        RECENT_403;
        "a field does not fit its documented type or bounds (`Invalid '<field>'`; a \
         name over 100 characters: `key name must be 1 to 100 characters`), or the CLI \
         refuses the key, in its words (`invalid origin ...`, `a publishable key needs \
         at least one origin`, `an account holds at most 20 live keys; revoke one \
         first`); nothing changed."
    )
}

documented! {
    /// `renameKey`.
    KeyRename: body_change!(
        "`name` is not a string (`Invalid 'name'`), or it is over 100 characters or \
         holds a control character (`key name must be 1 to 100 characters`); nothing \
         changed.",
        NO_KEY_404
    )
}

documented! {
    /// `revokeKey`.
    KeyRevoke: [UNSIGNED_401, RECENT_403, NO_KEY_404, LIMITED_429, INTERNAL_500]
}

documented! {
    /// `rollKey`.
    KeyRoll: body_change!(
        RECENT_403;
        "`graceHours` is not a whole number (`Invalid 'graceHours'`) or not 1 to 168 \
         (`graceHours must be 1 to 168 (7 days)`), the key is revoked (`a revoked \
         key cannot be rolled`), or the account holds 21 live keys, keys in their grace \
         counted (`an account holds at most 20 live keys; revoke one first`); nothing \
         changed.",
        NO_KEY_404,
        (
            409,
            "The key is in its grace, already rolled (`this key was already rolled: roll \
             its successor`); nothing changed.",
        )
    )
}

documented! {
    /// `setLimits`.
    SetLimits: body_change!(
        RECENT_403;
        "a window is not a whole number (`Invalid '<window>'`), or it is 0 (`a limit \
         must be at least 1 (use --off to remove limits)`); nothing changed."
    )
}

documented! {
    /// `endSession`.
    EndSession: [
        UNSIGNED_401,
        REFUSED_403,
        (
            404,
            "The account has no live session of that id (`no session \"<sessionId>\"`).",
        ),
        LIMITED_429,
        INTERNAL_500,
    ]
}

documented! {
    /// `unlinkIdentity`.
    Unlink: body_change!(
        RECENT_403;
        "`issuer` or `subject` is missing or not a string (`Invalid '<field>'`), the \
         account has no such identity (`no such identity on this account`), or it is \
         the last one (`an account keeps at least one identity`); nothing changed."
    )
}

documented! {
    /// `signOut`.
    SignOut: [UNSIGNED_401, REFUSED_403, LIMITED_429, INTERNAL_500]
}

documented! {
    /// `startTopup`.
    StartTopup: [
        bad_body!(
            "`amount` is missing, not a string or over 20 characters (`Invalid 'amount'`), \
             or not an amount this server takes (`amount must be USD in whole cents, such \
             as \"5.00\": got ...`, `a top-up must be at least 5 USD, got ... USD`, `a \
             top-up can be at most ... USD on this server, got ... USD`, or the cap on \
             pending top-ups); nothing was charged."
        ),
        UNSIGNED_401,
        (
            403,
            "The change lacks its session's `X-CSRF-Token` (`Missing or wrong X-CSRF-Token`), \
             comes from another `Origin` than the public URL's (`Origin not allowed for \
             the dashboard`), the session's last sign-in is more than 15 minutes old (`Sign \
             in again to do this: this session's last sign-in is more than 15 minutes old`: \
             sign in again with `signInAgain`, then retry), this server takes no cards \
             (`Top-ups by card are not set up on this server. ...`), or a dispute of one of \
             the account's card payments froze its top-ups until the operator lifts it \
             (`Top-ups by card are frozen for this account: one of its card payments was \
             disputed. Ask the operator of this server to review it.`); nothing changed.",
        ),
        TOO_LARGE_413,
        LIMITED_429,
        INTERNAL_500,
        (
            502,
            "Stripe answered a payment page that is not https (nor http to a loopback host) \
             (`The payment processor answered a payment page this server does not send \
             browsers to`); the top-up is marked failed, nothing was charged, and the cause \
             is in the server's log.",
        ),
        (
            503,
            "Stripe could not be reached (`The payment processor could not be reached; try \
             again in a minute`); the top-up is marked failed and nothing was charged. Retry \
             after `Retry-After` seconds.",
        ),
    ]
}

/// The 429 of a start at a provider: the sign-ins started from the address, or the
/// dashboard's limits.
const STARTS_429: (u16, &str) = (
    429,
    "Too many sign-ins started a minute from the client's address (`Too many sign-ins \
     were started from your address; try again in <n> seconds.`: 20), or too many requests \
     (`Too many requests to the dashboard from your address`, `Too many requests in this \
     session`); nothing changed. Retry after `Retry-After` seconds.",
);
/// The 503 of a start at a provider that cannot be reached.
const PROVIDER_503: (u16, &str) = (
    503,
    "The provider could not be reached (`The provider <name> could not be reached; try \
     again later.`), or the account service is busy; nothing changed. Retry after \
     `Retry-After` seconds.",
);

documented! {
    /// `linkIdentity`.
    StartLink: [
        bad_body!(
            "`provider` is missing or not a string (`Invalid 'provider'`); nothing changed."
        ),
        UNSIGNED_401,
        RECENT_403,
        (
            404,
            "No provider of that name is configured (`No such sign-in provider.`).",
        ),
        TOO_LARGE_413,
        STARTS_429,
        INTERNAL_500,
        PROVIDER_503,
    ]
}

documented! {
    /// `signInAgain`.
    SignInAgain: [
        (
            400,
            "The session was opened before sessions recorded their identity (`This session \
             does not know which identity opened it (it is older than this server's \
             version); sign out and sign in again.`).",
        ),
        UNSIGNED_401,
        REFUSED_403,
        (
            404,
            "The provider of the session's identity was removed (`No such sign-in provider.`).",
        ),
        STARTS_429,
        INTERNAL_500,
        PROVIDER_503,
    ]
}

documented! {
    /// `accountAlerts`.
    AlertsRead: [UNSIGNED_401, LIMITED_429, INTERNAL_500]
}

documented! {
    /// `setAlerts`.
    SetAlerts: body_change!(
        "a field does not fit its documented type or bounds (`Invalid '<field>'`; \
         `limitPercent` not 1 to 100), `balanceBelow` is not a positive USD amount \
         (`balanceBelow must be a positive USD amount such as \"1.00\": got ...`), or \
         `webhookUrl` is not an https URL of a public address (`webhookUrl must be an https \
         URL`, `webhookUrl resolves to <address>, a <kind> address: alerts go only to \
         public addresses`, `webhookUrl's host does not resolve`); nothing changed."
    )
}

documented! {
    /// `testAlerts`.
    TestAlert: [UNSIGNED_401, REFUSED_403, LIMITED_429, INTERNAL_500]
}

documented! {
    /// `rollAlertSecret`.
    RollSecret: [
        UNSIGNED_401,
        REFUSED_403,
        (
            409,
            "The account has no webhook (`No webhookUrl is set: set one first`); nothing \
             changed.",
        ),
        LIMITED_429,
        INTERNAL_500,
    ]
}
