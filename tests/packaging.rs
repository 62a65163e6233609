//! The packaging files agree with each other and with Cargo.toml's `[package.metadata.deb]`.

use std::path::{Path, PathBuf};

use vramwarden::host::paths::APP_ID;

const MIME: &str = "application/x-vramwarden-session";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn deb_metadata() -> toml::Value {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml parses");
    manifest["package"]["metadata"]["deb"].clone()
}

/// `[package.metadata.deb].assets` as (source, destination) pairs.
fn deb_assets() -> Vec<(String, String)> {
    assets_of(&deb_metadata())
}

/// The headless variant's metadata (`cargo deb --variant agent`).
fn agent_variant() -> toml::Value {
    deb_metadata()["variants"]["agent"].clone()
}

fn assets_of(meta: &toml::Value) -> Vec<(String, String)> {
    let assets = meta["assets"].as_array().expect("deb assets");
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

/// The files a source pattern names: itself, or for `dir/*.ext` the files of `dir` ending in
/// `.ext`.
fn matches(src: &str) -> Vec<PathBuf> {
    match src.split_once("/*") {
        Some((dir, ext)) => std::fs::read_dir(root().join(dir))
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.to_string_lossy().ends_with(ext) && p.is_file())
                    .collect()
            })
            .unwrap_or_default(),
        None => vec![root().join(src)]
            .into_iter()
            .filter(|p| p.is_file())
            .collect(),
    }
}

#[test]
fn every_packaged_source_file_exists() {
    let mut checked = 0;
    for assets in [deb_assets(), assets_of(&agent_variant())] {
        assert!(assets.len() >= 10);
        for (src, _) in &assets {
            if src.starts_with("target/") {
                continue; // build outputs: the binary and packaging/build-assets.sh's files
            }
            assert!(
                !matches(src).is_empty(),
                "{src} is named in Cargo.toml but missing"
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} source files checked");
    // The docs the README links to are packaged through the glob.
    assert!(matches("docs/*.md").len() >= 6);
    let meta = deb_metadata();
    let changelog = meta["changelog"].as_str().expect("a Debian changelog");
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
    assert!(read("src/front/gui/mod.rs").contains(&format!(".with_app_id(\"{APP_ID}\")")));
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

/// The Debian side of installing the agent. cargo-deb (3.x) writes the maintainer scripts the
/// way debhelper does: it installs `packaging/systemd/vramwarden.sysusers` as
/// usr/lib/sysusers.d/vramwarden.conf and runs systemd-sysusers in postinst before the unit's
/// part (checked by building both packages with cargo-deb 3.8 and reading their scripts). Here:
/// what cargo-deb reads is where it looks, no asset installs it a second time, the postrm is
/// POSIX sh with one marker line and purges the state, and the two packages conflict.
#[test]
fn maintainer_scripts_create_the_user_before_the_unit_starts() {
    let meta = deb_metadata();
    let units = &meta["systemd-units"];
    let dir = units["unit-scripts"].as_str().expect("unit-scripts");
    // cargo-deb's names: <package>.sysusers (the crate's name serves both packages) and
    // <unit>.service.
    let sysusers = read(&format!("{dir}vramwarden.sysusers"));
    assert!(sysusers.contains("\nu vramwarden "), "{sysusers}");
    assert!(root().join(dir).join("vramwarden-agent.service").is_file());
    assert_eq!(units["unit-name"].as_str(), Some("vramwarden-agent"));
    for assets in [deb_assets(), assets_of(&agent_variant())] {
        assert!(
            !assets
                .iter()
                .any(|(_, d)| d.starts_with("usr/lib/sysusers.d/")
                    || d.starts_with("usr/lib/systemd/system/")),
            "cargo-deb installs the sysusers file and the system unit itself"
        );
    }
    let scripts = meta["maintainer-scripts"]
        .as_str()
        .expect("maintainer-scripts");
    let postrm_path = root().join(scripts).join("postrm");
    let postrm = read(&format!("{scripts}postrm"));
    // cargo-deb replaces every occurrence of the marker, comments included.
    assert_eq!(postrm.matches("#DEBHELPER#").count(), 1);
    assert!(postrm.contains("\n#DEBHELPER#\n") && postrm.contains("\"purge\""));
    let out = std::process::Command::new("sh")
        .arg("-n")
        .arg(&postrm_path)
        .output()
        .expect("sh");
    assert!(out.status.success(), "postrm: {out:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&postrm_path)
            .expect("postrm")
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "postrm is not executable");
    }
    // The desktop package leaves the unit off, the agent package enables and starts it; both
    // need systemd-sysusers for the user.
    assert_eq!(units["enable"].as_bool(), Some(false));
    assert_eq!(units["start"].as_bool(), Some(false));
    let agent = agent_variant();
    assert_eq!(agent["systemd-units"]["enable"].as_bool(), Some(true));
    assert_eq!(agent["systemd-units"]["start"].as_bool(), Some(true));
    for m in [&meta, &agent] {
        let deps = m["depends"].as_str().expect("depends");
        assert!(deps.contains("systemd | systemd-standalone-sysusers | systemd-sysusers"));
    }
    // The variant is the headless build and conflicts with the desktop package.
    assert_eq!(agent["name"].as_str(), Some("vramwarden-agent"));
    assert_eq!(agent["default-features"].as_bool(), Some(false));
    assert_eq!(agent["conflicts"].as_str(), Some("vramwarden"));
    assert_eq!(meta["conflicts"].as_str(), Some("vramwarden-agent"));
    let gui_deps = meta["depends"].as_str().expect("depends");
    for lib in ["libxkbcommon0", "libwayland-client0", "libx11-6", "libegl1"] {
        assert!(gui_deps.contains(lib), "the window loads {lib}");
    }
    assert!(!agent["depends"].as_str().unwrap_or("").contains("libx11"));
}

/// The unit and its watchdog agree: Type=notify with WatchdogSec=, and the drop-ins that
/// widen it say what they must (CAP_KILL to signal, the real /run/user and /tmp for sockets).
#[test]
fn the_unit_and_its_drop_ins() {
    let unit = read("packaging/systemd/vramwarden-agent.service");
    for line in [
        "Type=notify",
        "WatchdogSec=30s",
        "CapabilityBoundingSet=\n",
        "ProtectHome=yes",
    ] {
        assert!(unit.contains(line), "the unit lacks {line:?}");
    }
    let kill = read("packaging/systemd/examples/act-on-other-users.conf");
    assert!(kill.contains("\nUser=root\n") && kill.contains("\nCapabilityBoundingSet=CAP_KILL\n"));
    let torch = read("packaging/systemd/examples/torch-companions.conf");
    for line in [
        "User=root",
        "CAP_DAC_OVERRIDE",
        "ProtectHome=no",
        "PrivateTmp=no",
    ] {
        assert!(torch.contains(line), "torch-companions.conf lacks {line}");
    }
    // The default port is the one the unit, the scrape config and the code use.
    let port = vramwarden::front::cli::DEFAULT_LISTEN;
    assert!(unit.contains(&format!("--listen {port}")));
    let host_port = port.rsplit(':').next().expect("port");
    assert!(read("packaging/prometheus/prometheus.yml").contains(&format!("localhost:{host_port}")));
}

/// One license statement everywhere: Cargo.toml, the license files, the .deb's copyright
/// text and the Python package.
#[test]
fn the_license_is_stated_the_same_everywhere() {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml parses");
    assert_eq!(
        manifest["package"]["license"].as_str(),
        Some("MIT OR Apache-2.0")
    );
    let mit = read("LICENSE-MIT");
    let apache = read("LICENSE-APACHE");
    assert!(mit.starts_with("MIT License") && apache.contains("Version 2.0, January 2004"));
    let deb = deb_metadata();
    let text = read(deb["license-file"][0].as_str().expect("license-file"));
    assert!(text.contains("MIT") && text.contains("/usr/share/common-licenses/Apache-2.0"));
    let py: toml::Table = read("packaging/python/pyproject.toml")
        .parse()
        .expect("pyproject");
    assert_eq!(py["project"]["license"].as_str(), Some("MIT OR Apache-2.0"));
    assert_eq!(read("packaging/python/LICENSE-MIT"), mit);
    assert_eq!(read("packaging/python/LICENSE-APACHE"), apache);
}
