//! The renderers: snapshots of every format for realistic diagnoses (colour off, time pinned), and
//! the properties reviewers cannot see in a snapshot — JSON and YAML parse back into the same
//! Diagnosis, JUnit is well-formed XML with the right outcomes, the table stays within its width
//! and colours only when asked.

use extpath::engine::diagnosis::{Class, Diagnosis, Severity};
use extpath::report::{Format, RenderOptions, display_order, render};

use crate::util::report_cases as cases;

fn rendered(d: &Diagnosis, format: Format, opts: &RenderOptions) -> String {
    let mut out = Vec::new();
    render(d, format, opts, &mut out).expect("rendering into memory cannot fail");
    String::from_utf8(out).expect("renderers write UTF-8")
}

fn plain() -> RenderOptions {
    RenderOptions {
        color: false,
        width: Some(100),
        wide: false,
        show_healthy: false,
        ..RenderOptions::default()
    }
}

#[test]
fn snapshots_of_every_format() {
    for (name, d) in cases::all() {
        for (suffix, format) in [
            ("table", Format::Table),
            ("markdown", Format::Markdown),
            ("json", Format::Json),
            ("junit", Format::Junit),
        ] {
            insta::assert_snapshot!(format!("{name}.{suffix}"), rendered(&d, format, &plain()));
        }
    }
}

#[test]
fn snapshot_of_yaml_and_the_wide_table() {
    let d = cases::aggregation_wrong_ca_bundle();
    insta::assert_snapshot!("a.yaml", rendered(&d, Format::Yaml, &plain()));
    let wide = RenderOptions {
        width: Some(160),
        wide: true,
        ..plain()
    };
    insta::assert_snapshot!(
        "b.table-wide",
        rendered(
            &cases::admission_webhook_unreachable(),
            Format::Table,
            &wide
        )
    );
}

#[test]
fn json_output_parses_back_into_the_same_diagnosis() {
    for (name, d) in cases::all() {
        let text = rendered(&d, Format::Json, &plain());
        let back: Diagnosis = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, d, "{name}");
        // The contract's top-level shape, as consumers address it.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["apiVersion"], "extpath.dev/v1alpha2");
        assert_eq!(v["kind"], "Diagnosis");
        assert!(v["verdicts"][0]["subject"]["kind"].is_string(), "{name}");
    }
}

#[test]
fn yaml_output_parses_back_into_the_same_diagnosis() {
    for (name, d) in cases::all() {
        let text = rendered(&d, Format::Yaml, &plain());
        let back: Diagnosis =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(back, d, "{name}");
    }
}

#[test]
fn junit_is_well_formed_with_one_case_per_subject_and_the_right_outcomes() {
    for (name, d) in cases::all() {
        let xml = rendered(&d, Format::Junit, &plain());
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{name}: {e}\n{xml}"));
        assert_eq!(doc.root_element().tag_name().name(), "testsuites");
        let suite = doc
            .root_element()
            .children()
            .find(|n| n.has_tag_name("testsuite"))
            .unwrap_or_else(|| panic!("{name}: one testsuite"));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), d.verdicts.len(), "{name}");
        assert_eq!(
            suite.attribute("tests"),
            Some(d.verdicts.len().to_string().as_str())
        );

        for v in &d.verdicts {
            let case = cases
                .iter()
                .find(|c| {
                    c.attribute("classname") == Some(v.subject.kind.as_str())
                        && c.attribute("name")
                            == Some(extpath::report::junit::case_name(v).as_str())
                })
                .unwrap_or_else(|| panic!("{name}: no testcase for {}", v.subject));
            let failure = case.children().find(|n| n.has_tag_name("failure"));
            let skipped = case.children().find(|n| n.has_tag_name("skipped"));
            if let Some(w) = &v.waived {
                assert_eq!(
                    skipped.and_then(|s| s.attribute("message")),
                    Some(w.reason.as_str())
                );
                assert!(failure.is_none());
            } else if v.class != Class::Healthy && v.severity == Severity::Critical {
                let f = failure.unwrap_or_else(|| panic!("{name}: {} should fail", v.subject));
                assert_eq!(f.attribute("type"), Some(v.class.as_str()));
                // Attribute escaping round-trips the summary exactly.
                assert_eq!(f.attribute("message"), Some(v.summary.as_str()));
                let text = f.text().unwrap_or_default();
                for r in &v.rules {
                    assert!(
                        text.contains(&r.id),
                        "{name}: evidence of {} in the body",
                        r.id
                    );
                }
                for n in &v.next {
                    assert!(
                        text.contains(n.as_str()),
                        "{name}: next step {n:?} in the body"
                    );
                }
            } else {
                // Below the default --fail-on critical: a pass, the finding in its system-out.
                assert!(
                    failure.is_none() && skipped.is_none(),
                    "{name}: {} passes",
                    v.subject
                );
                if v.class != Class::Healthy {
                    let out = case
                        .children()
                        .find(|n| n.has_tag_name("system-out"))
                        .and_then(|n| n.text())
                        .unwrap_or_default();
                    assert!(out.contains(&v.summary), "{name}: finding of {}", v.subject);
                }
            }
        }
        let failures = cases
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
            .count();
        assert_eq!(
            suite.attribute("failures"),
            Some(failures.to_string().as_str())
        );
    }
}

#[test]
fn junit_survives_hostile_text_from_evidence() {
    let mut d = cases::admission_webhook_unreachable();
    let nasty = "a \"quoted\" <tag> & 'apos'\nsecond line\u{1b}[31m and a bell\u{7}";
    d.verdicts[2].summary = nasty.to_string();
    d.verdicts[2]
        .next
        .push("echo ']]>' </dev/null && true".to_string());
    let xml = rendered(&d, Format::Junit, &plain());
    let doc = roxmltree::Document::parse(&xml).expect("still well-formed");
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .expect("the webhook fails");
    // Markup characters and the line break survive exactly; control characters XML forbids
    // are replaced rather than breaking the document.
    assert_eq!(
        failure.attribute("message"),
        Some("a \"quoted\" <tag> & 'apos'\nsecond line\u{FFFD}[31m and a bell\u{FFFD}")
    );
    assert!(
        failure
            .text()
            .unwrap()
            .contains("echo ']]>' </dev/null && true")
    );
}

#[test]
fn table_is_worst_first_and_fits_the_width_except_commands_and_long_words() {
    for (name, d) in cases::all() {
        let text = rendered(&d, Format::Table, &plain());
        let arranged = extpath::report::arrange(&d);
        // The overview rows: each problem's root and what it explains, then the findings of no
        // problem; healthy subjects are one counting line unless there is only one.
        let mut order: Vec<&extpath::engine::Verdict> = Vec::new();
        for p in &arranged.problems {
            order.push(p.root);
            order.extend(p.members.iter().copied());
        }
        order.extend(arranged.others.iter().copied());
        if arranged.healthy.len() == 1 {
            order.extend(arranged.healthy.iter().copied());
        } else if !arranged.healthy.is_empty() {
            assert!(
                text.contains("subjects healthy:"),
                "{name}: healthy counted"
            );
        }
        let mut last = 0;
        for v in &order {
            let subject = format!("{}/{}", v.subject.kind, v.subject.name);
            let at = text
                .find(&subject)
                .unwrap_or_else(|| panic!("{name}: {subject} shown"));
            assert!(at >= last, "{name}: {subject} out of order");
            last = at;
        }
        let commands: Vec<&str> = d
            .verdicts
            .iter()
            .flat_map(|v| v.next.iter())
            .map(|s| s.as_str())
            .collect();
        for line in text.lines() {
            if line.chars().count() <= 100 {
                continue;
            }
            let is_command = commands
                .iter()
                .any(|c| line.trim_start() == *c || line.trim_start().ends_with(*c));
            let has_unbreakable_word = line.split(' ').any(|w| w.chars().count() > 40);
            assert!(
                is_command || has_unbreakable_word,
                "{name}: line over 100 columns:\n{line}"
            );
        }
        assert!(
            !text.contains('\u{1b}'),
            "{name}: no colour codes when colour is off"
        );
    }
}

#[test]
fn table_colours_only_when_asked() {
    let d = cases::aggregation_wrong_ca_bundle();
    let coloured = rendered(
        &d,
        Format::Table,
        &RenderOptions {
            color: true,
            ..plain()
        },
    );
    assert!(
        coloured.contains("\u{1b}[1;31mcritical"),
        "critical in bold red"
    );
    assert!(coloured.contains('\u{1b}'));
    let plain_text = rendered(&d, Format::Table, &plain());
    // Stripping the escape codes gives back the uncoloured words.
    assert!(plain_text.contains("[critical] Aggregation: APIService/v1alpha1.wardle.example.com"));
}

#[test]
fn markdown_has_a_section_per_finding_and_runnable_next_steps() {
    for (name, d) in cases::all() {
        let md = rendered(&d, Format::Markdown, &plain());
        let arranged = extpath::report::arrange(&d);
        let sections: Vec<&extpath::engine::Verdict> = arranged
            .problems
            .iter()
            .map(|p| p.root)
            .chain(arranged.others.iter().copied())
            .collect();
        for v in &sections {
            let heading = format!(
                "## {} · {} · `{}/{}",
                v.severity, v.class, v.subject.kind, v.subject.name
            );
            assert!(md.contains(&heading), "{name}: heading {heading:?}");
        }
        // Every command of every finding is runnable on its own line — those of the verdicts a
        // problem explains in its root's section.
        for v in d.verdicts.iter().filter(|v| v.class != Class::Healthy) {
            for cmd in &v.next {
                assert!(
                    md.contains(&format!("\n{cmd}\n")),
                    "{name}: {cmd:?} on its own line"
                );
            }
        }
        for p in &arranged.problems {
            for m in &p.members {
                assert!(
                    md.contains(&format!("- `{}/{}", m.subject.kind, m.subject.name)),
                    "{name}: {} listed under what explains it",
                    m.subject
                );
            }
        }
        for v in d.verdicts.iter().filter(|v| v.class == Class::Healthy) {
            assert!(
                !md.contains(&format!("## info · Healthy · `{}", v.subject)),
                "{name}: healthy has no section"
            );
        }
        assert_eq!(
            md.matches("```sh").count(),
            sections
                .iter()
                .filter(|v| {
                    !v.next.is_empty()
                        || arranged.problems.iter().any(|p| {
                            std::ptr::eq(p.root, **v)
                                && p.members.iter().any(|m| !m.next.is_empty())
                        })
                })
                .count()
        );
    }
}

#[test]
fn an_empty_diagnosis_renders_in_every_format() {
    let mut d = cases::healthy_with_expiring_cert();
    d.verdicts.clear();
    d.summary.headline.clear();
    for format in [
        Format::Table,
        Format::Markdown,
        Format::Json,
        Format::Yaml,
        Format::Junit,
    ] {
        let text = rendered(&d, format, &plain());
        assert!(!text.is_empty());
    }
    let table = rendered(&d, Format::Table, &plain());
    assert!(table.starts_with("No extension-path subjects were found in the evidence."));
    assert!(
        table.contains("metrics/etcd (not supplied)"),
        "gaps still shown"
    );
    let xml = rendered(&d, Format::Junit, &plain());
    roxmltree::Document::parse(&xml).expect("well-formed");
    assert!(xml.contains(r#"tests="0""#));
}

#[test]
fn display_order_puts_inconclusive_with_warnings_and_healthy_last() {
    let d = cases::inconclusive_and_waived();
    let order: Vec<Class> = display_order(&d).iter().map(|v| v.class).collect();
    // Inconclusive (gate: warning) before the waived Admission warning, Healthy last.
    assert_eq!(
        order,
        [Class::Inconclusive, Class::Admission, Class::Healthy]
    );
}
