//! What the handlers share (`State`): the dataset, the billing books, the bounds of a
//! request in flight. Its methods for the billed path are in `billed` and `once`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use super::envelope::Timings;
use super::{ApiError, MAX_IN_FLIGHT, contract};
use crate::billing::Billing;
use crate::billing::per_ip::PerIpLimiter;
use crate::domain::charge::AccountStatus;
use crate::domain::cidr::Cidr;
use crate::index::loader::{self, Slot};
use crate::index::postal::PostalIndex;

/// What the handlers share: the postal data in memory, a read pool and the billing books.
/// Every API of the service holds it behind one `Arc`.
pub struct State {
    /// The dataset, swapped whole when an import commits (see `index::loader`).
    pub(super) postal: Slot,
    /// Dropped with the server: the loader thread then stops at once.
    _loader: std::sync::mpsc::SyncSender<()>,
    /// Reads of the file beside the index (`/readyz`'s database check).
    pub(super) file: loader::FileCheck,
    pub(super) billing: Billing,
    pub(super) in_flight: AtomicUsize,
    pub(super) max_in_flight: usize,
    /// Requests refused 503 because `max_in_flight` were running (for metrics).
    pub(super) overloaded: AtomicU64,
    /// Publishable keys' requests a minute per client IP.
    pub(super) per_ip: PerIpLimiter,
    pub(super) trusted_proxies: Vec<Cidr>,
}

impl State {
    pub(super) fn new(
        postal: Slot,
        loader: std::sync::mpsc::SyncSender<()>,
        file: loader::FileCheck,
        billing: Billing,
    ) -> State {
        State {
            postal,
            _loader: loader,
            file,
            billing,
            in_flight: AtomicUsize::new(0),
            max_in_flight: MAX_IN_FLIGHT,
            overloaded: AtomicU64::new(0),
            per_ip: PerIpLimiter::default(),
            trusted_proxies: Vec::new(),
        }
    }

    /// The dataset as it is now.
    pub(super) fn postal(&self) -> Arc<PostalIndex> {
        loader::current(&self.postal)
    }

    /// Balance and windows as they stand, charging nothing (the free /api/aboutapi and
    /// /api/countries), for the key of `body` (`missing_text` when it has none).
    pub(super) fn status<T>(
        &self,
        body: &contract::ContractJson<T>,
        missing_text: &str,
        endpoint: crate::domain::charge::Endpoint,
        timings: &mut Timings,
    ) -> Result<AccountStatus, ApiError> {
        let key = self.authenticate(body.api_key(missing_text)?, timings)?;
        self.check_access(&body.meta, &key, endpoint)?;
        self.billing
            .status(key.caller)
            .map_err(|_| ApiError::invalid_api_key())
    }
}
