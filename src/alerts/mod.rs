//! Alerts' outside services (issue 51, docs/alerts.md), as `accounts::stripe` is
//! Stripe's: the operator's mail relay (`mail`) and customers' webhooks (`webhook`). What
//! an event is and says is `domain::alerts`; the sender that delivers the outbox is
//! `accounts::sender`.

pub mod mail;
pub mod webhook;
