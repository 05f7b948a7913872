//! `completions SHELL` and the hidden `__complete` protocol behind `kubectl extpath <TAB>`.
//!
//! Two ways the tool is invoked, two ways to complete it:
//!
//! * as `kubectl-extpath …`: clap_complete's bash, zsh and fish scripts (`completions bash` …),
//!   registered for the binary name `kubectl-extpath`;
//! * as `kubectl extpath …`: kubectl (≥ 1.26) completes a plugin's arguments by running an
//!   executable `kubectl_complete-extpath` from PATH with the words typed after the plugin name,
//!   the last being the word under the cursor (possibly empty), and reading cobra's `__complete`
//!   answer — one candidate per line (`value<TAB>description`), then `:<directive>`. clap cannot
//!   speak that, so the shim (`completions kubectl`, a few lines of POSIX sh) forwards to the hidden
//!   `kubectl-extpath __complete -- WORDS…`, which walks clap's own command tree ([`complete`]).
//!   The `--` matters: without it a typed `--` or `--version` would be read by `__complete` itself.
//!
//! The generated files are checked in under `completions/`; a test regenerates them from the
//! current [`super::Cli`] and fails when they differ ([`checked_in_files`]). Static candidates come
//! from the clap definitions (subcommands, flags, value enums and possible values such as classes
//! and severities, path hints). Values that only exist at run time are completed dynamically, by
//! `__complete` — so through `kubectl extpath <TAB>` — (`dynamic_values`): rule ids (`explain`,
//! `--rule`, `--skip-rule`; the bundled rules and those of a `--rules DIR` typed on the line),
//! classes for `explain`, kubeconfig contexts, clusters, users and namespaces (`--context`,
//! `--cluster`, `--user`, `-n`; from `--kubeconfig`, `$KUBECONFIG` or `~/.kube/config`, never from
//! the network), and `why`'s methods. The static shell scripts cannot run code; they complete
//! flags, subcommands and fixed values.

use std::io::Write;

use clap::{Arg, ArgAction, Args, Command, CommandFactory, ValueEnum, ValueHint};

use super::{Cli, EXIT_OK};

/// The binary's name on PATH, for which the shell scripts register.
pub const BIN_NAME: &str = "kubectl-extpath";

/// What `completions` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionTarget {
    /// Bash script for `kubectl-extpath` (source it, or drop it in bash-completion's directory).
    Bash,
    /// Zsh script (`_kubectl-extpath`, for a directory on `$fpath`).
    Zsh,
    /// Fish script (for `~/.config/fish/completions/`).
    Fish,
    /// The `kubectl_complete-extpath` shim that makes `kubectl extpath <TAB>` work: install it as
    /// an executable on PATH.
    Kubectl,
}

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell, or `kubectl` for the kubectl plugin-completion shim.
    #[arg(value_enum, value_name = "SHELL")]
    shell: CompletionTarget,
}

/// Arguments of the hidden `__complete` subcommand: the words after the plugin name, the last one
/// being completed.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// Words typed so far; the last is the one under the cursor.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    words: Vec<String>,
}

/// `completions SHELL`.
pub fn run(args: CompletionsArgs) -> anyhow::Result<u8> {
    std::io::stdout()
        .lock()
        .write_all(script(args.shell).as_bytes())?;
    Ok(EXIT_OK)
}

/// `__complete WORDS…`: cobra's answer on stdout.
pub fn run_complete(args: CompleteArgs) -> anyhow::Result<u8> {
    let answer = complete(&Cli::command(), &args.words);
    let mut out = std::io::stdout().lock();
    answer.write_cobra(&mut out)?;
    Ok(EXIT_OK)
}

/// The completion script (or shim) for `target`, generated from the current command line.
pub fn script(target: CompletionTarget) -> String {
    let shell = match target {
        CompletionTarget::Bash => clap_complete::Shell::Bash,
        CompletionTarget::Zsh => clap_complete::Shell::Zsh,
        CompletionTarget::Fish => clap_complete::Shell::Fish,
        CompletionTarget::Kubectl => return KUBECTL_SHIM.to_string(),
    };
    if shell == clap_complete::Shell::Bash {
        return bash_script();
    }
    let mut cmd = script_command(&Cli::command(), BIN_NAME);
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN_NAME, &mut buf);
    String::from_utf8(buf).expect("clap_complete writes UTF-8")
}

/// clap_complete 4.6's bash generator breaks on a hyphen in the binary name: the dispatch loop
/// and the case arms spell the subcommand state differently, so nothing after a subcommand
/// completes (clap-rs/clap#6421). So the script is generated for the hyphen-free
/// `kubectl_extpath` — every identifier in it is then consistent — and only the final
/// `complete -F … NAME` registrations are pointed at the real binary name.
fn bash_script() -> String {
    const SAFE_NAME: &str = "kubectl_extpath";
    let mut cmd = script_command(&Cli::command(), SAFE_NAME);
    let mut buf = Vec::new();
    clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, SAFE_NAME, &mut buf);
    let text = String::from_utf8(buf).expect("clap_complete writes UTF-8");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.trim_start().strip_prefix("complete -F ") {
            Some(rest) if rest.ends_with(&format!(" {SAFE_NAME}")) => {
                out.push_str(&line[..line.len() - SAFE_NAME.len()]);
                out.push_str(BIN_NAME);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The command tree the shell scripts are generated from: named `kubectl-extpath` (the CLI's
/// display name `kubectl extpath` has a space, which clap_complete's bash generator mangles into
/// case labels that never match) and without hidden subcommands (clap_complete lists them, and
/// nobody should be offered `__complete`).
fn script_command(cli: &Command, name: &'static str) -> Command {
    let mut cmd = Command::new(name)
        .bin_name(name)
        .args(cli.get_arguments().cloned())
        .subcommands(cli.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cli.get_about() {
        cmd = cmd.about(about.clone());
    }
    if cli.get_version().is_some() {
        cmd = cmd.version(crate::VERSION);
    }
    cmd
}

/// The files under `completions/`, relative to the repository root, with their content.
pub fn checked_in_files() -> Vec<(&'static str, String)> {
    vec![
        (
            "completions/kubectl-extpath.bash",
            script(CompletionTarget::Bash),
        ),
        (
            "completions/_kubectl-extpath",
            script(CompletionTarget::Zsh),
        ),
        (
            "completions/kubectl-extpath.fish",
            script(CompletionTarget::Fish),
        ),
        (
            "completions/kubectl_complete-extpath",
            script(CompletionTarget::Kubectl),
        ),
    ]
}

/// kubectl's plugin-completion hook. It prefers the `kubectl-extpath` next to itself, so a copy
/// of both in one directory works even when another version is earlier on PATH.
const KUBECTL_SHIM: &str = r#"#!/bin/sh
# kubectl_complete-extpath: completion for `kubectl extpath <TAB>` (kubectl >= 1.26).
#
# kubectl runs this executable from PATH with the words typed after `kubectl extpath`; the last
# word is the one being completed (possibly empty). The answer follows cobra's __complete
# protocol: one candidate per line ("value<TAB>description"), then ":<directive>".
# kubectl-extpath implements it in its hidden `__complete` subcommand; this shim forwards to it.
#
# Install: copy this file onto PATH next to kubectl-extpath and make it executable.
# Generated by `kubectl extpath completions kubectl`; do not edit.
here=$(dirname -- "$0")
if [ -x "$here/kubectl-extpath" ]; then
    exec "$here/kubectl-extpath" __complete -- "$@"
fi
exec kubectl-extpath __complete -- "$@"
"#;

/// cobra's `ShellCompDirectiveDefault`: the shell may fall back to file names.
pub const DIRECTIVE_DEFAULT: u32 = 0;
/// cobra's `ShellCompDirectiveNoFileComp`: no file names; only the candidates given.
pub const DIRECTIVE_NO_FILE_COMP: u32 = 4;
/// cobra's `ShellCompDirectiveFilterDirs`: complete directory names only.
pub const DIRECTIVE_FILTER_DIRS: u32 = 16;

/// One candidate, with the help text shells show beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The word to insert.
    pub value: String,
    /// Its one-line description, if any.
    pub help: Option<String>,
}

/// The answer to one `__complete` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Candidates in the order clap declares them.
    pub candidates: Vec<Candidate>,
    /// cobra's directive bits (`DIRECTIVE_*`).
    pub directive: u32,
}

impl Completion {
    /// Write the answer the way cobra's `__complete` does.
    ///
    /// # Errors
    /// The writer's I/O errors.
    pub fn write_cobra(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for c in &self.candidates {
            match &c.help {
                Some(h) => writeln!(out, "{}\t{h}", c.value)?,
                None => writeln!(out, "{}", c.value)?,
            }
        }
        writeln!(out, ":{}", self.directive)
    }
}

/// Complete `words` (everything typed after the program or plugin name; the last word is the one
/// under the cursor) against a clap command tree.
///
/// Walks the words like clap's parser would — subcommands, `--long[=value]`, `-s value`/`-svalue`
/// clusters, `--`, positionals — then offers, for the last word: the values of the option that
/// expects one (value enums; file names for path arguments), the flags of the current command
/// when the word starts with `-`, and otherwise its subcommands and the values of the positional
/// at that place. Hidden subcommands, flags and values are never offered, nor flags already given
/// that cannot repeat.
pub fn complete(root: &Command, words: &[String]) -> Completion {
    let mut root = root.clone();
    root.build();
    let (current_word, typed) = match words.split_last() {
        Some((last, rest)) => (last.as_str(), rest),
        None => ("", &[][..]),
    };

    let mut cmd: &Command = &root;
    let mut pending: Option<&Arg> = None;
    let mut positionals = 0usize;
    let mut after_double_dash = false;
    let mut used: Vec<&str> = Vec::new();

    for word in typed {
        if let Some(arg) = pending.take() {
            used.push(arg.get_id().as_str());
            continue;
        }
        if after_double_dash {
            positionals += 1;
            continue;
        }
        if word == "--" {
            after_double_dash = true;
            continue;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline_value) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            if let Some(arg) = find_long(cmd, name) {
                used.push(arg.get_id().as_str());
                if takes_value(arg) && !inline_value {
                    pending = Some(arg);
                }
            }
            continue;
        }
        if let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (i, c) in cluster.char_indices() {
                let Some(arg) = cmd.get_arguments().find(|a| a.get_short() == Some(c)) else {
                    break;
                };
                used.push(arg.get_id().as_str());
                if takes_value(arg) {
                    // `-ojson` carries its value; a bare `-o` takes the next word.
                    if i + c.len_utf8() == cluster.len() {
                        pending = Some(arg);
                    }
                    break;
                }
            }
            continue;
        }
        if positionals == 0
            && let Some(sub) = cmd.find_subcommand(word)
        {
            cmd = sub;
            used.clear();
            continue;
        }
        positionals += 1;
    }

    let line = Line { words: typed };
    if let Some(arg) = pending {
        return values_of(arg, current_word, "", &line);
    }
    if !after_double_dash
        && let Some((name, value)) = current_word
            .strip_prefix("--")
            .and_then(|long| long.split_once('='))
    {
        return match find_long(cmd, name) {
            Some(arg) if takes_value(arg) => values_of(arg, value, &format!("--{name}="), &line),
            _ => no_candidates(),
        };
    }
    if !after_double_dash && current_word.starts_with('-') {
        let candidates = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_positional())
            .filter(|a| repeatable(a) || !used.contains(&a.get_id().as_str()))
            .filter_map(|a| a.get_long().map(|l| (a, format!("--{l}"))))
            .filter(|(_, flag)| flag.starts_with(current_word))
            .map(|(a, flag)| Candidate {
                value: flag,
                help: a.get_help().map(|h| first_line(&h.to_string())),
            })
            .collect();
        return Completion {
            candidates,
            directive: DIRECTIVE_NO_FILE_COMP,
        };
    }

    let mut answer = no_candidates();
    if positionals == 0 && !after_double_dash {
        answer.candidates.extend(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name().starts_with(current_word))
                .map(|s| Candidate {
                    value: s.get_name().to_string(),
                    help: s.get_about().map(|h| first_line(&h.to_string())),
                }),
        );
    }
    if let Some(arg) = positional_at(cmd, positionals) {
        let values = values_of(arg, current_word, "", &line);
        answer.candidates.extend(values.candidates);
        if answer.candidates.is_empty() {
            answer.directive = values.directive;
        }
    }
    answer
}

fn no_candidates() -> Completion {
    Completion {
        candidates: Vec::new(),
        directive: DIRECTIVE_NO_FILE_COMP,
    }
}

fn find_long<'a>(cmd: &'a Command, name: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long_and_visible_aliases()
            .is_some_and(|names| names.contains(&name))
    })
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

fn repeatable(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Append | ArgAction::Count)
}

/// The positional that the `index`-th positional word fills (a trailing multi-value positional
/// keeps taking words).
fn positional_at(cmd: &Command, index: usize) -> Option<&Arg> {
    let positionals: Vec<&Arg> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    positionals.get(index).copied().or_else(|| {
        positionals
            .last()
            .copied()
            .filter(|a| a.get_num_args().is_some_and(|r| r.max_values() > 1))
    })
}

/// The words typed before the one being completed, for values that depend on them (`--rules DIR`,
/// `--kubeconfig FILE`).
struct Line<'a> {
    words: &'a [String],
}

impl Line<'_> {
    /// The value given to `--name` (as `--name VALUE` or `--name=VALUE`), the last one wins.
    fn flag(&self, name: &str) -> Option<&str> {
        let long = format!("--{name}");
        let mut found = None;
        for (i, w) in self.words.iter().enumerate() {
            if *w == long {
                found = self.words.get(i + 1).map(String::as_str);
            } else if let Some(v) = w.strip_prefix(&format!("{long}=")) {
                found = Some(v);
            }
        }
        found
    }
}

/// Candidates for one argument's value: its possible values, the values only known at run time
/// ([`dynamic_values`]), or file/directory names when it is a path.
fn values_of(arg: &Arg, typed: &str, prefix: &str, line: &Line) -> Completion {
    // `scan --context a,b,<TAB>`: a fleet's contexts are a comma-separated list; complete its
    // last name, keeping the names before it and leaving out those already listed.
    if arg.get_id().as_str() == "context"
        && let Some((head, tail)) = typed.rsplit_once(',')
    {
        let listed: Vec<&str> = head.split(',').collect();
        let head = format!("{prefix}{head},");
        let candidates = kubeconfig_values("context", line)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.value.starts_with(tail) && !listed.contains(&c.value.as_str()))
            .map(|c| Candidate {
                value: format!("{head}{}", c.value),
                help: c.help,
            })
            .collect();
        return Completion {
            candidates,
            directive: DIRECTIVE_NO_FILE_COMP,
        };
    }
    let mut candidates: Vec<Candidate> = arg
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(typed))
        .map(|v| Candidate {
            value: format!("{prefix}{}", v.get_name()),
            help: v.get_help().map(|h| first_line(&h.to_string())),
        })
        .collect();
    if let Some(dynamic) = dynamic_values(arg.get_id().as_str(), line) {
        candidates.extend(
            dynamic
                .into_iter()
                .filter(|c| c.value.starts_with(typed))
                .map(|c| Candidate {
                    value: format!("{prefix}{}", c.value),
                    help: c.help,
                }),
        );
        return Completion {
            candidates,
            directive: DIRECTIVE_NO_FILE_COMP,
        };
    }
    let directive = if !candidates.is_empty() {
        DIRECTIVE_NO_FILE_COMP
    } else {
        match arg.get_value_hint() {
            ValueHint::AnyPath | ValueHint::FilePath | ValueHint::ExecutablePath => {
                DIRECTIVE_DEFAULT
            }
            ValueHint::DirPath => DIRECTIVE_FILTER_DIRS,
            _ => DIRECTIVE_NO_FILE_COMP,
        }
    };
    Completion {
        candidates,
        directive,
    }
}

/// Values known only at run time, by the argument's id: `None` for arguments that have none.
fn dynamic_values(id: &str, line: &Line) -> Option<Vec<Candidate>> {
    match id {
        "rules" | "skip_rules" => Some(rule_ids(line)),
        // `explain RULE|CLASS`.
        "topic" => {
            let mut c = rule_ids(line);
            c.extend(crate::engine::Class::ALL.map(|k| Candidate {
                value: k.as_str().to_string(),
                help: Some(super::explain::class_help(k).to_string()),
            }));
            Some(c)
        }
        // `why METHOD PATH`: writes go through --dry-run -f FILE.
        "method" => Some(
            [
                ("GET", "read one object or a discovery document"),
                ("LIST", "list a collection"),
                ("WATCH", "watch a collection for --watch-for"),
            ]
            .map(|(m, h)| Candidate {
                value: m.to_string(),
                help: Some(h.to_string()),
            })
            .to_vec(),
        ),
        "context" | "cluster" | "user" | "namespace" => {
            Some(kubeconfig_values(id, line).unwrap_or_default())
        }
        _ => None,
    }
}

/// The bundled rule ids and those of a `--rules DIR` on the line, with their class and severity.
fn rule_ids(line: &Line) -> Vec<Candidate> {
    let (mut set, _) = crate::engine::RuleSet::bundled_all();
    if let Some(dir) = line.flag("rules") {
        let (more, _) = crate::engine::RuleSet::load_dir_all(std::path::Path::new(dir));
        for r in more.rules {
            let _ = set.extend(crate::engine::RuleSet { rules: vec![r] });
        }
    }
    set.rules
        .iter()
        .map(|r| Candidate {
            value: r.id.clone(),
            help: Some(format!(
                "{} {} on {}",
                r.severity,
                r.class,
                r.subject_text()
            )),
        })
        .collect()
}

/// Contexts, clusters, users or the namespaces of contexts, from the kubeconfig kubectl would
/// read: `--kubeconfig` on the line, else every file of `$KUBECONFIG`, else `~/.kube/config`.
/// Unreadable files give nothing; completion never fails.
fn kubeconfig_values(id: &str, line: &Line) -> Option<Vec<Candidate>> {
    let paths: Vec<std::path::PathBuf> = match line.flag("kubeconfig") {
        Some(p) => vec![p.into()],
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(list) => std::env::split_paths(&list).collect(),
            None => vec![std::env::home_dir()?.join(".kube").join("config")],
        },
    };
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |value: &str, help: Option<String>| {
        if !value.is_empty() && !out.iter().any(|c| c.value == value) {
            out.push(Candidate {
                value: value.to_string(),
                help,
            });
        }
    };
    for path in paths {
        let Ok(kc) = kube::config::Kubeconfig::read_from(&path) else {
            continue;
        };
        match id {
            "context" => {
                for c in &kc.contexts {
                    let help = c.context.as_ref().map(|x| {
                        format!(
                            "cluster {}, namespace {}",
                            x.cluster,
                            x.namespace.as_deref().unwrap_or("default")
                        )
                    });
                    push(&c.name, help);
                }
            }
            "cluster" => kc.clusters.iter().for_each(|c| push(&c.name, None)),
            "user" => kc.auth_infos.iter().for_each(|u| push(&u.name, None)),
            _ => {
                for c in &kc.contexts {
                    if let Some(ns) = c.context.as_ref().and_then(|x| x.namespace.as_deref()) {
                        push(ns, Some(format!("namespace of context {}", c.name)));
                    }
                }
            }
        }
    }
    Some(out)
}

/// Shells show one line of help: the first sentence line of the doc comment, without its period.
fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .trim()
        .trim_end_matches('.')
        .to_string()
}
