//! Alerts to customers before their balance runs out (issue 51): what is sent, and how.

pub mod webhook;
