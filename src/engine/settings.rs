//! Settings that rules read (`settings.<name>` in CEL): thresholds with documented defaults, set from
//! one place and overridable on the command line with `--set name=value`.
//!
//! Rules never hard-code a threshold that an operator might reasonably want to change (how many days
//! before expiry a certificate is worth a warning, what etcd latency is "slow"); they read it from
//! here, so the same number shows up in the verdict, in `docs/rules.md` and in `--set`. The table
//! [`SETTINGS`] is the single source: name, default, unit and meaning. This module does not know any
//! rule; it only owns the names and values.

use std::collections::BTreeMap;

/// One known setting.
#[derive(Debug, Clone, Copy)]
pub struct SettingDef {
    /// Name as written in rules (`settings.cert_warn_days`) and on the command line.
    pub name: &'static str,
    /// Default value.
    pub default: f64,
    /// Unit, for humans (`days`, `seconds`, `ratio`, `count`).
    pub unit: &'static str,
    /// What it means.
    pub help: &'static str,
}

/// Every setting a rule may read, with its default. Documented in `docs/facts.md`.
pub const SETTINGS: &[SettingDef] = &[
    SettingDef {
        // cert-manager renews at two thirds of a certificate's life, 30 days before the end of its
        // default 90-day certificates: a managed certificate is normally renewed before this
        // window, and one inside it has a month left for a human to act.
        name: "cert_warn_days",
        default: 30.0,
        unit: "days",
        help: "a certificate expiring within this many days of the collection time is a warning",
    },
    SettingDef {
        // The p99 is interpolated inside histogram buckets (on 1.24 the top finite bucket is 2.5
        // s), so it is only an estimate: 80 % leaves room for that error before calls really time
        // out.
        name: "webhook_latency_ratio",
        default: 0.8,
        unit: "ratio",
        help: "webhook p99 latency at or above this fraction of its timeoutSeconds is 'near the timeout'",
    },
    SettingDef {
        // A webhook whose median call takes 1 s spends on its own the whole p99 budget of the
        // Kubernetes API call latency SLO (1 s for single-object mutating calls).
        name: "webhook_slow_seconds",
        default: 1.0,
        unit: "seconds",
        help: "a webhook whose median call over the metrics window takes at least this long slows every request it intercepts",
    },
    SettingDef {
        name: "webhook_traced_timeout_ratio",
        default: 0.5,
        unit: "ratio",
        help: "a webhook whose slowest call the API server traced took at least this fraction of its timeoutSeconds slows every request it intercepts (at or above its timeoutSeconds it times out)",
    },
    SettingDef {
        // timeoutSeconds defaults to 10 and may be 1–30 (admissionregistration/v1 types.go); the
        // Kubernetes docs ask for a small timeout because a call holds the request it intercepts.
        // Half again above the default, a Fail webhook on a hot path can stall every write that
        // long.
        name: "webhook_hot_path_timeout_seconds",
        default: 15.0,
        unit: "seconds",
        help: "a Fail webhook on a hot path with timeoutSeconds at or above this is a risk",
    },
    SettingDef {
        // The same 1 s API call latency SLO as `request_slow_seconds`: a conversion call sits
        // inside every read of a version other than the stored one (DESIGN §1), so at a p99 of
        // 1 s it alone spends the budget of the request that needed it.
        name: "conversion_latency_warn_seconds",
        default: 1.0,
        unit: "seconds",
        help: "CRD conversion webhook p99 at or above this is slow",
    },
    SettingDef {
        // kube-apiserver logs a trace for a storage call slower than 500 ms
        // (`span.End(500 * time.Millisecond)` in etcd3/store.go): Kubernetes' own "long".
        name: "etcd_request_p99_warn_seconds",
        default: 0.5,
        unit: "seconds",
        help: "kube-apiserver's etcd request p99 at or above this is slow",
    },
    SettingDef {
        name: "etcd_request_p99_critical_seconds",
        default: 2.0,
        unit: "seconds",
        help: "kube-apiserver's etcd request p99 at or above this is critical",
    },
    SettingDef {
        // etcd itself warns about every apply slower than 100 ms (--warning-apply-duration), too
        // often on a busy cluster to mean much alone; ten times that is slow by any reading.
        name: "etcd_traced_slow_seconds",
        default: 1.0,
        unit: "seconds",
        help: "a storage call kube-apiserver traced, or a request etcd warned took too long, taking at least this long means etcd is slow (even while its health checks pass)",
    },
    SettingDef {
        // etcd's performance guidance: p99 of wal_fsync under 10 ms. Every proposal is fsynced to
        // the WAL before it commits, so a slow disk delays every write and can make a member miss
        // heartbeats and lose its leader.
        name: "etcd_fsync_p99_warn_seconds",
        default: 0.01,
        unit: "seconds",
        help: "etcd WAL fsync p99 at or above this is slow (etcd guidance: 10 ms)",
    },
    SettingDef {
        // The same etcd guidance as for fsync: backend commit p99 under 25 ms. A commit writes
        // applied entries into the bbolt file, so a slow disk shows here as well as in the WAL.
        name: "etcd_commit_p99_warn_seconds",
        default: 0.025,
        unit: "seconds",
        help: "etcd backend commit p99 at or above this is slow (etcd guidance: 25 ms)",
    },
    SettingDef {
        // At the quota (--quota-backend-bytes, default 2 GiB) etcd raises the NOSPACE alarm and
        // refuses writes with `mvcc: database space exceeded` until compacted and defragmented; 80
        // % leaves time for that.
        name: "etcd_db_quota_warn_ratio",
        default: 0.8,
        unit: "ratio",
        help: "etcd database size at or above this fraction of its quota is a warning",
    },
    SettingDef {
        // Queue wait comes before any work (APF is the outermost filter, DESIGN §1): at 1 s of
        // wait a request has spent the whole API call latency SLO before its handler starts.
        name: "apf_wait_p99_warn_seconds",
        default: 1.0,
        unit: "seconds",
        help: "APF queue wait p99 at or above this means requests are queueing",
    },
    SettingDef {
        // The Kubernetes API call latency SLO (sig-scalability): p99 of single-object calls at most
        // 1 s; a request above it is worth explaining.
        name: "request_slow_seconds",
        default: 1.0,
        unit: "seconds",
        help: "a request that succeeded in at least this long is slow: the layer that took the time is looked for",
    },
    SettingDef {
        // At half or more of the latency, no other layer took longer than this one, so naming it
        // as what slowed the request cannot be contradicted by another layer's share.
        name: "request_layer_share",
        default: 0.5,
        unit: "ratio",
        help: "a layer whose time is at least this share of a slow request's latency is named as what slowed it",
    },
    SettingDef {
        // A read served from the watch cache waits for the cache to reach the requested
        // resourceVersion, but only for `blockTimeout` (3 s, cacher/watch_cache.go); then the
        // client gets a Timeout ("Too large resource version") with a retry-after. A p99 of 1 s is
        // a third of the way to those errors.
        name: "watch_cache_wait_p99_warn_seconds",
        default: 1.0,
        unit: "seconds",
        help: "watch-cache read wait p99 at or above this is slow",
    },
    SettingDef {
        // Every etcd leader election fails the proposals in flight (`etcdserver: leader
        // changed`), so a single one inside a short metrics window is already visible to clients.
        name: "leader_changes_warn",
        default: 1.0,
        unit: "count",
        help: "this many etcd leader changes within the metrics window is a warning",
    },
];

/// Why a `--set` could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// Not `name=value`.
    #[error("--set {0:?}: expected name=value")]
    Syntax(String),
    /// Unknown name.
    #[error("--set {name:?}: unknown setting (known: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// Known names, comma-separated.
        known: String,
    },
    /// Not a finite number.
    #[error("--set {name}={value:?}: not a number")]
    NotANumber {
        /// The name.
        name: String,
        /// The value given.
        value: String,
    },
}

/// The values rules see as `settings`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    values: BTreeMap<&'static str, f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            values: SETTINGS.iter().map(|d| (d.name, d.default)).collect(),
        }
    }
}

impl Settings {
    /// The value of a setting (its default unless overridden).
    ///
    /// # Panics
    /// Never for a name in [`SETTINGS`]; an unknown name is a programming error and panics.
    pub fn get(&self, name: &str) -> f64 {
        *self
            .values
            .get(name)
            .unwrap_or_else(|| panic!("unknown setting {name}"))
    }

    /// Every setting with its current value, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.values.iter().map(|(k, v)| (*k, *v))
    }

    /// Apply one `name=value`.
    ///
    /// # Errors
    /// [`SettingsError`] for a malformed assignment, an unknown name or a non-number.
    pub fn set(&mut self, assignment: &str) -> Result<(), SettingsError> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| SettingsError::Syntax(assignment.to_string()))?;
        let (name, value) = (name.trim(), value.trim());
        let def =
            SETTINGS
                .iter()
                .find(|d| d.name == name)
                .ok_or_else(|| SettingsError::Unknown {
                    name: name.to_string(),
                    known: SETTINGS
                        .iter()
                        .map(|d| d.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
        let parsed: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| SettingsError::NotANumber {
                name: name.to_string(),
                value: value.to_string(),
            })?;
        self.values.insert(def.name, parsed);
        Ok(())
    }

    /// Settings with every assignment applied in order.
    ///
    /// # Errors
    /// The first assignment that fails.
    pub fn with_assignments<S: AsRef<str>>(assignments: &[S]) -> Result<Self, SettingsError> {
        let mut s = Settings::default();
        for a in assignments {
            s.set(a.as_ref())?;
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let s = Settings::with_assignments(&["cert_warn_days=14"]).unwrap();
        assert_eq!(s.get("cert_warn_days"), 14.0);
        assert_eq!(s.get("webhook_latency_ratio"), 0.8);
        assert!(matches!(
            Settings::with_assignments(&["nope=1"]),
            Err(SettingsError::Unknown { .. })
        ));
        assert!(matches!(
            Settings::with_assignments(&["cert_warn_days"]),
            Err(SettingsError::Syntax(_))
        ));
        assert!(matches!(
            Settings::with_assignments(&["cert_warn_days=soon"]),
            Err(SettingsError::NotANumber { .. })
        ));
    }
}
