//! Raw incident files for the `import --raw` tests: writing them into a folder, importing the
//! folder, and the webhook configuration several of them hold.

use std::path::Path;

use extpath::bundle::EvidenceBundle;

/// `content` as `dir/name`.
pub(crate) fn write(dir: &Path, name: &str, content: impl AsRef<[u8]>) {
    std::fs::write(dir.join(name), content).unwrap();
}

/// The bundle `import --raw` makes of `dir`, judged as of a fixed late date (2030) so that the
/// files' own timestamps, not the wall clock, set the collection time.
pub(crate) fn import_dir(dir: &Path) -> EvidenceBundle {
    extpath::bundle::raw::import_paths_at(
        &[dir.to_path_buf()],
        "2030-01-01T00:00:00Z".parse().unwrap(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A ValidatingWebhookConfiguration `hooks` with one webhook, `check.hooks.example.com`, calling
/// Service `hooks/hook` and trusting `ca_pem`, as `kubectl get -o json` prints it.
pub(crate) fn webhook_config(ca_pem: &str) -> String {
    use k8s_openapi::api::admissionregistration::v1 as adm;
    let cfg = adm::ValidatingWebhookConfiguration {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("hooks".into()),
            ..Default::default()
        },
        webhooks: Some(vec![adm::ValidatingWebhook {
            name: "check.hooks.example.com".into(),
            client_config: adm::WebhookClientConfig {
                ca_bundle: Some(k8s_openapi::ByteString(ca_pem.as_bytes().to_vec())),
                service: Some(adm::ServiceReference {
                    namespace: "hooks".into(),
                    name: "hook".into(),
                    ..Default::default()
                }),
                url: None,
            },
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            ..Default::default()
        }]),
    };
    serde_json::to_string(&cfg).unwrap()
}
