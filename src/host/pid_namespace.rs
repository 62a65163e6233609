//! Whether vramwarden runs in the machine's own PID namespace. The driver lists processes by
//! their PIDs in that namespace; inside a container with a PID namespace of its own, `/proc`
//! numbers them differently, so a listed PID missing from `/proc` says nothing about it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The inode of the initial PID namespace (the kernel's `PROC_PID_INIT_INO`), fixed since
/// Linux 3.8.
const INITIAL_PID_NAMESPACE_INO: u64 = 0xEFFF_FFFC;

/// True when the process whose `ns/pid` link is under `proc_self` (normally `/proc/self`) is in
/// the initial PID namespace; also true when it cannot be read (a kernel without namespaces).
pub(crate) fn is_initial(proc_self: &Path) -> bool {
    std::fs::metadata(proc_self.join("ns/pid"))
        .map_or(true, |m| m.ino() == INITIAL_PID_NAMESPACE_INO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_link_counts_as_initial_and_this_process_is_judged_by_its_inode() {
        assert!(is_initial(Path::new("/nonexistent")));
        let ino = std::fs::metadata("/proc/self/ns/pid")
            .expect("Linux has /proc/self/ns/pid")
            .ino();
        assert_eq!(
            is_initial(Path::new("/proc/self")),
            ino == INITIAL_PID_NAMESPACE_INO
        );
    }
}
