//! What `analyze` is asked to look at: `--rule`/`--skip-rule` choose which rules run, `--class` and
//! `--subject` choose which verdicts are reported.
//!
//! Rule filters act before evaluation (a skipped rule cannot decide or rule anything out); verdict
//! filters act after classification, so that the verdict of a subject is the same whether or not other
//! subjects are shown.

use super::diagnosis::{Class, Subject, SubjectKind};

/// Filters of one `analyze` run. The default filters nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Keep only verdicts of these classes (empty: all).
    pub classes: Vec<Class>,
    /// Keep only these subjects (empty: all).
    pub subjects: Vec<SubjectPattern>,
    /// Run only these rule ids (empty: all).
    pub rules: Vec<String>,
    /// Never run these rule ids.
    pub skip_rules: Vec<String>,
}

/// `KIND` or `KIND/NAME` (`NAME` may end with `*` to match a prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectPattern {
    /// Subject kind.
    pub kind: SubjectKind,
    /// Name, or name prefix ending in `*`; `None` matches every name.
    pub name: Option<String>,
}

/// A subject pattern that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--subject {0:?}: expected KIND or KIND/NAME with KIND one of {1}")]
pub struct SubjectPatternError(pub String, pub String);

impl std::str::FromStr for SubjectPattern {
    type Err = SubjectPatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, name) = match s.split_once('/') {
            Some((k, n)) => (k, Some(n.to_string())),
            None => (s, None),
        };
        let kind = SubjectKind::parse(kind).ok_or_else(|| {
            SubjectPatternError(
                s.to_string(),
                SubjectKind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })?;
        // `apiservices/` means every APIService, not a subject with an empty name, which none has.
        Ok(SubjectPattern {
            kind,
            name: name.filter(|n| !n.is_empty()),
        })
    }
}

impl SubjectPattern {
    /// Whether the subject matches.
    pub fn matches(&self, subject: &Subject) -> bool {
        if subject.kind != self.kind {
            return false;
        }
        match &self.name {
            None => true,
            // Only a trailing `*`: names that belong together share a prefix (the `v1beta1.`
            // APIServices, one vendor's `vault.` webhooks), and a prefix cannot surprise anyone.
            Some(n) => match n.strip_suffix('*') {
                Some(prefix) => subject.name.starts_with(prefix),
                None => subject.name == *n,
            },
        }
    }
}

impl Filter {
    /// Whether the rule with this id runs. `--skip-rule` wins over `--rule`, so a CI line that
    /// pins a set of rules can still drop one that is noisy in that cluster.
    pub fn runs_rule(&self, id: &str) -> bool {
        (self.rules.is_empty() || self.rules.iter().any(|r| r == id))
            && !self.skip_rules.iter().any(|r| r == id)
    }

    /// Whether a verdict on `subject` of `class` is reported.
    pub fn keeps(&self, subject: &Subject, class: Class) -> bool {
        (self.classes.is_empty() || self.classes.contains(&class))
            && (self.subjects.is_empty() || self.subjects.iter().any(|p| p.matches(subject)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_patterns_match_kind_name_and_prefix() {
        let p: SubjectPattern = "apiservice/v1beta1.*".parse().unwrap();
        assert!(p.matches(&Subject::new(
            SubjectKind::ApiService,
            "v1beta1.metrics.k8s.io"
        )));
        assert!(!p.matches(&Subject::new(SubjectKind::ApiService, "v1.apps")));
        let k: SubjectPattern = "Etcd".parse().unwrap();
        assert!(k.matches(&Subject::new(SubjectKind::Etcd, "etcd")));
        assert!("Pod/x".parse::<SubjectPattern>().is_err());
    }

    #[test]
    fn kinds_are_typed_as_on_a_kubectl_command_line() {
        let kind = |s: &str| s.parse::<SubjectPattern>().map(|p| p.kind).ok();
        for typed in [
            "APIService/x",
            "apiservice/x",
            "apiservices/x",
            "APISERVICES",
        ] {
            assert_eq!(kind(typed), Some(SubjectKind::ApiService), "{typed}");
        }
        for typed in ["crd/x", "crds", "customresourcedefinitions/x"] {
            assert_eq!(
                kind(typed),
                Some(SubjectKind::CustomResourceDefinition),
                "{typed}"
            );
        }
        assert_eq!(
            kind("prioritylevelconfigurations/workload-low"),
            Some(SubjectKind::PriorityLevel)
        );
        assert_eq!(
            kind("mutatingwebhooks/vault.*"),
            Some(SubjectKind::MutatingWebhook)
        );
        assert_eq!(kind("flowschemas"), Some(SubjectKind::FlowSchema));
        assert_eq!(kind("pods/x"), None);
        let p: SubjectPattern = "apiservices/v1beta1.*".parse().unwrap();
        assert!(p.matches(&Subject::new(
            SubjectKind::ApiService,
            "v1beta1.metrics.k8s.io"
        )));
    }

    #[test]
    fn rule_filters() {
        let f = Filter {
            skip_rules: vec!["a".into()],
            ..Filter::default()
        };
        assert!(!f.runs_rule("a"));
        assert!(f.runs_rule("b"));
        let only = Filter {
            rules: vec!["b".into()],
            ..Filter::default()
        };
        assert!(only.runs_rule("b") && !only.runs_rule("c"));
    }
}
