#!/usr/bin/env bash
# Builds both Debian packages into target/debian/ (needs cargo-deb 3.x: `cargo install cargo-deb
# --locked`; it writes the maintainer scripts, the sysusers and systemd parts included):
#   vramwarden        the window, the agent and the command line (the `gui` feature)
#   vramwarden-agent  the same without the window, for GPU servers (--no-default-features)
# The two hold the same /usr/bin/vramwarden and conflict; install one of them:
#   sudo apt install ./target/debian/vramwarden_*.deb          # a desktop
#   sudo apt install ./target/debian/vramwarden-agent_*.deb    # a GPU server
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
packaging/build-assets.sh
cargo deb --no-build
cargo build --release --locked --no-default-features
packaging/build-assets.sh
cargo deb --no-build --variant agent
ls -l "${CARGO_TARGET_DIR:-target}"/debian/*.deb
