//! `cairn mcp` driven by a real MCP client: the official Python SDK (`mcp` from PyPI),
//! installed into a virtualenv under the target directory on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Env, python_venv};

/// The MCP SDK version the test is written against.
const MCP_SDK: &str = "mcp==2.3.0";

fn python_with_mcp() -> PathBuf {
    python_venv("mcp-venv", MCP_SDK)
}

#[test]
fn the_python_mcp_sdk_lists_and_calls_cairn_tools() {
    let env = Env::new();
    let python = python_with_mcp();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/client.py");
    let work = env.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let remote = format!("file://{}", env.path().join("remote"));
    let added = env.cairn(&["remote", "add", "origin", &remote]);
    assert!(added.status.success(), "{}", crate::support::stderr(&added));
    let out = Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_cairn"))
        .arg(env.store().as_str())
        .arg(work.as_str())
        .env_remove("CAIRN_STORE")
        .env("HOME", env.path().join("home").as_str())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "MCP client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["tools"].as_array().unwrap().len(), 23);
}
