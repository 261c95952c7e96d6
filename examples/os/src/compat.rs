//! TEMPORARY stand-in for `Ctx::waker` and `cosi::controller::Waker`, which
//! are being added to `cosi`; removed when they land. Until then a waker
//! wakes nothing: file events, DHCP leases and NTP timers are not seen.

use cosi::Ctx;

/// Stand-in for `cosi::controller::Waker`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Waker;

impl Waker {
    /// Stand-in for `Waker::wake`: does nothing yet.
    pub(crate) fn wake(&self) {}
}

/// Stand-in for `Ctx::waker`.
pub(crate) trait WakerExt {
    /// A waker of this controller.
    fn waker(&self) -> Waker;
}

impl<C> WakerExt for Ctx<C> {
    fn waker(&self) -> Waker {
        Waker
    }
}
