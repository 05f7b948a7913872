//! A healthy control plane with an aggregated API: every subject Healthy, exit 0.

use super::{Expect, Scan, on_both, scan};
use crate::util::k8s::extension::{Extension, Placement};
use crate::util::k8s::{Assets, ControlPlane};

fn healthy(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    let _ext = Extension::start(&cp, Placement::default());
    (scan(&cp, &[]), Expect::Healthy)
}
on_both!(healthy);
