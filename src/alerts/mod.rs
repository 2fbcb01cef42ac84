//! Alerts (issue 51, docs/alerts.md): the events a customer hears of, by e-mail and by
//! signed webhook, decided by the database in the transaction of their cause and sent
//! after its commit by the sender (`sender`, over `webhook` and `mail`).

pub mod events;
pub mod mail;
pub mod sender;
pub mod webhook;
