//! What a store crate builds: `cargo tree --edges normal` of this one lists
//! no runtime (ARCHITECTURE.md, "Layers").

use std::process::Command;

#[test]
fn a_store_crate_builds_no_runtime() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(cargo)
        .args(["tree", "--edges", "normal", "--prefix", "none", "--offline"])
        .args(["--manifest-path", manifest])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("cargo tree writes UTF-8");
    assert!(tree.contains("idem-contract v"), "{tree}");
    for crate_name in [
        "tokio",
        "metrics",
        "arc-swap",
        "idem-core",
        "idemkit",
        "idem-store",
    ] {
        let listed = tree
            .lines()
            .any(|line| line.starts_with(&format!("{crate_name} v")));
        assert!(
            !listed,
            "`{crate_name}` is in a store crate's tree:\n{tree}"
        );
    }
}
