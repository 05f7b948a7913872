//! Kubernetes string values the bundle records, as enums: object kinds ([`Kind`]) and the admission
//! webhook policies ([`FailurePolicy`], [`MatchPolicy`], [`SideEffects`]), with the API server's
//! defaults per admissionregistration version in one place ([`WebhookDefaults`]).
//!
//! Each is written as the exact Kubernetes string, so the bundle format does not change. Each keeps
//! an `Other` variant: a bundle loads any string there today (a hand-written one, an event's
//! `involvedObject` of any kind), and must go on loading and round-tripping it unchanged; code
//! that judges a value matches the known variants and treats `Other` as not one of them.

use std::borrow::Cow;

/// An enum over a closed set of Kubernetes strings plus `Other(String)`, serialised as the string,
/// ordered as the string (so sorted output is what it was when these fields were strings).
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this version does not know, kept as written.
            Other(String),
        }

        impl $name {
            /// The known values.
            pub const KNOWN: &'static [$name] = &[$($name::$variant,)+];

            /// The string as Kubernetes writes it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Other(s) => s,
                }
            }

            /// The value a string names (exact spelling; anything else is `Other`).
            pub fn parse(s: &str) -> Self {
                match s {
                    $($text => $name::$variant,)+
                    _ => $name::Other(s.to_string()),
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name::parse(s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $name {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.as_str().cmp(other.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s: Cow<'de, str> = serde::Deserialize::deserialize(d)?;
                Ok($name::parse(&s))
            }
        }

        // A plain string in the schema, inlined like `String`, so docs/bundle.schema.json is what it
        // was when these fields were strings.
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                <String as schemars::JsonSchema>::schema_name()
            }
            fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <String as schemars::JsonSchema>::json_schema(g)
            }
        }
    };
}

string_enum! {
    /// The kind of the object an [`super::ObjectRef`] names. Webhooks are named one by one (a
    /// `webhooks[]` entry, not its configuration), so their kinds are the engine's subject kinds;
    /// the rest are the Kubernetes kinds evidence points at. Not every kind is judged: the engine
    /// maps the ones it judges onto its own `SubjectKind`, and an event's `involvedObject` may be
    /// of any kind (`Other`).
    pub enum Kind {
        /// An APIService.
        ApiService = "APIService",
        /// One validating webhook, by its `webhooks[].name`.
        ValidatingWebhook = "ValidatingWebhook",
        /// One mutating webhook, by its `webhooks[].name`.
        MutatingWebhook = "MutatingWebhook",
        /// A webhook named by evidence (a log line, an error text) that the bundle's configurations
        /// do not hold, so whether it validates or mutates is not known.
        Webhook = "Webhook",
        /// A CustomResourceDefinition.
        CustomResourceDefinition = "CustomResourceDefinition",
        /// An APF FlowSchema.
        FlowSchema = "FlowSchema",
        /// A Service.
        Service = "Service",
        /// A Pod (an endpoint's target).
        Pod = "Pod",
        /// A ConfigMap (one holding a CA bundle).
        ConfigMap = "ConfigMap",
        /// A Deployment.
        Deployment = "Deployment",
    }
}

string_enum! {
    /// A webhook's `failurePolicy`: what the API server does when calling it fails.
    pub enum FailurePolicy {
        /// The request fails.
        Fail = "Fail",
        /// The error is ignored and the request goes on.
        Ignore = "Ignore",
    }
}

string_enum! {
    /// A webhook's `matchPolicy`: whether a request through an equivalent group/version matches.
    pub enum MatchPolicy {
        /// Only the group/versions its rules name.
        Exact = "Exact",
        /// Also a request to an equivalent resource through another group/version.
        Equivalent = "Equivalent",
    }
}

string_enum! {
    /// A webhook's `sideEffects` (`Some` and `Unknown` only from v1beta1).
    pub enum SideEffects {
        /// No side effects.
        None = "None",
        /// No side effects on a dry-run request.
        NoneOnDryRun = "NoneOnDryRun",
        /// Side effects (v1beta1 only).
        Some = "Some",
        /// Not declared (v1beta1 only; its default).
        Unknown = "Unknown",
    }
}

impl Default for FailurePolicy {
    fn default() -> Self {
        WebhookDefaults::V1.failure_policy
    }
}

impl Default for MatchPolicy {
    fn default() -> Self {
        WebhookDefaults::V1.match_policy
    }
}

/// What the API server fills in for an admission webhook field left out, per admissionregistration
/// version (the k8s.io/api field documentation: v1 `failurePolicy` "Defaults to Fail",
/// `matchPolicy` "Defaults to Equivalent", `timeoutSeconds` "Default to 10 seconds"; v1beta1
/// Ignore, Exact, 30 seconds, `sideEffects` Unknown, `admissionReviewVersions` `['v1beta1']`).
pub struct WebhookDefaults {
    /// `failurePolicy`.
    pub failure_policy: FailurePolicy,
    /// `matchPolicy`.
    pub match_policy: MatchPolicy,
    /// `timeoutSeconds`.
    pub timeout_seconds: i32,
    /// `sideEffects`; `None` where the version requires it.
    pub side_effects: Option<SideEffects>,
    /// `admissionReviewVersions`; empty where the version requires it.
    pub admission_review_versions: &'static [&'static str],
}

impl WebhookDefaults {
    /// admissionregistration.k8s.io/v1.
    pub const V1: WebhookDefaults = WebhookDefaults {
        failure_policy: FailurePolicy::Fail,
        match_policy: MatchPolicy::Equivalent,
        timeout_seconds: 10,
        side_effects: None,
        admission_review_versions: &[],
    };
    /// admissionregistration.k8s.io/v1beta1 (removed in Kubernetes 1.22; raw files still carry it).
    pub const V1BETA1: WebhookDefaults = WebhookDefaults {
        failure_policy: FailurePolicy::Ignore,
        match_policy: MatchPolicy::Exact,
        timeout_seconds: 30,
        side_effects: Some(SideEffects::Unknown),
        admission_review_versions: &["v1beta1"],
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_as_their_strings_and_unknown_ones_are_kept() {
        for p in FailurePolicy::KNOWN {
            assert_eq!(FailurePolicy::parse(p.as_str()), *p);
        }
        let other = MatchPolicy::parse("Sometimes");
        assert_eq!(other, MatchPolicy::Other("Sometimes".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"Sometimes\"");
        let back: SideEffects = serde_json::from_str("\"NoneOnDryRun\"").unwrap();
        assert_eq!(back, SideEffects::NoneOnDryRun);
        // Not a spelling Kubernetes accepts: kept, not guessed.
        assert_eq!(
            FailurePolicy::parse("fail"),
            FailurePolicy::Other("fail".into())
        );
    }

    #[test]
    fn kinds_load_as_written_whatever_they_are() {
        let r: crate::bundle::ObjectRef =
            serde_json::from_str(r#"{"kind":"APIService","name":"v1.a"}"#).unwrap();
        assert_eq!(r.kind, Kind::ApiService);
        // An event's involvedObject may be of any kind: kept, and written back unchanged.
        let r: crate::bundle::ObjectRef =
            serde_json::from_str(r#"{"kind":"StatefulSet","name":"db","namespace":"x"}"#).unwrap();
        assert_eq!(r.kind, Kind::Other("StatefulSet".into()));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"kind":"StatefulSet","name":"db","namespace":"x"}"#
        );
        assert_eq!(r.to_string(), "StatefulSet/x/db");
    }

    #[test]
    fn order_is_the_order_of_the_strings() {
        let mut v = [
            SideEffects::Unknown,
            SideEffects::Other("Maybe".into()),
            SideEffects::None,
        ];
        v.sort();
        let s: Vec<&str> = v.iter().map(SideEffects::as_str).collect();
        assert_eq!(s, ["Maybe", "None", "Unknown"]);
    }
}
