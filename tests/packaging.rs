//! The packaging files agree with each other and with Cargo.toml's `[package.metadata.deb]`.

use std::path::{Path, PathBuf};

use vramwarden::notify::APP_ID;

const MIME: &str = "application/x-vramwarden-session";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `[package.metadata.deb].assets` as (source, destination) pairs.
fn deb_assets() -> Vec<(String, String)> {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml parses");
    let assets = manifest["package"]["metadata"]["deb"]["assets"]
        .as_array()
        .expect("deb assets");
    assets
        .iter()
        .map(|a| {
            let a = a.as_array().expect("[source, dest, mode]");
            assert_eq!(a.len(), 3, "{a:?}");
            (
                a[0].as_str().expect("source").to_string(),
                a[1].as_str().expect("dest").to_string(),
            )
        })
        .collect()
}

#[test]
fn every_packaged_source_file_exists() {
    let assets = deb_assets();
    assert!(assets.len() >= 10);
    let mut checked = 0;
    for (src, _) in &assets {
        if src.starts_with("target/") {
            continue; // build outputs: the binary and packaging/build-assets.sh's files
        }
        assert!(
            root().join(src).is_file(),
            "{src} is named in Cargo.toml but missing"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} source files checked");
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml parses");
    let changelog = manifest["package"]["metadata"]["deb"]["changelog"]
        .as_str()
        .expect("a Debian changelog");
    assert!(read(changelog).starts_with(&format!("vramwarden ({}-", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn the_generated_assets_are_the_ones_build_assets_writes() {
    let script = read("packaging/build-assets.sh");
    for (src, _) in deb_assets() {
        if let Some(name) = src.strip_prefix("target/assets/") {
            assert!(
                script.contains(name),
                "build-assets.sh does not write {name}"
            );
        }
    }
}

#[test]
fn icons_are_installed_at_the_size_their_folder_names() {
    let mut sizes = Vec::new();
    for (src, dest) in deb_assets() {
        let Some(dir) = dest.strip_prefix("usr/share/icons/hicolor/") else {
            continue;
        };
        let size = dir.split('/').next().expect("size folder");
        let file = Path::new(&dest)
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        assert!(
            file.starts_with(APP_ID),
            "icon {dest} is not named after the app id"
        );
        if let Some((w, h)) = size.split_once('x') {
            let png = std::fs::read(root().join(&src)).expect("icon");
            assert_eq!(&png[1..4], b"PNG", "{src}");
            let dim = |o: usize| u32::from_be_bytes([png[o], png[o + 1], png[o + 2], png[o + 3]]);
            assert_eq!(dim(16).to_string(), w, "{src} width");
            assert_eq!(dim(20).to_string(), h, "{src} height");
            sizes.push(dim(16));
        }
    }
    for needed in [16, 24, 32, 48, 64, 128, 256] {
        assert!(sizes.contains(&needed), "no {needed}x{needed} icon");
    }
}

#[test]
fn desktop_file_metainfo_and_mime_xml_agree_on_the_app_id_and_mime_type() {
    let desktop = read(&format!("packaging/{APP_ID}.desktop"));
    let entry = |key: &str| {
        desktop
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}="))
            .to_string()
    };
    assert_eq!(entry("Icon"), APP_ID);
    assert_eq!(entry("StartupWMClass"), APP_ID);
    assert!(entry("MimeType").split(';').any(|m| m == MIME));
    assert!(
        entry("Exec").contains("%f"),
        "the file manager passes the file"
    );
    // One main category (the desktop menu spec's hint).
    let main = [
        "AudioVideo",
        "Audio",
        "Video",
        "Development",
        "Education",
        "Game",
        "Graphics",
        "Network",
        "Office",
        "Science",
        "Settings",
        "System",
        "Utility",
    ];
    let cats = entry("Categories");
    assert_eq!(
        cats.split(';').filter(|c| main.contains(c)).count(),
        1,
        "{cats}"
    );

    let meta = read(&format!("packaging/{APP_ID}.metainfo.xml"));
    assert!(meta.contains(&format!("<id>{APP_ID}</id>")));
    assert!(meta.contains(&format!(
        "<launchable type=\"desktop-id\">{APP_ID}.desktop</launchable>"
    )));
    assert!(meta.contains(&format!("<mediatype>{MIME}</mediatype>")));
    assert!(meta.contains("<binary>vramwarden</binary>"));
    assert!(
        meta.contains(&format!(
            "<release version=\"{}\"",
            env!("CARGO_PKG_VERSION")
        )),
        "the metainfo lacks a release entry for this version"
    );

    let mime = read(&format!("packaging/{APP_ID}.mime.xml"));
    assert!(mime.contains(&format!("<mime-type type=\"{MIME}\">")));
    assert!(mime.contains("<glob pattern=\"*.vwlog\"/>"));

    // The window's app id (Wayland) / WM class (X11) is the same id.
    assert!(read("src/ui/mod.rs").contains(&format!(".with_app_id(\"{APP_ID}\")")));
    // The .deb and install.sh install the same files under the id.
    let deb: Vec<String> = deb_assets().into_iter().map(|a| a.0).collect();
    for f in [
        format!("packaging/{APP_ID}.desktop"),
        format!("packaging/{APP_ID}.metainfo.xml"),
        format!("packaging/{APP_ID}.mime.xml"),
    ] {
        assert!(deb.contains(&f), "the .deb lacks {f}");
    }
    assert!(read("packaging/install.sh").contains(&format!("id={APP_ID}")));
}
