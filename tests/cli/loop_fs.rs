//! A file system of its own in a loop image (btrfs, XFS with reflinks, ext4), for the tests
//! and benches that need one: made with `mkfs` (its package installed if missing),
//! mounted, and unmounted and deleted when dropped. Std only: the benches include it too.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted loop image.
pub struct LoopFs {
    /// Where it is mounted.
    pub mount: PathBuf,
    image: PathBuf,
}

/// `mkfs.KIND` and its arguments, and the Debian package that has it.
fn mkfs(kind: &str) -> (String, &'static [&'static str], &'static str) {
    let (args, package): (&'static [&'static str], _) = match kind {
        "btrfs" => (&["-q", "-f"], "btrfs-progs"),
        "xfs" => (&["-q", "-f", "-m", "reflink=1"], "xfsprogs"),
        "ext4" => (&["-q", "-F"], "e2fsprogs"),
        other => panic!("no mkfs known for {other}"),
    };
    (format!("mkfs.{kind}"), args, package)
}

fn found(program: &str) -> bool {
    Command::new(program)
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `cmd`; its stderr if it fails.
fn ran(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl LoopFs {
    /// A new `kind` file system (`btrfs`, `xfs` with reflinks, `ext4`) of `size` bytes
    /// (a sparse image beside `at`) mounted at `at`, a folder made here; why not, if it
    /// cannot be made (no loop devices, not root).
    pub fn new(at: &Path, kind: &str, size: u64) -> Result<LoopFs, String> {
        let (program, args, package) = mkfs(kind);
        if !found(&program) {
            let install = || {
                Command::new("apt-get")
                    .args(["install", "-y", "-qq", "--no-install-recommends", package])
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !install() {
                let _ = Command::new("apt-get").args(["update", "-qq"]).status();
                install();
            }
            if !found(&program) {
                return Err(format!("{program} is needed: apt-get install {package}"));
            }
        }
        let image = at.with_extension("img");
        let file =
            std::fs::File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        file.set_len(size)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        ran(Command::new(&program).args(args).arg(&image))?;
        std::fs::create_dir_all(at).map_err(|e| format!("{}: {e}", at.display()))?;
        let fs = LoopFs {
            mount: at.to_owned(),
            image,
        };
        ran(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&fs.image)
            .arg(&fs.mount))?;
        Ok(fs)
    }

    /// Blocks used on it, as `statvfs` counts them, after its data is on disk.
    pub fn used_bytes(&self) -> u64 {
        let _ = Command::new("sync").arg("-f").arg(&self.mount).status();
        let out = Command::new("stat")
            .args(["-f", "-c", "%S %b %f"])
            .arg(&self.mount)
            .output()
            .expect("stat -f runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let n: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse().expect("stat -f prints numbers"))
            .collect();
        n[0] * (n[1] - n[2])
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut cmd = Command::new("umount");
            if lazy {
                cmd.arg("-l");
            }
            cmd.arg(&self.mount)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        // A process the test killed may still hold a file open for a moment.
        if !umount(false) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if !umount(false) {
                umount(true);
            }
        }
        let _ = std::fs::remove_dir(&self.mount);
        let _ = std::fs::remove_file(&self.image);
    }
}
