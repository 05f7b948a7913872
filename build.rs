//! Embeds the bundled rules: lists `rules/**/*.yaml` (not `*.test.yaml`) into
//! `$OUT_DIR/bundled_rules.rs` as `include_str!`s, so the binary carries its rules without an extra
//! crate and a new rule file needs no code change.

use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str())
            && name.ends_with(".yaml")
            && !name.ends_with(".test.yaml")
        {
            out.push(p);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let rules = root.join("rules");
    println!("cargo:rerun-if-changed=rules");
    println!("cargo:rerun-if-changed=build.rs");
    let mut files = Vec::new();
    collect(&rules, &mut files);
    files.sort();
    let mut code = String::from("/// Bundled rule files: (repository path, content).\n");
    code.push_str("pub static BUNDLED_RULES: &[(&str, &str)] = &[\n");
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("under the manifest dir")
            .to_string_lossy()
            .replace('\\', "/");
        code.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            f.to_string_lossy()
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    std::fs::write(out.join("bundled_rules.rs"), code).expect("OUT_DIR is writable");
}
