use super::*;

fn read(lines: &str) -> Vec<TimedHop> {
    let mut r = HopReader::default();
    for l in lines.lines() {
        match super::super::log_lines::parse_log_line(l) {
            Some(p) => {
                r.etcd_line(&p, l);
                r.text(&p.message);
            }
            None => r.text(l),
        }
    }
    r.finish().into_iter().map(|p| p.hop).collect()
}

/// kube-apiserver 1.24 (the real capture's format): a request block, and webhook and storage
/// calls as blocks of their own.
#[test]
fn blocks_of_1_24_read_with_their_attributes_steps_and_end() {
    let hops = read(
        r#"I1129 08:56:05.515605   32417 trace.go:205] Trace[1777406401]: "List" url:/api/v1/namespaces/etcd-stall/configmaps,user-agent:kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07,audit-id:ae0f00a5-ebba-4b08-a166-e9ec75c41c4c,client:127.0.0.1,accept:application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json,protocol:HTTP/2.0 (29-Nov-2026 08:55:55.515) (total time: 10000ms):
Trace[1777406401]: ---"Listing from storage done" 9999ms (08:56:05.515)
Trace[1777406401]: [10.000057809s] [10.000057809s] END
I1129 09:20:13.131245   32417 trace.go:205] Trace[1734651112]: "Call validating webhook" configuration:vwh-slow,webhook:slow.policy.example.com,resource:/v1, Resource=configmaps,subresource:,operation:CREATE,UID:4d2f7c3e-9b1a-4c55-8e0f-2a6b1d9c7e31 (29-Nov-2026 09:20:05.126) (total time: 8004ms):
Trace[1734651112]: ---"Request completed" 8003ms (09:20:13.130)
Trace[1734651112]: [8.004817433s] [8.004817433s] END
I1129 08:56:05.515496   32417 trace.go:205] Trace[1933546506]: "List etcd3" key:/configmaps/etcd-stall,resourceVersion:,resourceVersionMatch:,limit:500,continue: (29-Nov-2026 08:55:55.515) (total time: 9999ms):
Trace[1933546506]: [9.999913784s] [9.999913784s] END
"#,
    );
    assert_eq!(hops.len(), 3);
    let list = &hops[0];
    assert_eq!(list.layer, HopLayer::Request);
    assert_eq!(list.verb.as_deref(), Some("LIST"));
    assert_eq!(
        list.path.as_deref(),
        Some("/api/v1/namespaces/etcd-stall/configmaps")
    );
    assert_eq!(
        list.user_agent.as_deref(),
        Some("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07")
    );
    assert_eq!(
        list.fields["accept"],
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    );
    assert!((list.duration_ms - 10000.057809).abs() < 1e-6);
    assert!(list.complete);
    assert_eq!(
        list.started_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-29T08:55:55.515Z")
    );
    assert_eq!(list.steps[0].name, "Listing from storage done");
    assert_eq!(list.steps[0].layer, HopLayer::Request);
    assert_eq!(list.steps[0].duration_ms, 9999.0);

    let hook = &hops[1];
    assert_eq!(hook.layer, HopLayer::Admission);
    assert_eq!(hook.fields["webhook"], "slow.policy.example.com");
    assert_eq!(hook.fields["configuration"], "vwh-slow");
    assert_eq!(hook.fields["resource"], "/v1, Resource=configmaps");
    assert_eq!(hook.fields["subresource"], "");
    assert_eq!(hook.fields["operation"], "CREATE");
    assert_eq!(hook.verb, None);

    let etcd = &hops[2];
    assert_eq!(etcd.layer, HopLayer::Storage);
    assert_eq!(etcd.fields["key"], "/configmaps/etcd-stall");
    assert_eq!(etcd.fields["limit"], "500");
}

/// 1.27+ write webhook and storage calls as traces nested in the request's block, one space of
/// indent more per level, closed by `]`; a plain `---"Call validating webhook"` step names its
/// webhook too.
#[test]
fn nested_traces_and_steps_are_attributed_to_their_layer() {
    let hops = read(
        r#"I0115 12:00:08.130000       1 trace.go:236] Trace[42]: "Create" accept:application/json, */*,audit-id:9c1f,client:10.0.0.7,api-group:,api-version:v1,name:,subresource:,namespace:shop,protocol:HTTP/2.0,resource:configmaps,scope:resource,url:/api/v1/namespaces/shop/configmaps,user-agent:kubectl/v1.30.2 (linux/amd64) kubernetes/39683505,verb:POST (15-Jan-2026 12:00:00.120) (total time: 8010ms):
Trace[42]: ["Call validating webhook" configuration:vwh-slow,webhook:slow.policy.example.com,resource:/v1, Resource=configmaps,subresource:,operation:CREATE,UID:77 8004ms (12:00:00.125)
Trace[42]:  ---"Request completed" 8003ms (12:00:08.128)]
Trace[42]: ["Create etcd3" audit-id:9c1f,key:/configmaps/shop/c1,type:*core.ConfigMap,resource:configmaps 3ms (12:00:08.129)]
Trace[42]: ---"Call mutating webhook" configuration:mwh,webhook:m.example.com,resource:/v1, Resource=configmaps,subresource:,operation:CREATE,UID:78 700ms (12:00:08.129)
Trace[42]: ---"Write to database call succeeded" len:170 1ms (12:00:08.130)
Trace[42]: [8.010131263s] [8.010131263s] END
"#,
    );
    assert_eq!(hops.len(), 1);
    let h = &hops[0];
    assert_eq!(h.verb.as_deref(), Some("POST"));
    assert_eq!(h.fields["accept"], "application/json, */*");
    let layers: Vec<(HopLayer, bool, u32)> = h
        .steps
        .iter()
        .map(|s| (s.layer, s.nested, s.depth))
        .collect();
    assert_eq!(
        layers,
        [
            (HopLayer::Admission, true, 0),
            (HopLayer::Admission, false, 1),
            (HopLayer::Storage, true, 0),
            (HopLayer::Admission, false, 0),
            (HopLayer::Request, false, 0),
        ]
    );
    assert_eq!(h.steps[0].fields["webhook"], "slow.policy.example.com");
    assert_eq!(h.steps[3].fields["webhook"], "m.example.com");
    assert_eq!(h.steps[4].fields["len"], "170");
}

/// etcd's own warnings: zap JSON (3.5) and capnslog (3.4).
#[test]
fn etcd_slow_request_warnings_are_timed_hops_of_etcd() {
    let hops = read(
        r#"{"level":"warn","ts":"2026-11-29T09:10:02.980Z","caller":"etcdserver/util.go:166","msg":"apply request took too long","took":"2.125393197s","expected-duration":"100ms","prefix":"read-only range ","request":"key:\"/registry/configmaps/shop/\" range_end:\"/registry/configmaps/shop0\" limit:500 ","response":"range_response_count:120 size:61234"}
{"level":"warn","ts":"2026-11-29T09:10:03.002Z","caller":"wal/wal.go:805","msg":"slow fdatasync","took":"1.202s","expected-duration":"1s"}
{"level":"warn","ts":"2026-11-29T09:10:03.100Z","caller":"etcdserver/v3_server.go:815","msg":"waiting for ReadIndex response took too long, retrying","sent-request-id":1,"retry-timeout":"500ms"}
2026-11-29 09:10:02.980446 W | etcdserver: read-only range request "key:\"/registry/configmaps/shop/\" range_end:\"/registry/configmaps/shop0\" " with result "range_response_count:120 size:61234" took too long (2.125393197s) to execute
2026-11-29 09:10:03.002000 W | wal: sync duration of 1.202s, expected less than 1s
"#,
    );
    let summary: Vec<(&str, f64)> = hops
        .iter()
        .map(|h| (h.name.as_str(), (h.duration_ms * 1000.0).round() / 1000.0))
        .collect();
    assert_eq!(
        summary,
        [
            ("apply request took too long", 2125.393),
            ("slow fdatasync", 1202.0),
            ("read-only range request took too long", 2125.393),
            ("slow fdatasync", 1202.0),
        ]
    );
    assert!(hops.iter().all(|h| h.layer == HopLayer::Etcd
        && h.component == Component::Etcd
        && h.started_at.is_some()));
    assert_eq!(
        hops[2].fields["request"],
        r#"key:"/registry/configmaps/shop/" range_end:"/registry/configmaps/shop0" "#
    );
    assert_eq!(hops[0].fields["expected-duration"], "100ms");
}

/// A JSON-format kube-apiserver log carries a block in one `msg`.
#[test]
fn a_block_inside_one_json_message_is_read() {
    let line = r#"{"ts":1764406555350.188,"caller":"trace/trace.go:236","msg":"Trace[7]: \"List etcd3\" audit-id:a,key:/pods,resourceVersion:,resourceVersionMatch:,limit:0,continue: (29-Nov-2026 08:55:45.342) (total time: 2268ms):\nTrace[7]: [2.268397203s] [2.268397203s] END\n","v":0}"#;
    let hops = read(line);
    assert_eq!(hops.len(), 1);
    assert_eq!(hops[0].layer, HopLayer::Storage);
    assert!((hops[0].duration_ms - 2268.397203).abs() < 1e-6);
}

#[test]
fn go_durations_parse() {
    for (s, ms) in [
        ("10.007600656s", 10007.600656),
        ("503.5ms", 503.5),
        ("1m2.5s", 62500.0),
        ("850µs", 0.85),
        ("100ns", 0.0001),
        ("1h0m0s", 3_600_000.0),
        ("0", 0.0),
    ] {
        let got = parse_go_duration(s).unwrap();
        assert!((got - ms).abs() < 1e-9, "{s}: {got}");
    }
    for bad in ["", "s", "1x", "1.2.3s", "--1s", "ms"] {
        assert!(parse_go_duration(bad).is_none(), "{bad}");
    }
}

/// Cut, garbled and hostile blocks never panic: a header without END keeps its total time,
/// lines of unknown blocks are ignored, and nonsense is nothing.
#[test]
fn truncated_and_garbage_blocks_never_panic() {
    let hops = read(
        r#"I1129 08:55:55.350188   32417 trace.go:205] Trace[1]: "Create" url:/api/v1/namespaces/x/configmaps,user-agent:curl/7.88.1 (29-Nov-2026 08:55:45.342) (total time: 10007ms):
Trace[1]: ---"Object stored in datab
Trace[2]: ---"orphan step" 5ms (08:55:45.342)
Trace[2]: [1s] [1s] END
Trace[]: "x" (29-Nov-2026 08:55:45.342) (total time: 1ms):
Trace[99999999999999999999999]: "Big" (31-Feb-2026 25:61:61.000) (total time: 99999999999999999999999ms):
Trace[3]: "Neg" (29-Nov-2026 08:55:45.342) (total time: 5ms):
Trace[3]: ---"n" -5ms (08:55:45.342)]]]]]
Trace[3]: ["unterminated nested 7ms (08:55:45.342)
Trace[3]: [garbage] [garbage] END
Trace[4]: "Ünïcødé ✓" (29-Nov-2026 08:55:45.342) (total time: 1ms):
Trace[4]:                                                 ---"deep" 1ms (x)
Trace[4
Trace[4]:
Trace[4]: [
Trace[4]: ---
Trace[4]: |||"par" k:v 2ms (08:55:45.342)
"#,
    );
    let names: Vec<(&str, bool, f64)> = hops
        .iter()
        .map(|h| (h.name.as_str(), h.complete, h.duration_ms))
        .collect();
    assert!(names.contains(&("Create", false, 10007.0)), "{names:?}");
    assert!(
        names
            .iter()
            .any(|(n, complete, _)| *n == "Neg" && *complete)
    );
    let uni = hops.iter().find(|h| h.name == "Ünïcødé ✓").unwrap();
    assert_eq!(uni.steps.len(), 2);
    // A month that does not exist, an hour past 24: no date, no panic.
    assert!(
        hops.iter()
            .filter(|h| h.name == "Big")
            .all(|h| h.started_at.is_none())
    );
    for garbage in ["", "Trace[", "Trace[1]", "Trace[1]:", "\u{0}\u{1}", "]]]]"] {
        assert!(read(garbage).is_empty());
    }
}

#[test]
fn fields_split_only_before_a_key() {
    let f = parse_fields("resource:/v1, Resource=configmaps,subresource:,operation:CREATE,UID:x");
    assert_eq!(f.len(), 4);
    assert_eq!(f["resource"], "/v1, Resource=configmaps");
    let f = parse_fields("accept:*/*,protocol:HTTP/2.0");
    assert_eq!(f["accept"], "*/*");
    assert_eq!(f["protocol"], "HTTP/2.0");
    assert!(parse_fields("no colon here").is_empty());
    assert!(parse_fields(",,,:,").is_empty() || parse_fields(",,,:,").len() <= 1);
}

/// 3a, 1.27+: an UPDATE's admission runs inside its `GuaranteedUpdate etcd3` (the update's retry
/// loop), so the webhook's nested trace sits inside the storage call's: the storage call's own
/// time is net of it.
#[test]
fn a_storage_call_is_net_of_the_webhook_calls_nested_in_it() {
    let hops = read(
        r#"I1207 20:40:01.300000       1 trace.go:236] Trace[9]: "Patch" accept:application/json,audit-id:a1,client:127.0.0.1,api-group:,api-version:v1,name:item-0,subresource:,namespace:inventory,protocol:HTTP/2.0,resource:configmaps,scope:resource,url:/api/v1/namespaces/inventory/configmaps/item-0,user-agent:test,verb:PATCH (07-Dec-2026 20:40:00.090) (total time: 1210ms):
Trace[9]: ["GuaranteedUpdate etcd3" audit-id:a1,key:/configmaps/inventory/item-0,type:*core.ConfigMap,resource:configmaps 1206ms (20:40:00.092)
Trace[9]:  ---"About to Encode" 2ms (20:40:00.094)
Trace[9]:  ["Call validating webhook" configuration:policy-gate,webhook:updates.policy-gate.example.org,resource:/v1, Resource=configmaps,subresource:,operation:UPDATE,UID:u1 1201ms (20:40:00.095)
Trace[9]:   ---"Request completed" 1200ms (20:40:01.296)]
Trace[9]:  ---"Txn call completed" 3ms (20:40:01.298)]
Trace[9]: ---"Object stored in database" 1207ms (20:40:01.299)
Trace[9]: [1.210123456s] [1.210123456s] END
"#,
    );
    assert_eq!(hops.len(), 1);
    let calls: Vec<(HopLayer, f64, f64)> = hops[0]
        .calls()
        .map(|c| (c.layer(), c.duration_ms(), c.own_ms()))
        .collect();
    assert_eq!(
        calls,
        [
            (HopLayer::Storage, 1206.0, 5.0),
            (HopLayer::Admission, 1201.0, 1201.0)
        ]
    );
}

/// 3a, 1.24: the webhook call is a block of its own, logged before the storage call's block it
/// ran inside; its interval lies in the storage call's, so that time is not storage's. A webhook
/// call outside the storage call's interval, or of another request (audit ID), is not.
#[test]
fn a_storage_block_is_net_of_the_webhook_blocks_that_ran_inside_it() {
    let mut hops = read(
        r#"I1207 20:40:01.296000   100 trace.go:205] Trace[1]: "Call validating webhook" configuration:policy-gate,webhook:updates.policy-gate.example.org,resource:/v1, Resource=configmaps,subresource:,operation:UPDATE,UID:u1 (07-Dec-2026 20:40:00.095) (total time: 1201ms):
Trace[1]: ---"Request completed" 1200ms (20:40:01.296)
Trace[1]: [1.201s] [1.201s] END
I1207 20:40:01.299000   100 trace.go:205] Trace[2]: "GuaranteedUpdate etcd3" type:*core.ConfigMap (07-Dec-2026 20:40:00.092) (total time: 1206ms):
Trace[2]: ---"Transaction prepared" 1203ms (20:40:01.296)
Trace[2]: ---"Transaction committed" 3ms (20:40:01.299)
Trace[2]: [1.206s] [1.206s] END
I1207 20:40:05.000000   100 trace.go:205] Trace[3]: "Call validating webhook" configuration:policy-gate,webhook:updates.policy-gate.example.org,resource:/v1, Resource=configmaps,subresource:,operation:UPDATE,UID:u2 (07-Dec-2026 20:40:03.800) (total time: 1200ms):
Trace[3]: [1.2s] [1.2s] END
I1207 20:40:06.000000   100 trace.go:205] Trace[4]: "GuaranteedUpdate etcd3" audit-id:other,type:*core.ConfigMap (07-Dec-2026 20:40:03.700) (total time: 2300ms):
Trace[4]: [2.3s] [2.3s] END
I1207 20:40:06.000000   100 trace.go:205] Trace[5]: "GuaranteedUpdate etcd3" type:*core.ConfigMap (07-Dec-2026 20:40:04.000) (total time: 900ms):
Trace[5]: [900ms] [900ms] END
"#,
    );
    for h in &mut hops {
        h.component = Component::KubeApiserver;
    }
    let storage: Vec<&TimedHop> = hops
        .iter()
        .filter(|h| h.layer == HopLayer::Storage)
        .collect();
    assert_eq!(storage.len(), 3);
    let net = |h: &TimedHop| h.duration_ms - crate::bundle::hops::contained_ms(h, &hops);
    // The webhook of request u1 ran inside the first storage call.
    assert!((net(storage[0]) - 5.0).abs() < 1e-6, "{}", net(storage[0]));
    // The second webhook call (no audit ID) lies inside the second storage call: counted.
    assert!(
        (net(storage[1]) - 1100.0).abs() < 1e-6,
        "{}",
        net(storage[1])
    );
    // It started before the third storage call: not inside it.
    assert!(
        (net(storage[2]) - 900.0).abs() < 1e-6,
        "{}",
        net(storage[2])
    );
}

/// 3a, as a real 1.36 kube-apiserver writes it: the UPDATE's webhook calls are nested traces
/// *beside* its `GuaranteedUpdate etcd3` (retried once here, a second webhook call), though they
/// ran inside it — their start times say so. The storage call's own time is the rest.
#[test]
fn a_storage_call_is_net_of_the_webhook_calls_beside_it_that_ran_inside_it() {
    let hops = read(
        r#"I1207 20:43:40.175679   30670 trace.go:236] Trace[1041028467]: "Patch" accept:*/*,audit-id:6e96957c-2d92-4573-a671-90f8e00f1b5f,client:127.0.0.1,api-group:,api-version:v1,name:item-0,subresource:,namespace:inventory,protocol:HTTP/2.0,resource:configmaps,scope:resource,url:/api/v1/namespaces/inventory/configmaps/item-0,user-agent:unknown,verb:PATCH (07-Dec-2026 20:43:37.756) (total time: 2419ms):
Trace[1041028467]: ["GuaranteedUpdate etcd3" audit-id:6e96957c-2d92-4573-a671-90f8e00f1b5f,key:/configmaps/inventory/item-0,type:*core.ConfigMap,group:,resource:configmaps 2419ms (20:43:37.756)
Trace[1041028467]:  ---"About to Encode" 1211ms (20:43:38.967)
Trace[1041028467]:  ---"About to Encode" 1204ms (20:43:40.174)]
Trace[1041028467]: ["Call validating webhook" configuration:policy-gate,webhook:updates.policy-gate.example.org,resource:/v1, Resource=configmaps,subresource:,operation:UPDATE,UID:05676a2b-9288-4313-b84c-36da6aa740af 2417ms (20:43:37.757)
Trace[1041028467]:  ---"Request completed" 1210ms (20:43:38.967)]
Trace[1041028467]: ["Call validating webhook" configuration:policy-gate,webhook:updates.policy-gate.example.org,resource:/v1, Resource=configmaps,subresource:,operation:UPDATE,UID:0ba84a7d-f4be-4e1d-8536-37671892d52f 1205ms (20:43:38.970)
Trace[1041028467]:  ---"Request completed" 1203ms (20:43:40.173)]
Trace[1041028467]: [2.419584506s] [2.419584506s] END
"#,
    );
    assert_eq!(hops.len(), 1);
    let storage: Vec<f64> = hops[0]
        .calls()
        .filter(|c| c.layer() == HopLayer::Storage)
        .map(|c| c.own_ms())
        .collect();
    assert_eq!(storage.len(), 1);
    assert!(storage[0] < 5.0, "{storage:?}");
    let webhooks: Vec<f64> = hops[0]
        .calls()
        .filter(|c| c.layer() == HopLayer::Admission)
        .map(|c| c.own_ms())
        .collect();
    assert_eq!(webhooks, [2417.0, 1205.0]);
}
