//! Server-side printing: `meta.k8s.io/v1 Table` for clients that ask for `as=Table` (kubectl get).
//!
//! Columns are kube-apiserver's printers for the kinds served here (APIService: NAME, SERVICE,
//! AVAILABLE, AGE with `False (FailedDiscoveryCheck)`; ConfigMap: DATA; …), and NAME/AGE for
//! everything else; ages are Go's `duration.HumanDuration` of the creation timestamp.

use serde_json::{Value, json};

fn col(name: &str, ty: &str, format: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": 0})
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        return if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let d = h / 24;
    if h < 24 * 8 {
        return if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{d}d");
    }
    format!("{}y", d / 365)
}

fn age(obj: &Value) -> String {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| human_duration(jiff::Timestamp::now().as_second() - t.as_second()))
        .unwrap_or_else(|| "<unknown>".into())
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

// kube-aggregator's printer: `Local` for an APIService without `spec.service`, and the reason
// beside a status that is not True — the `False (FailedDiscoveryCheck)` an operator reads in
// `kubectl get apiservices` (captures/cases/*/apiservices-table.txt).
fn apiservice_row(o: &Value) -> Vec<Value> {
    let service = match o.pointer("/spec/service") {
        Some(svc) if !svc.is_null() => format!("{}/{}", s(svc, "/namespace"), s(svc, "/name")),
        _ => "Local".into(),
    };
    let available = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .map(|c| {
            let status = s(c, "/status");
            if status == "True" {
                status.to_string()
            } else {
                format!("{status} ({})", s(c, "/reason"))
            }
        })
        .unwrap_or_else(|| "Unknown".into());
    vec![json!(service), json!(available)]
}

fn count(o: &Value, ptr: &str) -> usize {
    match o.pointer(ptr) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn service_row(o: &Value) -> Vec<Value> {
    let ports: Vec<String> = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP")))
                .collect()
        })
        .unwrap_or_default();
    vec![
        json!(s(o, "/spec/type")),
        json!(s(o, "/spec/clusterIP")),
        json!(if s(o, "/spec/externalName").is_empty() {
            "<none>"
        } else {
            s(o, "/spec/externalName")
        }),
        json!(if ports.is_empty() {
            "<none>".into()
        } else {
            ports.join(",")
        }),
    ]
}

fn endpoints_row(o: &Value) -> Vec<Value> {
    let mut eps = Vec::new();
    for subset in o["subsets"].as_array().into_iter().flatten() {
        for a in subset["addresses"].as_array().into_iter().flatten() {
            for p in subset["ports"].as_array().into_iter().flatten() {
                eps.push(format!("{}:{}", s(a, "/ip"), p["port"]));
            }
        }
    }
    vec![json!(if eps.is_empty() {
        "<none>".into()
    } else {
        eps.join(",")
    })]
}

/// Column definitions and cells (without NAME and AGE) for a kind.
/// Extra cells of one row.
type Cells = fn(&Value) -> Vec<Value>;

fn columns(kind: &str) -> (Vec<Value>, Cells) {
    match kind {
        "APIService" => (
            vec![col("Service", "string", ""), col("Available", "string", "")],
            apiservice_row,
        ),
        // DATA counts `binaryData` keys too, as kubectl's ConfigMap printer does.
        "ConfigMap" => (vec![col("Data", "string", "")], |o| {
            vec![json!(count(o, "/data") + count(o, "/binaryData"))]
        }),
        "Namespace" => (vec![col("Status", "string", "")], |o| {
            vec![json!(if s(o, "/status/phase").is_empty() {
                "Active"
            } else {
                s(o, "/status/phase")
            })]
        }),
        "Service" => (
            vec![
                col("Type", "string", ""),
                col("Cluster-IP", "string", ""),
                col("External-IP", "string", ""),
                col("Port(s)", "string", ""),
            ],
            service_row,
        ),
        "Endpoints" => (vec![col("Endpoints", "string", "")], endpoints_row),
        "Pod" => (vec![col("Status", "string", "")], |o| {
            vec![json!(if s(o, "/status/phase").is_empty() {
                "Pending"
            } else {
                s(o, "/status/phase")
            })]
        }),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            (vec![col("Webhooks", "integer", "")], |o| {
                vec![json!(count(o, "/webhooks"))]
            })
        }
        "FlowSchema" => (
            vec![
                col("PriorityLevel", "string", ""),
                col("MatchingPrecedence", "string", ""),
            ],
            |o| {
                vec![
                    json!(s(o, "/spec/priorityLevelConfiguration/name")),
                    json!(
                        o.pointer("/spec/matchingPrecedence")
                            .cloned()
                            .unwrap_or(Value::Null)
                    ),
                ]
            },
        ),
        "PriorityLevelConfiguration" => (
            vec![
                col("Type", "string", ""),
                col("NominalConcurrencyShares", "string", ""),
            ],
            |o| {
                vec![
                    json!(s(o, "/spec/type")),
                    json!(
                        o.pointer("/spec/limited/nominalConcurrencyShares")
                            .map(|v| v.to_string())
                            .unwrap_or_else(|| "<none>".into())
                    ),
                ]
            },
        ),
        _ => (Vec::new(), |_| Vec::new()),
    }
}

/// A Table of `items` of `kind`.
pub fn table(kind: &str, items: &[Value], resource_version: &str) -> Value {
    let (extra, cells) = columns(kind);
    let mut defs = vec![col("Name", "string", "name")];
    defs.extend(extra);
    defs.push(col("Age", "string", ""));
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = vec![json!(s(o, "/metadata/name"))];
            row.extend(cells(o));
            row.push(json!(age(o)));
            json!({
                "cells": row,
                // `includeObject` defaults to `Metadata` (meta/v1 `TableOptions`): each row carries
                // the object's metadata as a PartialObjectMetadata, not the whole object.
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
                }
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": defs,
        "rows": rows,
    })
}

/// Whether the client asked for a Table.
// kubectl sends `application/json;as=Table;v=v1;g=meta.k8s.io,…;v=v1beta1…,application/json`:
// any `as=Table` offer is taken, and v1 is the only Table version served.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_like_go() {
        assert_eq!(human_duration(78), "78s");
        assert_eq!(human_duration(136), "2m16s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400), "3d");
    }

    #[test]
    fn apiservice_available_column() {
        let o = json!({"metadata": {"name": "v1alpha1.wardle.example.com"}, "spec": {"service": {"namespace": "wardle-system", "name": "api"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck"}]}});
        let t = table("APIService", &[o], "1");
        assert_eq!(t["rows"][0]["cells"][1], "wardle-system/api");
        assert_eq!(t["rows"][0]["cells"][2], "False (FailedDiscoveryCheck)");
    }
}
