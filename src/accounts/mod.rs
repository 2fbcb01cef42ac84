//! The customer's side: accounts, their keys and limits, the providers customers sign in
//! with, identities, sessions, the audit log and top-ups by card. One admin interface
//! ([`Admin`], over the file or the cluster's ledger) serves both of its callers: the
//! operator's CLI and the account dashboard (`api::account`, HTTP only). The rules of a
//! change are `domain::admin`'s; the SQL is `db::sqlite`'s and `db::pg`'s; the money a
//! change moves is held by `billing`'s books before the change returns.
//!
//! - `admin`: the interface, where a change acts and how the server hears of it, and the
//!   audit log; its operations by area: `customers` (accounts, balances, limits,
//!   reports), `keys`, `signin` (providers, sign-ins in flight, identities), `sessions`,
//!   `payments` (the operator's settings, top-ups, what the processor's webhook confirms),
//!   `mail` (the operator's mail relay).
//! - `store`: what the server opens once at start ([`Accounts`]): the pool of connections
//!   and the threads the customer's side runs on, apart from the API's.
//! - The clients of the outside services, each call blocking on the store's threads for
//!   outside calls: `flow` (a sign-in at a provider of any kind), over `oidc` (an OpenID
//!   Connect provider's discovery, the authorization URL, the code exchanged for a checked
//!   ID token; Google and Microsoft too) and `github` (GitHub's OAuth web flow and REST
//!   API); `stripe` (Checkout Sessions made and read back, the webhook's events verified).

mod admin;
mod alerts;
mod customers;
pub mod flow;
mod github;
mod keys;
mod mail;
pub mod oidc;
mod payments;
pub mod sender;
mod sessions;
mod signin;
mod store;
pub mod stripe;

use admin::Store;

pub use admin::{Admin, OPERATOR};
pub use store::{Accounts, Failed};
// The shapes an admin operation takes and answers (stored by `db`'s twins), as the
// dashboard names them.
pub use crate::db::admin::{
    AccountError, Credited, IdentityView, KeyLine, LinkOffer, MailSettings, Payment,
    PaymentSettings, Provider, Refunded, SessionIdentity, SessionRow, SignIn, Signups, TopupView,
};
