//! Certificate times the way RFC 5280 writes them, through the real code paths: decoding, chain
//! verification, raw import into a bundle, the `tls` facts and the rules that read them.

use extpath::bundle::{Kind, ObjectRef};
use extpath::engine::facts::FactBase;
use extpath::engine::facts::value::to_json;
use extpath::engine::{Filter, RuleSet, Settings};
use extpath::pki::generate::{LeafSpec, TestCa, Validity};

use crate::util::raw_files::{import_dir, webhook_config, write};

// RFC 5280 §4.1.2.5: a certificate with no well-defined expiration date carries the notAfter
// GeneralizedTime 99991231235959Z. That instant is past jiff's maximum (9999-12-30T22:00Z); it
// used to be decoded as the epoch, so a long-lived CA was reported as expired since 1970. It must
// read as the latest instant there is, in every place that judges a certificate's period.
#[test]
fn a_certificate_with_no_well_defined_expiry_never_expires() {
    let collected: jiff::Timestamp = "2026-11-29T08:42:19Z".parse().unwrap();
    let not_before = collected - jiff::SignedDuration::from_hours(24 * 400);
    let ca = TestCa::new("forever-ca", Validity::without_expiry(not_before)).unwrap();
    let leaf = ca
        .issue(&LeafSpec::server(
            &["hook.hooks.svc"],
            Validity::without_expiry(not_before),
        ))
        .unwrap();
    // The DER really holds the RFC's value (GeneralizedTime, tag 0x18, 15 bytes), so the decoding
    // below reads what a real such certificate holds.
    for der in [&ca.cert_der, &leaf.cert_der] {
        let mut tlv = vec![0x18, 15];
        tlv.extend_from_slice(b"99991231235959Z");
        assert!(
            der.windows(tlv.len()).any(|w| w == tlv),
            "no 99991231235959Z"
        );
    }

    // Decoding.
    let info = extpath::pki::decode_der(&leaf.cert_der, 0).unwrap();
    assert_eq!(info.not_after, jiff::Timestamp::MAX);
    assert_eq!(info.not_before, not_before);
    let decoded = extpath::pki::decode_pem(ca.cert_pem.as_bytes()).unwrap();
    assert_eq!(decoded[0].0.not_after, jiff::Timestamp::MAX);

    // Chain verification at the collection time, and at the last instant jiff can hold.
    for at in [collected, jiff::Timestamp::MAX] {
        assert_eq!(
            extpath::pki::verify_server_chain(
                std::slice::from_ref(&leaf.cert_der),
                std::slice::from_ref(&ca.cert_der),
                "hook.hooks.svc",
                at,
            ),
            Ok(()),
            "at {at}"
        );
    }

    // Raw import: the caBundle and the served leaf are kept with their period, and the chain
    // verification recorded in the bundle succeeded.
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "cfg", webhook_config(&ca.cert_pem));
    write(tmp.path(), "leaf", &leaf.cert_pem);
    write(
        tmp.path(),
        "hdr",
        "HTTP/1.1 200 OK\r\ndate: Sun, 29 Nov 2026 08:42:19 GMT\r\n\r\n",
    );
    let bundle = import_dir(tmp.path());
    let owner = ObjectRef::cluster(Kind::ValidatingWebhook, "check.hooks.example.com");
    let certs: Vec<_> = bundle
        .certificates
        .iter()
        .filter(|c| c.origin.owner.as_ref() == Some(&owner))
        .collect();
    assert_eq!(certs.len(), 2, "{:#?}", bundle.certificates);
    for c in &certs {
        assert_eq!(c.not_after, jiff::Timestamp::MAX, "{}", c.subject);
        assert!(c.valid_at(collected), "{}", c.subject);
    }
    let leaf_cert = certs
        .iter()
        .find(|c| c.subject == "CN=hook.hooks.svc")
        .unwrap();
    let v = leaf_cert.verification.as_ref().unwrap();
    assert_eq!(v.at, collected);
    assert!(v.ok, "{v:?}");

    // The `tls` facts the rules read: neither expired nor about to.
    let base = FactBase::new(&bundle);
    let tls = to_json(
        &extpath::engine::facts::tls::tls_fact(&base, Some(&owner), "hook.hooks.svc", true, false)
            .to_value(),
    );
    let facts = tls["certs"].as_array().unwrap();
    assert_eq!(facts.len(), 2, "{tls:#}");
    for c in facts {
        assert_eq!(c["expired"], false, "{c:#}");
        assert_eq!(c["not_yet_valid"], false, "{c:#}");
        assert!(c["days_left"].as_f64().unwrap() > 2_900_000.0, "{c:#}");
    }

    // `analyze`: a verdict on the webhook, and no expiry rule anywhere.
    let rules = RuleSet::bundled_checked().unwrap();
    let d = extpath::engine::analyze(&bundle, &rules, &Settings::default(), &Filter::default());
    assert!(
        d.verdicts
            .iter()
            .any(|v| v.subject.name == "check.hooks.example.com"),
        "{:#?}",
        d.verdicts
    );
    let fired: Vec<&str> = d
        .verdicts
        .iter()
        .flat_map(|v| {
            v.rules
                .iter()
                .map(|r| r.id.as_str())
                .chain(v.consequences.iter().map(|c| c.rule.as_str()))
                .chain(v.history.iter().map(|c| c.rule.as_str()))
        })
        .collect();
    assert!(
        !fired
            .iter()
            .any(|id| id.contains("expired") || id.contains("expiring")),
        "{fired:?}"
    );
}
