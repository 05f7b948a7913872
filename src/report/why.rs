//! What `why` prints: the focused human view, or the `WhyReport` document (`-o json|yaml`).
//!
//! The human view, top to bottom: the request line and the response (status, latency, the Status
//! reason and message with its causes or the plain body, the headers that matter, a watch's stream);
//! what serves the path; the steps rung by rung with ✓ passed, ✗ broke, · not reached, ? unknown
//! and ! a problem no rule explains (an aggregated path has the extension server's own authn and
//! authz after kube-apiserver's; its texts say whose); then the verdict with its evidence — and,
//! when it broke in the extension API server, that it did — what it ruled out, the other findings
//! along the path, what to run next, and the gaps.
//!
//! Like the report renderers, this writes into a `&mut dyn Write` and reads neither the clock nor
//! the environment, so its output depends only on what it is given (which is what the snapshots
//! test). Prose is wrapped to the width; commands never are.
//!
//! What this module does not own: which rung broke, or which verdict is the request's (the engine
//! says both: `engine::why::explain`), nor how the trace was observed (`collect::why`).

use std::io::Write;

use serde::Serialize;

use crate::bundle::Probe;
use crate::bundle::trace::{Decision, Investigation, Method, Serving, Trace};
use crate::engine::diagnosis::{Class, Component, Diagnosis, Severity, Verdict};
use crate::engine::why::{Explained, Finding, Step, StepState, status_line};
use crate::report::evidence_text;
use crate::report::wrap::write_wrapped;

/// Output of `why`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WhyFormat {
    /// The request, its path rung by rung, the verdict.
    Human,
    /// The WhyReport document: the request record, the path, the verdict and the Diagnosis.
    Json,
    /// The same document as YAML.
    Yaml,
}

/// `apiVersion` of the `why` document.
pub const API_VERSION: &str = "extpath.dev/v1alpha1";
/// `kind` of the `why` document.
pub const KIND: &str = "WhyReport";

/// `-o json|yaml`: the request record, how its path was resolved, the steps, the request's
/// verdict, and the whole Diagnosis of the path.
#[derive(Debug, Serialize)]
pub struct WhyReport<'a> {
    /// `extpath.dev/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// `WhyReport`.
    pub kind: &'static str,
    /// The request as sent and answered.
    pub request: &'a Probe,
    /// What serves the path and what along it matches the request.
    pub trace: &'a Trace,
    /// The steps, rung by rung.
    pub path: &'a [Step],
    /// Findings of this path with no step of their rung.
    pub other_findings: &'a [Finding],
    /// The request's verdict (absent when the request succeeded).
    pub verdict: Option<&'a Verdict>,
    /// Every verdict of the path.
    pub diagnosis: &'a Diagnosis,
}

impl<'a> WhyReport<'a> {
    /// The document of an investigated request, its explained path and its diagnosis.
    pub fn new(inv: &'a Investigation, explained: &'a Explained<'a>, d: &'a Diagnosis) -> Self {
        WhyReport {
            api_version: API_VERSION,
            kind: KIND,
            request: inv.probe(),
            trace: &inv.trace,
            path: &explained.path,
            other_findings: &explained.other,
            verdict: explained.verdict,
            diagnosis: d,
        }
    }
}

/// Write `why`'s output in `format`: the human view (drawn with `opts`), or the `WhyReport`
/// document as pretty JSON (with a final newline) or YAML.
///
/// # Errors
/// The writer's I/O errors.
pub fn write(
    out: &mut dyn Write,
    format: WhyFormat,
    inv: &Investigation,
    explained: &Explained<'_>,
    d: &Diagnosis,
    opts: ViewOptions,
) -> std::io::Result<()> {
    let doc = || WhyReport::new(inv, explained, d);
    match format {
        WhyFormat::Human => render(out, inv, explained, d, opts),
        WhyFormat::Json => {
            let text = serde_json::to_string_pretty(&doc()).map_err(std::io::Error::other)? + "\n";
            out.write_all(text.as_bytes())
        }
        WhyFormat::Yaml => {
            let text = serde_saphyr::to_string(&doc()).map_err(std::io::Error::other)?;
            out.write_all(text.as_bytes())
        }
    }
}

/// How to draw.
#[derive(Debug, Clone, Copy)]
pub struct ViewOptions {
    /// ANSI colour.
    pub color: bool,
    /// Line width.
    pub width: usize,
}

struct Paint(bool);

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\u{1b}[{code}m{s}\u{1b}[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
    fn mark(&self, state: StepState) -> String {
        match state {
            StepState::Passed => self.wrap("32", "✓"),
            StepState::Failed => self.wrap("1;31", "✗"),
            StepState::Attention => self.wrap("33", "!"),
            StepState::NotReached => self.dim("·"),
            StepState::Unknown => self.wrap("33", "?"),
        }
    }
}

const LABEL: usize = 10;

/// Text on one line: error texts and evidence values carry newlines (a plain body ends with one).
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn label(
    out: &mut dyn Write,
    p: &Paint,
    name: &str,
    text: &str,
    width: usize,
) -> std::io::Result<()> {
    let first = format!(
        "{}{}",
        p.bold(name),
        " ".repeat(LABEL.saturating_sub(name.len()))
    );
    write_wrapped(out, text, &first, &" ".repeat(LABEL), width)
}

fn serving_text(t: &Trace) -> String {
    match t.serving {
        Serving::Aggregated => format!(
            "aggregated: kube-apiserver proxies it to the extension server behind APIService {}",
            t.api_service.as_deref().unwrap_or("?")
        ),
        Serving::CustomResource => format!(
            "custom resource: served in kube-apiserver from CRD {}, stored in its etcd",
            t.crd.as_ref().map(|c| c.name.as_str()).unwrap_or("?")
        ),
        Serving::BuiltIn => "built-in: served by kube-apiserver itself".into(),
        Serving::NonResource => "a non-resource URL of kube-apiserver".into(),
        Serving::Unregistered => "no APIService serves this group/version".into(),
        Serving::Unknown => "unknown: the APIServices could not be read".into(),
    }
}

fn request_line(p: &Probe, t: &Trace) -> String {
    let method = match t.method {
        Method::Watch => "WATCH".to_string(),
        m if m.is_write() => format!("{} (server-side dry run)", m.http()),
        m => m.http().to_string(),
    };
    let mut line = format!("{method} {}", p.path.as_deref().unwrap_or(""));
    if let Some(u) = &t.user {
        line.push_str(&format!(" as {}", u.name));
    }
    line
}

fn write_response(
    out: &mut dyn Write,
    p: &Probe,
    paint: &Paint,
    width: usize,
) -> std::io::Result<()> {
    let head = match (p.status, p.latency_ms) {
        (Some(s), Some(ms)) => format!(
            "{} in {}",
            status_line(s),
            crate::engine::functions::human_seconds(ms / 1000.0)
        ),
        (Some(s), None) => status_line(s),
        (None, _) => format!("no response: {}", p.error.as_deref().unwrap_or("")),
    };
    label(out, paint, "Response", &head, width)?;
    let indent = " ".repeat(LABEL);
    let more = format!("{indent}  ");
    if let Some(s) = &p.status_body {
        // kubectl's own words (`StandardErrorMessage` in kubectl's `pkg/cmd/util/helpers.go`:
        // the reason in parentheses only when the Status has one), so the line matches what the
        // user saw and can be searched for in their terminal history or a ticket.
        let text = if s.reason.is_empty() {
            format!("Error from server: {}", one_line(&s.message))
        } else {
            format!("Error from server ({}): {}", s.reason, one_line(&s.message))
        };
        write_wrapped(out, &text, &indent, &more, width)?;
        for c in &s.causes {
            let text = if c.reason.is_empty() {
                format!("cause: {}", one_line(&c.message))
            } else {
                format!("cause {}: {}", c.reason, one_line(&c.message))
            };
            write_wrapped(out, &text, &more, &format!("{more}  "), width)?;
        }
    }
    // A non-Status body is the clue REFERENCE §2.3 classifies on: the aggregator's own 503 says
    // `service unavailable`, a proxied failure `error trying to reach service: …`. A few lines are
    // enough for both; an extension server's HTML error page would drown the view.
    if let Some(b) = &p.body {
        for line in b.lines().filter(|l| !l.trim().is_empty()).take(3) {
            write_wrapped(out, &format!("body: {line}"), &indent, &more, width)?;
        }
    }
    if p.status.is_some()
        && let Some(e) = &p.error
    {
        write_wrapped(
            out,
            &format!("error: {}", one_line(e)),
            &indent,
            &more,
            width,
        )?;
    }
    if let Some(w) = &p.watch {
        let mut text = format!("stream: {} events ({} bookmarks)", w.events, w.bookmarks);
        if let Some(d) = &w.end_detail {
            text.push_str(&format!("; {}", one_line(d)));
        }
        write_wrapped(out, &text, &indent, &more, width)?;
    }
    // Only the headers that change the diagnosis: Retry-After with the two PF UIDs marks an APF
    // rejection rather than max-in-flight or a shutdown (REFERENCE §2.3, `flowcontrol/v1`
    // types.go), and Audit-Id finds the request in the cluster's audit log.
    let h = &p.headers;
    let mut headers = Vec::new();
    if let Some(r) = &h.retry_after {
        headers.push(format!("Retry-After: {r}"));
    }
    if let Some(v) = &h.flow_schema_uid {
        headers.push(format!("X-Kubernetes-PF-FlowSchema-UID: {v}"));
    }
    if let Some(v) = &h.priority_level_uid {
        headers.push(format!("X-Kubernetes-PF-PriorityLevel-UID: {v}"));
    }
    if let Some(v) = &h.audit_id {
        headers.push(format!("Audit-Id: {v}"));
    }
    for hline in headers {
        writeln!(out, "{indent}{hline}")?;
    }
    Ok(())
}

fn write_steps(
    out: &mut dyn Write,
    steps: &[Step],
    paint: &Paint,
    width: usize,
) -> std::io::Result<()> {
    let rung_width = steps
        .iter()
        .map(|s| s.rung.as_str().len())
        .max()
        .unwrap_or(0)
        + 2;
    for s in steps {
        let mut text = s.evidence.clone();
        if s.state == StepState::NotReached {
            text = if text.is_empty() {
                "not reached".into()
            } else {
                format!("not reached ({text})")
            };
        } else if text.is_empty() {
            // A ✗ is the rules' word, shown below it; only a step nobody judged has "no evidence".
            text = if s.state == StepState::Failed {
                "the rules below fired here".into()
            } else {
                "no evidence".into()
            };
        }
        let prefix = format!(
            "  {} {}{}",
            paint.mark(s.state),
            s.rung.as_str(),
            " ".repeat(rung_width - s.rung.as_str().len())
        );
        let rest = " ".repeat(4 + rung_width);
        let text = if s.state == StepState::NotReached {
            paint.dim(&text)
        } else {
            text
        };
        write_wrapped(out, &text, &prefix, &rest, width)?;
        for n in &s.notes {
            write_wrapped(out, n, &format!("{rest}  "), &format!("{rest}    "), width)?;
        }
        for f in &s.findings {
            let what = format!("{} ({})", one_line(&f.summary), f.rule);
            write_wrapped(
                out,
                &what,
                &format!("{rest}{} ", paint.mark(StepState::Failed)),
                &format!("{rest}  "),
                width,
            )?;
        }
    }
    Ok(())
}

fn write_verdict(
    out: &mut dyn Write,
    v: &Verdict,
    answered: bool,
    paint: &Paint,
    width: usize,
) -> std::io::Result<()> {
    let mut head = format!("{}, {}", v.class, v.severity);
    if let Some(r) = v.rung
        && !matches!(v.class, Class::Healthy | Class::Inconclusive)
        && v.severity > Severity::Info
    {
        // A request that got its answer, late, did not break: its verdict is where the time went.
        let at = if answered { "slow at" } else { "broke at" };
        head.push_str(&format!(", {at} {r}"));
        // An aggregated path runs authn and authz twice, in kube-apiserver and again in the
        // extension server (delegated). A 403 from the second is still Auth, but the fix is the
        // extension server's RBAC, not the user's (DESIGN §1 rule 4), so the view says whose.
        if v.rules
            .first()
            .is_some_and(|h| h.component == Component::ExtensionApiserver)
        {
            head.push_str(" in the extension API server");
        }
    }
    head.push_str(&format!(" (confidence {:.2})", v.confidence));
    label(out, paint, "Verdict", &head, width)?;
    let indent = " ".repeat(LABEL);
    write_wrapped(out, &one_line(&v.summary), &indent, &indent, width)?;
    for r in &v.rules {
        label(out, paint, "Evidence", &r.id, width)?;
        let key_width = r.evidence.keys().map(String::len).max().unwrap_or(0);
        for (k, val) in &r.evidence {
            let first = format!("{indent}  {k}{} = ", " ".repeat(key_width - k.len()));
            let rest = " ".repeat(first.chars().count());
            write_wrapped(out, &one_line(&evidence_text(val)), &first, &rest, width)?;
        }
    }
    let class_width = v
        .ruled_out
        .iter()
        .map(|r| r.class.as_str().len())
        .max()
        .unwrap_or(0);
    for (i, r) in v.ruled_out.iter().enumerate() {
        let name = r.class.as_str();
        let head = if i == 0 {
            format!("{}{}", paint.bold("Ruled out"), " ".repeat(LABEL - 9))
        } else {
            indent.clone()
        };
        let first = format!("{head}{name}{}", " ".repeat(class_width + 2 - name.len()));
        let rest = " ".repeat(LABEL + class_width + 2);
        write_wrapped(out, &r.because, &first, &rest, width)?;
    }
    Ok(())
}

/// Render the human view.
///
/// # Errors
/// The writer's I/O errors.
pub fn render(
    out: &mut dyn Write,
    inv: &Investigation,
    explained: &Explained<'_>,
    d: &Diagnosis,
    opts: ViewOptions,
) -> std::io::Result<()> {
    let Explained {
        verdict,
        path: steps,
        other,
    } = explained;
    let verdict = *verdict;
    let paint = Paint(opts.color);
    let width = opts.width.max(40);
    let p = inv.probe();
    let t = &inv.trace;
    label(out, &paint, "Request", &request_line(p, t), width)?;
    write_response(out, p, &paint, width)?;
    label(out, &paint, "Serving", &serving_text(t), width)?;
    writeln!(out)?;
    write_steps(out, steps, &paint, width)?;
    for m in t
        .webhooks
        .iter()
        .filter(|m| m.decision == Decision::Unknown)
    {
        writeln!(out, "  ({}/{}: {})", m.kind, m.name, m.reason)?;
    }
    writeln!(out)?;
    match verdict {
        Some(v) => {
            let answered = p.status.is_some_and(|c| (200..400).contains(&c));
            write_verdict(out, v, answered, &paint, width)?
        }
        None => {
            let status = p.status.map(status_line).unwrap_or_default();
            // A rule that fired on a rung of this path (etcd slow for everyone, a webhook failing
            // other requests) is marked ✗ on its step; the request itself got through. Said here,
            // so that a ✗ above does not read as where this request broke.
            let mut flagged: Vec<String> = steps
                .iter()
                .filter(|s| s.state == StepState::Failed)
                .map(|s| s.rung.to_string())
                .collect();
            flagged.dedup();
            let text = if flagged.is_empty() {
                format!("the request succeeded ({status})")
            } else {
                format!(
                    "the request succeeded ({status}); findings on its path at {} did not fail it \
                     (see Also)",
                    flagged.join(", ")
                )
            };
            label(out, &paint, "Verdict", &text, width)?;
        }
    }
    // Findings on the path that are not the request's verdict: usually consequences of the rung
    // that broke, sometimes a second fault that will surface once the first is fixed.
    let request_subject = verdict.map(|v| &v.subject);
    let others: Vec<&Verdict> = d
        .verdicts
        .iter()
        .filter(|v| Some(&v.subject) != request_subject)
        .filter(|v| v.class != Class::Healthy)
        .collect();
    let mut also: Vec<String> = others
        .iter()
        .map(|v| {
            format!(
                "{} {} {}: {}",
                v.subject,
                v.class,
                v.severity,
                one_line(&v.summary)
            )
        })
        .collect();
    also.extend(
        other
            .iter()
            .filter(|f| !others.iter().any(|v| v.subject.to_string() == f.subject))
            .map(|f| format!("{}: {} ({})", f.subject, one_line(&f.summary), f.rule)),
    );
    for (i, text) in also.iter().enumerate() {
        if i == 0 {
            label(out, &paint, "Also", text, width)?;
        } else {
            write_wrapped(out, text, &" ".repeat(LABEL), &" ".repeat(LABEL + 2), width)?;
        }
    }
    let next: Vec<&String> = match verdict {
        Some(v) => v.next.iter().collect(),
        None => others.iter().flat_map(|v| &v.next).collect(),
    };
    for (i, n) in next.iter().enumerate() {
        if i == 0 {
            writeln!(out, "{}{}{n}", paint.bold("Next"), " ".repeat(LABEL - 4))?;
        } else {
            writeln!(out, "{}{n}", " ".repeat(LABEL))?;
        }
    }
    for (i, g) in d.gaps.iter().enumerate() {
        let reason = serde_json::to_value(g.reason)
            .ok()
            .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
            .unwrap_or_default();
        let text = format!("{} ({reason}): {}", g.source, g.detail);
        if i == 0 {
            label(out, &paint, "Gaps", &text, width)?;
        } else {
            write_wrapped(
                out,
                &text,
                &" ".repeat(LABEL),
                &" ".repeat(LABEL + 2),
                width,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Rung;
    use crate::engine::why::Seen;

    fn render(step: Step) -> String {
        let mut out = Vec::new();
        write_steps(&mut out, &[step], &Paint(false), 100).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_mark_agrees_with_its_text() {
        // ✗ comes from a rule, shown under it; its own text never says there is nothing.
        let mut failed = Step::new(Rung::Verb, Seen::Unknown, "");
        failed.state = StepState::Failed;
        failed.findings.push(Finding {
            rule: "r".into(),
            class: "Aggregation".into(),
            subject: "APIService/x".into(),
            summary: "it broke".into(),
            decides: true,
        });
        let text = render(failed);
        assert!(text.starts_with("  ✗ verb"), "{text}");
        assert!(
            !text.contains("no evidence") && !text.contains("not checked"),
            "{text}"
        );
        assert!(text.contains("✗ it broke (r)"), "{text}");
        // "No evidence" has its own mark.
        let mut unknown = Step::new(Rung::Verb, Seen::Unknown, "");
        unknown.state = StepState::Unknown;
        assert!(render(unknown).starts_with("  ? verb  no evidence"));
    }
}
