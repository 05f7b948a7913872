# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_kubectl_extpath_global_optspecs
    string join \n h/help V/version
end

function __fish_kubectl_extpath_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_kubectl_extpath_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_kubectl_extpath_using_subcommand
    set -l cmd (__fish_kubectl_extpath_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -s V -l version -d 'Print version'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "scan" -d 'Collect from the live cluster and classify every extension path (read-only)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "import" -d 'Validate an evidence bundle and print it back, or build one from raw incident files'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "analyze" -d 'Classify an evidence bundle offline: one verdict per subject'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "explain" -d 'The runbook text of a rule, or what a class owns'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "rules" -d 'List, lint and test rules'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "collect" -d 'Collect an evidence bundle from the live cluster (read-only) and print it'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "why" -d 'Reproduce one request, trace its path rung by rung, and classify it (writes only as a server-side dry run: --dry-run -f FILE)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "replay" -d 'Run scenarios on the bundled reference server end to end (`replay --all`), or serve one (`replay serve SCENARIO`, `replay serve --bundle FILE`)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "serve" -d 'Run as an exporter: scan every --interval and serve the last diagnosis over HTTP (/metrics for Prometheus, /diagnosis, /healthz, /readyz)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "completions" -d 'Print shell completions (bash, zsh, fish) or the kubectl_complete-extpath shim'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "version" -d 'Print the client version, the rules it carries, and the API server\'s version when it can be reached'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l kubeconfig -d 'Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l context -d 'The name of the kubeconfig context to use (`scan` and `collect`: several, comma-separated, scan them as a fleet)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l cluster -d 'The name of the kubeconfig cluster to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l user -d 'The name of the kubeconfig user to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -s s -l server -d 'The address and port of the Kubernetes API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l certificate-authority -d 'Path to a cert file for the certificate authority' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l client-certificate -d 'Path to a client certificate file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l client-key -d 'Path to a client key file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l token -d 'Bearer token for authentication to the API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l tls-server-name -d 'Server name to use for server certificate validation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l as -d 'Username to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l as-group -d 'Group to impersonate for the operation (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l as-uid -d 'UID to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -s n -l namespace -d 'The namespace scope for namespaced probes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l request-timeout -d 'The length of time to wait before giving up on a single server request (e.g. 1s, 2m, 3h)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -s v -l v -d 'Log level on stderr, like kubectl\'s `-v`: 0 shows a progress bar when stderr is a terminal; 1 prints when each collection step finished (where a slow collection spends its time); 2 adds one line per request to the API server (method, path, status, time, like kubectl -v=6); 3 adds the response headers a diagnosis reads (APF flow schema and priority level, audit id, Retry-After). Higher levels are 3' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l window -d 'Time between the two `/metrics` scrapes; `0` = one scrape (counters are then history only). With --prometheus it applies only to etcd\'s /metrics (--etcd-metrics-url)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l timeout -d 'Bound on the whole run. `collect` stops collecting then (what has not answered is a gap); `scan` stops collecting at 90% of it (at most 5s before it) and leaves the rest to the analysis, which stops at the bound too: the subjects not judged by then are one Inconclusive verdict on Source/analysis (critical: the gate fails, exit 1)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l max-scrape-bytes -d 'The most bytes read of one /metrics body (kube-apiserver\'s or etcd\'s); a body past it is cut there, the series before the cut kept and the cut recorded as a gap. Units: k, M, G (1000s) or Ki, Mi, Gi (1024s)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l max-series -d 'The most series of the families extpath reads kept from one /metrics scrape; a scrape past it is cut there, like --max-scrape-bytes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l max-objects -d 'How many objects one list may bring (APIServices, webhook configurations, CRDs, Services, Endpoints, Pods, Events…): a list with more stops there, and a gap says what was cut (for a core source, an Inconclusive verdict: exit 1)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l backend-address -d 'Where to reach a backend for the TLS handshake, as `SERVICE.NAMESPACE=HOST:PORT`, or `URLHOST:PORT=HOST:PORT` for a webhook called by URL (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l etcd-metrics-url -d 'etcd\'s /metrics URL (the client URL `https://HOST:2379`, or a `--listen-metrics-urls` address): adds etcd\'s own metrics, scraped in the same window, its /health and its alarms' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l etcd-cert -d 'Client certificate for etcd (mutual TLS)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l etcd-key -d 'Key of the etcd client certificate' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l etcd-ca -d 'CA that signed etcd\'s serving certificate' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l prometheus -d 'Read the metrics from this Prometheus (base URL) instead of scraping /metrics: rates over --since, no window to wait for' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l since -d 'With --prometheus: how far back the rates reach [default: 10m]' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l until -d 'With --prometheus: the end of that window, as an RFC 3339 time [default: now]' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l prometheus-bearer-token-file -d 'File holding a bearer token for Prometheus' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l prometheus-ca -d 'CA that signed Prometheus\' serving certificate (default: the system\'s roots)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l prometheus-apiserver-selector -d 'Label matchers of kube-apiserver\'s series in Prometheus' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l prometheus-etcd-selector -d 'Label matchers of etcd\'s series in Prometheus (read unless --etcd-metrics-url is given)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l merge -d 'Merge the evidence a collection cannot gather from this bundle (repeatable): client output (kubectl, curl), log findings, Events, certificates and APF state not already collected, and metrics and health checks of targets the collection has none of. `replay serve --bundle` writes such a file; its recording time then becomes the collection time' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -s o -l output -d 'Output format' -r -f -a "table\t'A table with details for every finding: as wide as the terminal, not wrapped when piped'
wide\t'The table with rung, confidence, evidence and consequences as columns, one line per verdict and nothing wrapped (like `kubectl get -o wide`)'
json\t'The Diagnosis as JSON (docs/diagnosis.schema.json)'
yaml\t'The Diagnosis as YAML'
markdown\t'Markdown for incident documents'
junit\t'JUnit XML for CI: one test case per subject, failing exactly as --fail-on does'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l color -d 'Colour in the table: auto (a terminal, NO_COLOR unset), always or never' -r -f -a "auto\t'Colour when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`'
always\t'Always colour (also when piped, e.g. into `less -R`)'
never\t'Never colour'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l class -d 'Only report verdicts of this class (repeatable)' -r -f -a "Aggregation\t'APIService, Service, endpoints, proxy TLS, discovery'
Admission\t'admission and CRD conversion webhooks'
Auth\t'authentication and authorization, delegated too'
APF\t'API Priority and Fairness, max-in-flight'
Storage\t'storage and etcd'
Watch\t'watch streams and the watch cache'
OutOfScope\t'not the API server\'s: controllers, kubelet, backends'
Healthy\t'nothing wrong on the subject'
Inconclusive\t'the evidence to judge the subject is missing'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l subject -d 'Only report these subjects: KIND or KIND/NAME, NAME may end in `*` (repeatable). KIND is a subject kind in any case, singular or plural, or kubectl\'s short name where one exists (`apiservices/v1beta1.*`, `crd`, `mutatingwebhook/…`)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l rule -d 'Run only this rule (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l skip-rule -d 'Do not run this rule (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l set -d 'Set a rule setting, e.g. `cert_warn_days=14` (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l waivers -d 'A waivers file accepting known findings for a while (docs/waivers.md): `apiVersion: extpath.dev/v1alpha1`, `kind: Waivers`, and `waivers:` entries with `rule` (a rule id or `*`), `subject` (Kind/name, `*` globs), `reason` and `expires` (YYYY-MM-DD). Waived verdicts do not fail the gate; expired or unmatched waivers are reported' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l fail-on -d 'Exit 1 when a verdict not waived is at or above this severity (Inconclusive counts as warning)' -r -f -a "warning\t'Warnings and critical verdicts (and Inconclusive ones)'
critical\t'Critical verdicts only'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l parallel -d 'With several contexts, how many clusters are collected at once. The default, 4, keeps 2 cores busy: a collection spends its time waiting (the metrics --window, the API server\'s answers, TLS handshakes to backends) and uses a few percent of a core meanwhile, so four overlap their waits without queueing for CPU; the benchmark in the README measures it' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l save-bundle -d 'Also write the evidence bundle to this file (YAML, or JSON when it ends in .json), to attach to the incident and analyse again elsewhere' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l insecure-skip-tls-verify -d 'If true, the server\'s certificate will not be checked for validity'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l probe-admission -d 'Send a server-side dry-run create (never stored) through each webhook that intercepts ConfigMap creation'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l pod-logs -d 'Read the last lines of the logs of the Pods behind APIServices and webhooks and keep the known error lines (needs `get` on pods/log, which deploy/rbac.yaml does not grant)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l skip-list-probe -d 'Do not list the resources of each aggregated group/version after its discovery answers, nor read one object of each CRD through its conversion webhook (the least-privilege ClusterRole in deploy/rbac.yaml does not allow those reads)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l skip-delegation-probe -d 'Do not send the two probes that impersonate an ordinary user: each aggregated group/version\'s discovery request again as `extpath:delegation-probe` (group `system:authenticated`), which finds an extension server whose delegated authorization fails for everyone outside system:masters before a user does, and one read RBAC does not allow as `extpath:authorizer-probe`, which finds an authorization webhook after RBAC that fails. They need `impersonate` on those two users and that group (deploy/rbac.yaml grants exactly that; without it each probe is a gap); they are not sent when --as is given'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l wide -d 'The same as `-o wide` (kept for scripts written before it)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l show-healthy -d 'List every healthy subject in the table instead of one line that counts them'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l all-contexts -d 'Every context of the kubeconfig, as one fleet (`--context a,b,c` names some of them)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -l demo -d 'Scan the embedded demo instead of a cluster: the bundled reference server running fixtures/scenarios/demo.yaml (two broken aggregated APIs, a webhook timing out, a healthy webhook) with its clients. Needs no cluster and no kubeconfig'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand scan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand import" -l raw -d 'Build the bundle from raw files and directories instead: kubectl output, /metrics dumps, certificates, curl output, logs (kinds are told from content, see docs/raw-import.md)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand import" -s o -l output -d 'Output format' -r -f -a "yaml\t'YAML'
json\t'JSON'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand import" -l strict -d 'With --raw: fail (exit 2) on any file that cannot be read as the kind its content shows — malformed, cut short, unreadable, too large, invalid UTF-8 — also inside a directory, where it is otherwise recorded as an `unreadable` gap while the rest of the folder is used. Files of no known kind inside a directory are still only skipped'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l raw -d 'Build the bundle from raw files and directories instead: kubectl output, /metrics dumps, certificates, curl output, logs (kinds are told from content, see docs/raw-import.md)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -s o -l output -d 'Output format' -r -f -a "table\t'A table with details for every finding: as wide as the terminal, not wrapped when piped'
wide\t'The table with rung, confidence, evidence and consequences as columns, one line per verdict and nothing wrapped (like `kubectl get -o wide`)'
json\t'The Diagnosis as JSON (docs/diagnosis.schema.json)'
yaml\t'The Diagnosis as YAML'
markdown\t'Markdown for incident documents'
junit\t'JUnit XML for CI: one test case per subject, failing exactly as --fail-on does'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l color -d 'Colour in the table: auto (a terminal, NO_COLOR unset), always or never' -r -f -a "auto\t'Colour when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`'
always\t'Always colour (also when piped, e.g. into `less -R`)'
never\t'Never colour'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l class -d 'Only report verdicts of this class (repeatable)' -r -f -a "Aggregation\t'APIService, Service, endpoints, proxy TLS, discovery'
Admission\t'admission and CRD conversion webhooks'
Auth\t'authentication and authorization, delegated too'
APF\t'API Priority and Fairness, max-in-flight'
Storage\t'storage and etcd'
Watch\t'watch streams and the watch cache'
OutOfScope\t'not the API server\'s: controllers, kubelet, backends'
Healthy\t'nothing wrong on the subject'
Inconclusive\t'the evidence to judge the subject is missing'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l subject -d 'Only report these subjects: KIND or KIND/NAME, NAME may end in `*` (repeatable). KIND is a subject kind in any case, singular or plural, or kubectl\'s short name where one exists (`apiservices/v1beta1.*`, `crd`, `mutatingwebhook/…`)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l rule -d 'Run only this rule (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l skip-rule -d 'Do not run this rule (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l set -d 'Set a rule setting, e.g. `cert_warn_days=14` (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l waivers -d 'A waivers file accepting known findings for a while (docs/waivers.md): `apiVersion: extpath.dev/v1alpha1`, `kind: Waivers`, and `waivers:` entries with `rule` (a rule id or `*`), `subject` (Kind/name, `*` globs), `reason` and `expires` (YYYY-MM-DD). Waived verdicts do not fail the gate; expired or unmatched waivers are reported' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l fail-on -d 'Exit 1 when a verdict not waived is at or above this severity (Inconclusive counts as warning)' -r -f -a "warning\t'Warnings and critical verdicts (and Inconclusive ones)'
critical\t'Critical verdicts only'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l strict -d 'With --raw: fail (exit 2) on any file that cannot be read as the kind its content shows — malformed, cut short, unreadable, too large, invalid UTF-8 — also inside a directory, where it is otherwise recorded as an `unreadable` gap while the rest of the folder is used. Files of no known kind inside a directory are still only skipped'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l wide -d 'The same as `-o wide` (kept for scripts written before it)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -l show-healthy -d 'List every healthy subject in the table instead of one line that counts them'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand analyze" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand explain" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand explain" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and not __fish_seen_subcommand_from list lint test help" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and not __fish_seen_subcommand_from list lint test help" -f -a "list" -d 'List the bundled rules and those of `--rules DIR`'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and not __fish_seen_subcommand_from list lint test help" -f -a "lint" -d 'Check rule files: schema, CEL, fields against the fact model, a test beside each rule'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and not __fish_seen_subcommand_from list lint test help" -f -a "test" -d 'Run the `<id>.test.yaml` cases of rule directories (default `./rules`)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and not __fish_seen_subcommand_from list lint test help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from list" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from lint" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from lint" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from test" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from test" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the bundled rules and those of `--rules DIR`'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "lint" -d 'Check rule files: schema, CEL, fields against the fact model, a test beside each rule'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "test" -d 'Run the `<id>.test.yaml` cases of rule directories (default `./rules`)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l kubeconfig -d 'Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l context -d 'The name of the kubeconfig context to use (`scan` and `collect`: several, comma-separated, scan them as a fleet)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l cluster -d 'The name of the kubeconfig cluster to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l user -d 'The name of the kubeconfig user to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -s s -l server -d 'The address and port of the Kubernetes API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l certificate-authority -d 'Path to a cert file for the certificate authority' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l client-certificate -d 'Path to a client certificate file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l client-key -d 'Path to a client key file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l token -d 'Bearer token for authentication to the API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l tls-server-name -d 'Server name to use for server certificate validation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l as -d 'Username to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l as-group -d 'Group to impersonate for the operation (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l as-uid -d 'UID to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -s n -l namespace -d 'The namespace scope for namespaced probes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l request-timeout -d 'The length of time to wait before giving up on a single server request (e.g. 1s, 2m, 3h)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -s v -l v -d 'Log level on stderr, like kubectl\'s `-v`: 0 shows a progress bar when stderr is a terminal; 1 prints when each collection step finished (where a slow collection spends its time); 2 adds one line per request to the API server (method, path, status, time, like kubectl -v=6); 3 adds the response headers a diagnosis reads (APF flow schema and priority level, audit id, Retry-After). Higher levels are 3' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l window -d 'Time between the two `/metrics` scrapes; `0` = one scrape (counters are then history only). With --prometheus it applies only to etcd\'s /metrics (--etcd-metrics-url)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l timeout -d 'Bound on the whole run. `collect` stops collecting then (what has not answered is a gap); `scan` stops collecting at 90% of it (at most 5s before it) and leaves the rest to the analysis, which stops at the bound too: the subjects not judged by then are one Inconclusive verdict on Source/analysis (critical: the gate fails, exit 1)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l max-scrape-bytes -d 'The most bytes read of one /metrics body (kube-apiserver\'s or etcd\'s); a body past it is cut there, the series before the cut kept and the cut recorded as a gap. Units: k, M, G (1000s) or Ki, Mi, Gi (1024s)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l max-series -d 'The most series of the families extpath reads kept from one /metrics scrape; a scrape past it is cut there, like --max-scrape-bytes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l max-objects -d 'How many objects one list may bring (APIServices, webhook configurations, CRDs, Services, Endpoints, Pods, Events…): a list with more stops there, and a gap says what was cut (for a core source, an Inconclusive verdict: exit 1)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l backend-address -d 'Where to reach a backend for the TLS handshake, as `SERVICE.NAMESPACE=HOST:PORT`, or `URLHOST:PORT=HOST:PORT` for a webhook called by URL (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l etcd-metrics-url -d 'etcd\'s /metrics URL (the client URL `https://HOST:2379`, or a `--listen-metrics-urls` address): adds etcd\'s own metrics, scraped in the same window, its /health and its alarms' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l etcd-cert -d 'Client certificate for etcd (mutual TLS)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l etcd-key -d 'Key of the etcd client certificate' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l etcd-ca -d 'CA that signed etcd\'s serving certificate' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l prometheus -d 'Read the metrics from this Prometheus (base URL) instead of scraping /metrics: rates over --since, no window to wait for' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l since -d 'With --prometheus: how far back the rates reach [default: 10m]' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l until -d 'With --prometheus: the end of that window, as an RFC 3339 time [default: now]' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l prometheus-bearer-token-file -d 'File holding a bearer token for Prometheus' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l prometheus-ca -d 'CA that signed Prometheus\' serving certificate (default: the system\'s roots)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l prometheus-apiserver-selector -d 'Label matchers of kube-apiserver\'s series in Prometheus' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l prometheus-etcd-selector -d 'Label matchers of etcd\'s series in Prometheus (read unless --etcd-metrics-url is given)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l merge -d 'Merge the evidence a collection cannot gather from this bundle (repeatable): client output (kubectl, curl), log findings, Events, certificates and APF state not already collected, and metrics and health checks of targets the collection has none of. `replay serve --bundle` writes such a file; its recording time then becomes the collection time' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -s o -l output -d 'Output format' -r -f -a "yaml\t'YAML'
json\t'JSON'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l parallel -d 'With several contexts, how many clusters are collected at once. The default, 4, keeps 2 cores busy: a collection spends its time waiting (the metrics --window, the API server\'s answers, TLS handshakes to backends) and uses a few percent of a core meanwhile, so four overlap their waits without queueing for CPU; the benchmark in the README measures it' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l output-dir -d 'Write a fleet bundle directory instead of printing: one bundle per context (`CONTEXT.yaml`, or `.json` with `-o json`) and an index, `fleet.yaml`, that names them (and says which contexts could not be collected, and why). `analyze DIR` reads it. Needs `--context` (one or several, comma-separated) or `--all-contexts`' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l insecure-skip-tls-verify -d 'If true, the server\'s certificate will not be checked for validity'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l probe-admission -d 'Send a server-side dry-run create (never stored) through each webhook that intercepts ConfigMap creation'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l pod-logs -d 'Read the last lines of the logs of the Pods behind APIServices and webhooks and keep the known error lines (needs `get` on pods/log, which deploy/rbac.yaml does not grant)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l skip-list-probe -d 'Do not list the resources of each aggregated group/version after its discovery answers, nor read one object of each CRD through its conversion webhook (the least-privilege ClusterRole in deploy/rbac.yaml does not allow those reads)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l skip-delegation-probe -d 'Do not send the two probes that impersonate an ordinary user: each aggregated group/version\'s discovery request again as `extpath:delegation-probe` (group `system:authenticated`), which finds an extension server whose delegated authorization fails for everyone outside system:masters before a user does, and one read RBAC does not allow as `extpath:authorizer-probe`, which finds an authorization webhook after RBAC that fails. They need `impersonate` on those two users and that group (deploy/rbac.yaml grants exactly that; without it each probe is a gap); they are not sent when --as is given'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -l all-contexts -d 'Every context of the kubeconfig, as one fleet (`--context a,b,c` names some of them)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand collect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -s f -l filename -d 'Send the object in this file (YAML or JSON) as a server-side dry-run create, or update when it exists. Needs --dry-run' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l dry-run -d 'Server-side dry run: the API server authenticates, authorizes, admits and validates the write and stores nothing. The only way why sends a write' -r -f -a "server\t''"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l kubeconfig -d 'Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l context -d 'The name of the kubeconfig context to use (`scan` and `collect`: several, comma-separated, scan them as a fleet)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l cluster -d 'The name of the kubeconfig cluster to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l user -d 'The name of the kubeconfig user to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -s s -l server -d 'The address and port of the Kubernetes API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l certificate-authority -d 'Path to a cert file for the certificate authority' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l client-certificate -d 'Path to a client certificate file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l client-key -d 'Path to a client key file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l token -d 'Bearer token for authentication to the API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l tls-server-name -d 'Server name to use for server certificate validation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l as -d 'Username to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l as-group -d 'Group to impersonate for the operation (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l as-uid -d 'UID to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -s n -l namespace -d 'The namespace scope for namespaced probes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l request-timeout -d 'The length of time to wait before giving up on a single server request (e.g. 1s, 2m, 3h)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l backend-address -d 'Where to reach a backend for the TLS handshake, as `SERVICE.NAMESPACE=HOST:PORT` (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l watch-for -d 'How long a WATCH is read before it is judged' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l timeout -d 'Bound on gathering the path\'s evidence after the request; what has not answered becomes a gap' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -s o -l output -d 'Output: human (default), json or yaml (the WhyReport document)' -r -f -a "human\t'The request, its path rung by rung, the verdict'
json\t'The WhyReport document: the request record, the path, the verdict and the Diagnosis'
yaml\t'The same document as YAML'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l color -d 'Colour in the human view: auto (a terminal, NO_COLOR unset), always or never' -r -f -a "auto\t'Colour when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`'
always\t'Always colour (also when piped, e.g. into `less -R`)'
never\t'Never colour'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l fail-on -d 'Exit 1 when the request\'s verdict is at or above this severity (Inconclusive counts as warning), or when the request failed and nothing explains it' -r -f -a "warning\t'Warnings and critical verdicts (and Inconclusive ones)'
critical\t'Critical verdicts only'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l set -d 'Set a rule setting, e.g. `etcd_request_p99_warn_seconds=1` (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -l insecure-skip-tls-verify -d 'If true, the server\'s certificate will not be checked for validity'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand why" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l dir -d 'The scenario directory of --all' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l window -d 'Metrics window of each scan: the time between its two /metrics scrapes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l warmup -d 'How long each server runs before the scan starts: its `traffic:` clients have been at work for that long, as on a cluster where the incident is under way when someone looks. A scenario\'s `expect.warmupMs` makes it longer for that scenario' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -s j -l jobs -d 'Scenarios run at the same time' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -s o -l output -d 'Output format: table (default) or json' -r -f -a "table\t'A pass/fail table, with the mismatches of failing scenarios'
json\t'The `ReplayReport` document, for machines'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l color -d 'Colour in the table: auto, always or never' -r -f -a "auto\t'Colour when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`'
always\t'Always colour (also when piped, e.g. into `less -R`)'
never\t'Never colour'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l set -d 'Set a rule setting, e.g. `cert_warn_days=14` (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l all -d 'Every `*.yaml` in --dir'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -l verbose -d 'List every verdict of every scenario, not only the mismatches'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -a "serve" -d 'Serve one scenario, or a recorded incident (--bundle, --raw), on 127.0.0.1 until interrupted, for kubectl and other real clients'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and not __fish_seen_subcommand_from serve help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -l bundle -d 'Serve a recorded evidence bundle (YAML or JSON) instead: its objects, metrics, health checks, and the recorded outcomes of its probed aggregated paths. What cannot be served (client output, logs, served certificates, …) is written beside the kubeconfig for --merge' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -l raw -d 'Serve raw incident files instead (kubectl output, /metrics dumps, logs, …), imported first as `import --raw` does' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -l port -d 'Port on 127.0.0.1 (default: an ephemeral port)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -l kubeconfig-out -d 'Where to write the kubeconfig (default: a file in a new temporary directory)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -l client-cert -d 'Authenticate with the admin\'s client certificate instead of a bearer token'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -l idle -d 'Do not run the scenario\'s `traffic:` (its own clients): only your clients reach it'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Serve one scenario, or a recorded incident (--bundle, --raw), on 127.0.0.1 until interrupted, for kubectl and other real clients'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand replay; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l kubeconfig -d 'Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l context -d 'The name of the kubeconfig context to use (`scan` and `collect`: several, comma-separated, scan them as a fleet)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l cluster -d 'The name of the kubeconfig cluster to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l user -d 'The name of the kubeconfig user to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -s s -l server -d 'The address and port of the Kubernetes API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l certificate-authority -d 'Path to a cert file for the certificate authority' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l client-certificate -d 'Path to a client certificate file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l client-key -d 'Path to a client key file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l token -d 'Bearer token for authentication to the API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l tls-server-name -d 'Server name to use for server certificate validation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l as -d 'Username to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l as-group -d 'Group to impersonate for the operation (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l as-uid -d 'UID to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -s n -l namespace -d 'The namespace scope for namespaced probes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l request-timeout -d 'The length of time to wait before giving up on a single server request (e.g. 1s, 2m, 3h)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -s v -l v -d 'Log level on stderr, like kubectl\'s `-v`: 0 shows a progress bar when stderr is a terminal; 1 prints when each collection step finished (where a slow collection spends its time); 2 adds one line per request to the API server (method, path, status, time, like kubectl -v=6); 3 adds the response headers a diagnosis reads (APF flow schema and priority level, audit id, Retry-After). Higher levels are 3' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l window -d 'Time between the two `/metrics` scrapes; `0` = one scrape (counters are then history only). With --prometheus it applies only to etcd\'s /metrics (--etcd-metrics-url)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l timeout -d 'Bound on the whole run. `collect` stops collecting then (what has not answered is a gap); `scan` stops collecting at 90% of it (at most 5s before it) and leaves the rest to the analysis, which stops at the bound too: the subjects not judged by then are one Inconclusive verdict on Source/analysis (critical: the gate fails, exit 1)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l max-scrape-bytes -d 'The most bytes read of one /metrics body (kube-apiserver\'s or etcd\'s); a body past it is cut there, the series before the cut kept and the cut recorded as a gap. Units: k, M, G (1000s) or Ki, Mi, Gi (1024s)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l max-series -d 'The most series of the families extpath reads kept from one /metrics scrape; a scrape past it is cut there, like --max-scrape-bytes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l max-objects -d 'How many objects one list may bring (APIServices, webhook configurations, CRDs, Services, Endpoints, Pods, Events…): a list with more stops there, and a gap says what was cut (for a core source, an Inconclusive verdict: exit 1)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l backend-address -d 'Where to reach a backend for the TLS handshake, as `SERVICE.NAMESPACE=HOST:PORT`, or `URLHOST:PORT=HOST:PORT` for a webhook called by URL (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l etcd-metrics-url -d 'etcd\'s /metrics URL (the client URL `https://HOST:2379`, or a `--listen-metrics-urls` address): adds etcd\'s own metrics, scraped in the same window, its /health and its alarms' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l etcd-cert -d 'Client certificate for etcd (mutual TLS)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l etcd-key -d 'Key of the etcd client certificate' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l etcd-ca -d 'CA that signed etcd\'s serving certificate' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l prometheus -d 'Read the metrics from this Prometheus (base URL) instead of scraping /metrics: rates over --since, no window to wait for' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l since -d 'With --prometheus: how far back the rates reach [default: 10m]' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l until -d 'With --prometheus: the end of that window, as an RFC 3339 time [default: now]' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l prometheus-bearer-token-file -d 'File holding a bearer token for Prometheus' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l prometheus-ca -d 'CA that signed Prometheus\' serving certificate (default: the system\'s roots)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l prometheus-apiserver-selector -d 'Label matchers of kube-apiserver\'s series in Prometheus' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l prometheus-etcd-selector -d 'Label matchers of etcd\'s series in Prometheus (read unless --etcd-metrics-url is given)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l merge -d 'Merge the evidence a collection cannot gather from this bundle (repeatable): client output (kubectl, curl), log findings, Events, certificates and APF state not already collected, and metrics and health checks of targets the collection has none of. `replay serve --bundle` writes such a file; its recording time then becomes the collection time' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l listen -d 'Address to serve HTTP on: `HOST:PORT`, or `:PORT` for every interface. Port 0 picks a free one; the address bound is printed on stderr (`listening on http://…`)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l interval -d 'Time from the start of one scan to the start of the next, jittered by ±10 %. A scan that takes longer is never run twice at once: the next one starts when it ends' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l skip-rule -d 'Do not run this rule (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l set -d 'Set a rule setting, e.g. `cert_warn_days=14` (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l waivers -d 'A waivers file (docs/waivers.md): waived verdicts get no `extpath_verdict` series' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l rules -d 'A directory of additional rules (`<area>/<id>.yaml`); an id clash with a bundled rule is an error' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l insecure-skip-tls-verify -d 'If true, the server\'s certificate will not be checked for validity'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l probe-admission -d 'Send a server-side dry-run create (never stored) through each webhook that intercepts ConfigMap creation'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l pod-logs -d 'Read the last lines of the logs of the Pods behind APIServices and webhooks and keep the known error lines (needs `get` on pods/log, which deploy/rbac.yaml does not grant)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l skip-list-probe -d 'Do not list the resources of each aggregated group/version after its discovery answers, nor read one object of each CRD through its conversion webhook (the least-privilege ClusterRole in deploy/rbac.yaml does not allow those reads)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -l skip-delegation-probe -d 'Do not send the two probes that impersonate an ordinary user: each aggregated group/version\'s discovery request again as `extpath:delegation-probe` (group `system:authenticated`), which finds an extension server whose delegated authorization fails for everyone outside system:masters before a user does, and one read RBAC does not allow as `extpath:authorizer-probe`, which finds an authorization webhook after RBAC that fails. They need `impersonate` on those two users and that group (deploy/rbac.yaml grants exactly that; without it each probe is a gap); they are not sent when --as is given'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand serve" -s h -l help -d 'Print help'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -s o -l output -d 'Output format' -r -f -a "text\t'`Client Version: …` lines'
json\t'JSON (`clientVersion`, `rules`, `serverVersion`)'
yaml\t'The same as YAML'"
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l kubeconfig -d 'Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l context -d 'The name of the kubeconfig context to use (`scan` and `collect`: several, comma-separated, scan them as a fleet)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l cluster -d 'The name of the kubeconfig cluster to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l user -d 'The name of the kubeconfig user to use' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -s s -l server -d 'The address and port of the Kubernetes API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l certificate-authority -d 'Path to a cert file for the certificate authority' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l client-certificate -d 'Path to a client certificate file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l client-key -d 'Path to a client key file for TLS' -r -F
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l token -d 'Bearer token for authentication to the API server' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l tls-server-name -d 'Server name to use for server certificate validation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l as -d 'Username to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l as-group -d 'Group to impersonate for the operation (repeatable)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l as-uid -d 'UID to impersonate for the operation' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -s n -l namespace -d 'The namespace scope for namespaced probes' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l request-timeout -d 'The length of time to wait before giving up on a single server request (e.g. 1s, 2m, 3h)' -r
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l client -d 'Only this client and its rules: do not contact the API server'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -l insecure-skip-tls-verify -d 'If true, the server\'s certificate will not be checked for validity'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand version" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "scan" -d 'Collect from the live cluster and classify every extension path (read-only)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "import" -d 'Validate an evidence bundle and print it back, or build one from raw incident files'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "analyze" -d 'Classify an evidence bundle offline: one verdict per subject'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "explain" -d 'The runbook text of a rule, or what a class owns'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "rules" -d 'List, lint and test rules'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "collect" -d 'Collect an evidence bundle from the live cluster (read-only) and print it'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "why" -d 'Reproduce one request, trace its path rung by rung, and classify it (writes only as a server-side dry run: --dry-run -f FILE)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "replay" -d 'Run scenarios on the bundled reference server end to end (`replay --all`), or serve one (`replay serve SCENARIO`, `replay serve --bundle FILE`)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "serve" -d 'Run as an exporter: scan every --interval and serve the last diagnosis over HTTP (/metrics for Prometheus, /diagnosis, /healthz, /readyz)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "completions" -d 'Print shell completions (bash, zsh, fish) or the kubectl_complete-extpath shim'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "version" -d 'Print the client version, the rules it carries, and the API server\'s version when it can be reached'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and not __fish_seen_subcommand_from scan import analyze explain rules collect why replay serve completions version help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "list" -d 'List the bundled rules and those of `--rules DIR`'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "lint" -d 'Check rule files: schema, CEL, fields against the fact model, a test beside each rule'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "test" -d 'Run the `<id>.test.yaml` cases of rule directories (default `./rules`)'
complete -c kubectl-extpath -n "__fish_kubectl_extpath_using_subcommand help; and __fish_seen_subcommand_from replay" -f -a "serve" -d 'Serve one scenario, or a recorded incident (--bundle, --raw), on 127.0.0.1 until interrupted, for kubectl and other real clients'
