#!/usr/bin/env bash
# Installs the release binary, the icons, the desktop entry, the AppStream metainfo and the
# MIME type of session logs for the current user (or system-wide with PREFIX=/usr/local, run
# as root), then refreshes the desktop, MIME and icon caches when their tools exist.
#   packaging/install.sh              install (after `cargo build --release`)
#   packaging/install.sh --uninstall  remove what an install put there
# BIN=path/to/vramwarden installs another build (default: target/release/vramwarden).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-$HOME/.local}
id=io.github.vramwarden.VramWarden
sizes="16 24 32 48 64 128 256"

files() {
  echo "bin/vramwarden"
  echo "share/applications/$id.desktop"
  echo "share/metainfo/$id.metainfo.xml"
  echo "share/mime/packages/$id.xml"
  echo "share/icons/hicolor/scalable/apps/$id.svg"
  echo "share/icons/hicolor/symbolic/apps/$id-symbolic.svg"
  for s in $sizes; do echo "share/icons/hicolor/${s}x${s}/apps/$id.png"; done
}

refresh() {
  if command -v update-desktop-database >/dev/null; then
    update-desktop-database -q "$prefix/share/applications" || true
  fi
  if command -v update-mime-database >/dev/null && [ -d "$prefix/share/mime" ]; then
    update-mime-database "$prefix/share/mime" || true
  fi
  if command -v gtk-update-icon-cache >/dev/null && [ -d "$prefix/share/icons/hicolor" ]; then
    gtk-update-icon-cache -q -t -f "$prefix/share/icons/hicolor" || true
  fi
}

case "${1:-}" in
  --uninstall)
    files | while read -r f; do rm -f "$prefix/$f"; done
    # Names used before the reverse-DNS id.
    rm -f "$prefix/share/applications/vramwarden.desktop"
    for s in 32 64 128 256; do rm -f "$prefix/share/icons/hicolor/${s}x${s}/apps/vramwarden.png"; done
    rm -f "$prefix/share/icons/hicolor/scalable/apps/vramwarden.svg"
    refresh
    echo "removed from $prefix"
    exit 0
    ;;
  "") ;;
  *) echo "usage: $0 [--uninstall]" >&2; exit 2 ;;
esac

bin=${BIN:-$here/target/release/vramwarden}
[ -x "$bin" ] || { echo "$bin is missing: run cargo build --release first" >&2; exit 1; }
install -Dm755 "$bin" "$prefix/bin/vramwarden"
install -Dm644 "$here/packaging/$id.desktop" "$prefix/share/applications/$id.desktop"
install -Dm644 "$here/packaging/$id.metainfo.xml" "$prefix/share/metainfo/$id.metainfo.xml"
install -Dm644 "$here/packaging/$id.mime.xml" "$prefix/share/mime/packages/$id.xml"
install -Dm644 "$here/assets/icon.svg" "$prefix/share/icons/hicolor/scalable/apps/$id.svg"
install -Dm644 "$here/assets/icon-symbolic.svg" "$prefix/share/icons/hicolor/symbolic/apps/$id-symbolic.svg"
for s in $sizes; do
  install -Dm644 "$here/assets/icon-$s.png" "$prefix/share/icons/hicolor/${s}x${s}/apps/$id.png"
done
refresh
echo "installed into $prefix (remove with $0 --uninstall)"
