//! `cairn mcp` driven by a real MCP client: the official Python SDK (`mcp` from PyPI),
//! installed into a virtualenv under the target directory on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Env;

/// The MCP SDK version the test is written against.
const MCP_SDK: &str = "mcp==2.3.0";

fn python_with_mcp() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
    let python = venv.join("bin/python");
    let ready = venv.join(format!(".installed-{MCP_SDK}"));
    if !ready.exists() {
        let _ = std::fs::remove_dir_all(&venv);
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 is needed for the MCP client test");
        assert!(status.success(), "python3 -m venv failed");
        let out = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                MCP_SDK,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pip install {MCP_SDK} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&ready, "").unwrap();
    }
    python
}

#[test]
fn the_python_mcp_sdk_lists_and_calls_cairn_tools() {
    let env = Env::new();
    let python = python_with_mcp();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/client.py");
    let work = env.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
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
    assert_eq!(summary["tools"].as_array().unwrap().len(), 12);
}
