#!/usr/bin/env bash
# Installs the release binary, the icon and the desktop entry for the current user
# (or system-wide with PREFIX=/usr/local, run as root).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-$HOME/.local}
install -Dm755 "$here/target/release/vramwarden" "$prefix/bin/vramwarden"
install -Dm644 "$here/packaging/vramwarden.desktop" "$prefix/share/applications/vramwarden.desktop"
install -Dm644 "$here/assets/icon.svg" "$prefix/share/icons/hicolor/scalable/apps/vramwarden.svg"
for s in 32 64 128 256; do
  install -Dm644 "$here/assets/icon-$s.png" "$prefix/share/icons/hicolor/${s}x${s}/apps/vramwarden.png"
done
echo "installed into $prefix"
