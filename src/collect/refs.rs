//! What stage one's objects point at: the backends whose Services, endpoints, pods and certificates
//! stage two and three fetch.

use std::collections::BTreeSet;

use crate::bundle::{EvidenceBundle, Kind, ObjectRef, ServiceRef};

/// One backend: an object (APIService, webhook, conversion webhook) and the Service it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendRef {
    /// The calling object.
    pub owner: ObjectRef,
    /// The Service it names.
    pub service: ServiceRef,
}

/// Everything referenced.
#[derive(Debug, Clone, Default)]
pub struct References {
    /// Backends behind Services.
    pub backends: Vec<BackendRef>,
    /// Distinct `(namespace, name)` of the referenced Services.
    pub services: BTreeSet<(String, String)>,
    /// Namespaces of those Services.
    pub namespaces: BTreeSet<String>,
}

impl References {
    /// The references of a bundle's APIServices, webhooks and CRD conversion webhooks.
    pub fn of(bundle: &EvidenceBundle) -> Self {
        let mut r = References::default();
        // A Local APIService (no `spec.service`) is served inside kube-apiserver: no Service,
        // endpoints or certificate of its own to fetch.
        for a in &bundle.api_services {
            if let Some(s) = &a.service {
                r.add(ObjectRef::cluster(Kind::ApiService, &a.name), s);
            }
        }
        for w in &bundle.webhooks {
            if let Some(s) = &w.target.service {
                r.add(ObjectRef::cluster(w.kind.object_kind(), &w.name), s);
            }
        }
        for c in &bundle.crds {
            if let Some(s) = c
                .conversion
                .webhook
                .as_ref()
                .and_then(|w| w.service.as_ref())
            {
                r.add(
                    ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name),
                    s,
                );
            }
        }
        r
    }

    fn add(&mut self, owner: ObjectRef, service: &ServiceRef) {
        self.services
            .insert((service.namespace.clone(), service.name.clone()));
        self.namespaces.insert(service.namespace.clone());
        self.backends.push(BackendRef {
            owner,
            service: service.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{ApiService, CollectionSource};

    #[test]
    fn local_apiservices_reference_nothing() {
        let mut b = EvidenceBundle::new(CollectionSource::Unknown);
        b.api_services.push(ApiService {
            name: "v1.apps".into(),
            ..ApiService::default()
        });
        b.api_services.push(ApiService {
            name: "v1beta1.metrics.k8s.io".into(),
            service: Some(ServiceRef {
                namespace: "kube-system".into(),
                name: "metrics-server".into(),
                port: Some(443),
                path: None,
            }),
            ..ApiService::default()
        });
        let r = References::of(&b);
        assert_eq!(r.backends.len(), 1);
        assert!(r.namespaces.contains("kube-system"));
    }
}
