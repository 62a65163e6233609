#!/usr/bin/env bash
# Writes the generated packaging files into target/assets/ by running the built binary:
# the man page (vramwarden.1.gz) and the shell completions (bash, zsh, fish). The .deb
# (cargo-deb, see [package.metadata.deb] in Cargo.toml) and install.sh pick them up there.
#   cargo build --release && packaging/build-assets.sh && cargo deb --no-build
# BIN=path/to/vramwarden overrides the binary (default: $CARGO_TARGET_DIR or target, then
# release/vramwarden).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-${CARGO_TARGET_DIR:-$here/target}/release/vramwarden}
out=$here/target/assets
[ -x "$bin" ] || { echo "$bin is missing: run cargo build --release first" >&2; exit 1; }
mkdir -p "$out"
"$bin" man | gzip -9n > "$out/vramwarden.1.gz"
"$bin" completions bash > "$out/vramwarden.bash"
"$bin" completions zsh > "$out/_vramwarden"
"$bin" completions fish > "$out/vramwarden.fish"
echo "wrote $(ls "$out" | tr '\n' ' ')into $out"
