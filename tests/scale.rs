//! Large clusters (issue 13 §1 and §4): the tool's own bundles load back at 10,000 APIServices in
//! both formats, a YAML file beyond a parsing limit is refused in one sentence, the analysis stops
//! at its deadline and says what it left unjudged, and a list longer than `--max-objects` stops
//! there with a gap that says so.

#[path = "../benches/support/scale_bundle.rs"]
mod scale_bundle;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use extpath::bundle::load_bundle_str;
use extpath::engine::{
    Class, Deadline, Filter, RuleSet, Settings, Severity, analyze, analyze_until,
};

use crate::util::extpath;
use crate::util::{Files, extpath_run, gaps, start_text};

#[test]
fn bundles_the_tool_writes_load_back_at_10k_apiservices() {
    let bundle = scale_bundle::bundle(10_000);
    let yaml = bundle.to_yaml().expect("the bundle writes as YAML");
    let back = load_bundle_str(&yaml, "big.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.api_services.len(), 10_000);
    assert!(back == bundle, "the YAML round trip changed the bundle");
    let json = bundle.to_json().expect("the bundle writes as JSON");
    let back = load_bundle_str(&json, "big.json").unwrap_or_else(|e| panic!("{e}"));
    assert!(back == bundle, "the JSON round trip changed the bundle");
}

#[test]
fn the_generated_large_bundle_is_broken_where_it_says_and_healthy_elsewhere() {
    // The benchmark's bundle is meant to be realistic: only the APIServices it breaks (one in
    // fifty) are Aggregation findings; a healthy APIService's series must not read as a failure.
    let n = 1_000;
    let bundle = scale_bundle::bundle(n);
    let d = analyze(
        &bundle,
        &RuleSet::bundled(),
        &Settings::default(),
        &Filter::default(),
    );
    let mut failing: Vec<String> = d
        .verdicts
        .iter()
        .filter(|v| v.subject.kind.as_str() == "APIService" && v.class != Class::Healthy)
        .map(|v| v.subject.name.clone())
        .collect();
    failing.sort();
    let mut broken: Vec<String> = (0..n)
        .filter(|&a| scale_bundle::broken(a))
        .map(|a| format!("v1.a{a}.example.com"))
        .collect();
    broken.sort();
    assert_eq!(failing, broken);
    let aggregation = d
        .verdicts
        .iter()
        .filter(|v| v.subject.kind.as_str() == "APIService" && v.class == Class::Aggregation)
        .count();
    assert_eq!(aggregation, n / 50);
}

fn one_line_refusal(name: &str, text: &str) -> String {
    let f = Files::new();
    let path = f.write(name, text);
    let out = extpath()
        .args(["analyze", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(path.to_str().unwrap()), "{stderr}");
    assert!(
        !stderr.contains('{') && !stderr.contains("breached"),
        "not Rust Debug output: {stderr}"
    );
    stderr
}

#[test]
fn a_yaml_file_beyond_a_parsing_limit_is_refused_in_one_sentence() {
    // Well-formed, and every alias sits where an APIService may: only the limit on aliases (or
    // their ratio to anchors) refuses it. Each alias would be a full copy of the anchored object.
    let mut bomb = String::from(
        "apiVersion: extpath.dev/v1alpha1\nkind: EvidenceBundle\napi_services:\n- &a {name: v1.x.example.com, group: x.example.com, version: v1}\n",
    );
    for _ in 0..60_000 {
        bomb.push_str("- *a\n");
    }
    let said = one_line_refusal("bomb.yaml", &bomb);
    assert!(
        said.contains("refused to parse") && said.contains("alias"),
        "{said}"
    );
    assert!(said.contains("bomb.yaml:"), "{said}");
}

#[test]
fn the_analysis_stops_at_its_deadline_and_says_what_it_left() {
    let bundle = scale_bundle::bundle(2_000);
    let rules = RuleSet::bundled();
    let settings = Settings::default();
    let filter = Filter::default();
    let full = analyze(&bundle, &rules, &settings, &filter);
    assert!(
        full.verdicts.iter().all(|v| v.subject.name != "analysis"),
        "no deadline, no cut"
    );

    // A deadline already passed: nothing is judged, and one verdict says so.
    let timeout = Duration::from_secs(7);
    let d = analyze_until(
        &bundle,
        &rules,
        &settings,
        &filter,
        Some(Deadline {
            at: Instant::now(),
            timeout,
        }),
    );
    let cut: Vec<_> = d
        .verdicts
        .iter()
        .filter(|v| v.subject.kind.as_str() == "Source" && v.subject.name == "analysis")
        .collect();
    assert_eq!(cut.len(), 1, "{:?}", d.verdicts);
    let v = cut[0];
    assert_eq!(
        (v.class, v.severity),
        (Class::Inconclusive, Severity::Critical)
    );
    assert!(
        v.summary.contains("--timeout 7s ran out after 0 of")
            && v.summary.contains("APIService ×2,000"),
        "{}",
        v.summary
    );
    assert!(
        d.verdicts
            .iter()
            .all(|v| v.subject.kind.as_str() == "Source"),
        "nothing judged after the deadline: {:?}",
        d.verdicts.len()
    );

    // A deadline far away changes nothing.
    let later = analyze_until(
        &bundle,
        &rules,
        &settings,
        &filter,
        Some(Deadline {
            at: Instant::now() + Duration::from_secs(3600),
            timeout,
        }),
    );
    assert_eq!(later.verdicts, full.verdicts);
}

fn apiservices(n: usize) -> String {
    let mut s = String::from(
        "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: capped\nserver:\n  availabilityPeriodMs: 600000\nobjects:\n",
    );
    for i in 0..n {
        let _ = writeln!(
            s,
            "  - {{apiVersion: apiregistration.k8s.io/v1, kind: APIService, metadata: {{name: v1.group{i}.example.com}}, spec: {{group: group{i}.example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15, insecureSkipTLSVerify: true, service: {{namespace: ext{i}, name: api, port: 443}}}}}}"
        );
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_longer_than_max_objects_stops_there_with_a_gap_that_says_so() {
    let server = start_text(&apiservices(25)).await;
    let f = Files::new();
    let ca = f.write("ca.crt", server.ca_pem());
    let connect = |more: &[&str]| {
        let mut a: Vec<String> = [
            "--server",
            &server.url(),
            "--certificate-authority",
            ca.to_str().unwrap(),
            "--token",
            server.admin_token(),
            "--window",
            "0",
            "--skip-list-probe",
            "--skip-delegation-probe",
        ]
        .map(str::to_string)
        .to_vec();
        a.extend(more.iter().map(|s| s.to_string()));
        a
    };
    let before = server.requests().len();
    let (r, _) = extpath_run(
        &f,
        "collect",
        connect(&["--max-objects", "10", "-o", "json"]),
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert_eq!(b["api_services"].as_array().map(Vec::len), Some(10));
    assert!(
        gaps(&b).contains(&("objects/apiservices".to_string(), "capped".to_string())),
        "{:?}",
        gaps(&b)
    );
    let detail = b["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["source"] == "objects/apiservices")
        .and_then(|g| g["detail"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        detail.starts_with("listed 10 APIServices and stopped: --max-objects 10"),
        "{detail}"
    );
    // The list asked for no more than it could keep, and stopped after the first page.
    let lists: Vec<String> = server
        .requests()
        .into_iter()
        .skip(before)
        .map(|r| r.path)
        .filter(|p| p.starts_with("/apis/apiregistration.k8s.io/v1/apiservices?"))
        .collect();
    assert_eq!(
        lists,
        vec!["/apis/apiregistration.k8s.io/v1/apiservices?limit=10"]
    );

    // Within the cap, nothing is cut.
    let (r, _) = extpath_run(&f, "collect", connect(&["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    // The 25 and the reference server's own local APIServices.
    assert!(
        b["api_services"].as_array().map_or(0, Vec::len) >= 25,
        "{}",
        b["api_services"]
    );
    assert!(
        gaps(&b).iter().all(|(_, reason)| reason != "capped"),
        "{:?}",
        gaps(&b)
    );

    // scan: the cut core source is an Inconclusive verdict that fails the gate.
    let (r, _) = extpath_run(&f, "scan", connect(&["--max-objects", "10", "-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let d: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let source = d["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["subject"]["kind"] == "Source" && v["subject"]["name"] == "objects/apiservices")
        .unwrap_or_else(|| panic!("no Source verdict: {}", r.stdout));
    assert_eq!(source["class"], "Inconclusive");
    assert!(
        source["summary"]
            .as_str()
            .unwrap()
            .contains("listed 10 APIServices and stopped: --max-objects 10"),
        "{source}"
    );
    server.shutdown().await;
}
