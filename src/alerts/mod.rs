//! Alerts to customers (issue 51, docs/alerts.md): the operator's mail relay.

pub mod mail;
