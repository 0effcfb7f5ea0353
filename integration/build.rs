//! Writes each ```rust block of the README to `$OUT_DIR/readme_N.rs`
//! (verbatim, for blocks of items) and `readme_N_block.rs` (in braces, for
//! blocks of statements), and their count to `readme_count.rs`, for
//! `tests/readme.rs` to compile every snippet as a user would paste it.

use std::path::Path;

fn main() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    println!("cargo::rerun-if-changed={}", readme.display());
    let text = std::fs::read_to_string(&readme).expect("README.md next to the workspace");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let mut count = 0;
    let mut block: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut block {
            None if trimmed.starts_with("```rust") => {
                let indent = line.len() - trimmed.len();
                block = Some((" ".repeat(indent), String::new()));
            }
            Some((_, code)) if trimmed.starts_with("```") => {
                count += 1;
                let write = |name: String, body: &str| {
                    std::fs::write(Path::new(&out).join(name), body).expect("write a snippet");
                };
                write(format!("readme_{count}.rs"), code);
                write(
                    format!("readme_{count}_block.rs"),
                    &format!("{{\n{code}}}\n"),
                );
                block = None;
            }
            Some((indent, code)) => {
                code.push_str(line.strip_prefix(indent.as_str()).unwrap_or(line));
                code.push('\n');
            }
            None => {}
        }
    }
    std::fs::write(
        Path::new(&out).join("readme_count.rs"),
        format!("{count}\n"),
    )
    .expect("write the count");
}
