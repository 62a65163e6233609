//! The crate's architecture, read from its sources:
//!
//! - `src/` has the folders of the layers below and at most four loose files;
//! - a folder never uses one on a higher floor (`model` lowest, `front` highest);
//! - the front ends (`front/cli`, `front/agent`, `front/gui`) never use one another;
//! - inside every folder, no entry (file or sub-folder) depends on one that depends on it; a
//!   folder's `mod.rs` is an entry of its own (`mod`), so a child that uses what its folder's
//!   `mod.rs` defines while that `mod.rs` uses the child is a circle too;
//! - the entries of `act/` and `engine/` stand on floors of their own (sub-floors), and none
//!   uses one on a higher floor.
//!
//! Every `crate::…`, `super::…` and `self::…` path in code is read, and in a file that declares
//! child modules (`mod x;`) every path that starts with a child's name; grouped imports (`use
//! crate::{a::b, c::{d, e}}`) included; comment lines and `#[cfg(test)]` blocks are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders of `src/`, lowest floor first.
const FLOORS: &[&str] = &[
    "model", "host", "session", "source", "detect", "act", "engine", "link", "front",
];
/// The front ends, which never use one another.
const FRONT_ENDS: &[&str] = &["cli", "agent", "gui"];
/// The entries of `src/act/`, lowest floor first (`mod` is `act/mod.rs`).
const ACT_FLOORS: &[&str] = &["torch", "park", "rules", "guard", "mod"];
/// The entries of `src/engine/`, lowest floor first (`mod` is `engine/mod.rs`).
const ENGINE_FLOORS: &[&str] = &[
    "settings",
    "events",
    "view",
    "state",
    "sightings",
    "command",
    "shared",
    "stages",
    "pipeline",
    "builder",
    "tick_loop",
    "sampler",
    "replay_halves",
    "replay",
    "guard_replay",
    "import",
    "past_cache",
    "mod",
];
/// The entry a folder's `mod.rs` is in that folder's graph.
const MOD: &str = "mod";
/// Circles through a folder's `mod.rs` not cut yet (folder: entries), each to be taken off
/// this list when it is cut; any other circle fails.
const KNOWN_CIRCLES: &[&str] = &[];

type Module = Vec<String>;
/// Per folder (a module path), its entries' edges: entry → entries it uses.
type Edges = BTreeMap<Module, BTreeMap<String, BTreeSet<String>>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src is readable").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/act/rules/action.rs` → `[act, rules, action]`; a `mod.rs` is its folder's module;
/// `lib.rs` and `main.rs` are the root.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Module = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if !matches!(stem, "mod" | "lib" | "main") {
            parts.push(stem.to_string());
        }
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths written at the start of `s`: `a::b::c`, or with groups `a::{b, c::{d, e}}`.
fn expand(s: &str) -> Vec<Module> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('{') {
        let mut out = Vec::new();
        let (mut depth, mut start) = (0usize, 0usize);
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.extend(expand(&rest[start..i]));
                    return out;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(expand(&rest[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        return out;
    }
    let name: String = s.chars().take_while(|c| is_ident(*c)).collect();
    if name.is_empty() {
        return Vec::new();
    }
    let after = &s[name.len()..];
    match after.strip_prefix("::") {
        Some(tail) => {
            let mut subs = expand(tail);
            if subs.is_empty() {
                subs.push(Vec::new());
            }
            for p in &mut subs {
                p.insert(0, name.clone());
            }
            subs
        }
        None => vec![vec![name]],
    }
}

/// The code of a file without comment lines and its `#[cfg(test)]` part.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?.trim();
            name.chars().all(is_ident).then(|| name.to_string())
        })
        .collect()
}

/// The absolute module paths a file's code names (`crate::…`, `super::…`, `self::…`, and a
/// path that starts with one of `children`, the modules the file declares).
fn named_paths(module: &Module, code: &str, children: &[String]) -> Vec<Module> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("self::") {
        if code[..i].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        for p in expand(&code[i + "self::".len()..]) {
            out.push(module.iter().cloned().chain(p).collect());
        }
    }
    for child in children {
        let head = format!("{child}::");
        for (i, _) in code.match_indices(&head) {
            if code[..i].ends_with(|c: char| is_ident(c) || c == ':') {
                continue;
            }
            for p in expand(&code[i..]) {
                out.push(module.iter().cloned().chain(p).collect());
            }
        }
    }
    for (i, _) in code.match_indices("crate::") {
        if code[..i].ends_with(|c: char| is_ident(c) || c == '$') {
            continue;
        }
        out.extend(expand(&code[i + "crate::".len()..]));
    }
    for (i, _) in code.match_indices("super::") {
        if code[..i].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        // `super` is the parent of the file's module (a `mod.rs` is its folder's module).
        let mut base = module.clone();
        let mut rest = &code[i..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        for p in expand(rest) {
            out.push(base.iter().cloned().chain(p).collect());
        }
    }
    out
}

/// The deepest known module a path names (`act::rules::action::Outcome` → `act::rules::action`).
fn resolve(known: &BTreeSet<Module>, path: &Module) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| known.contains(m))
}

/// A module's node in its folder's graph: a folder's module (its `mod.rs`) is the entry
/// [`MOD`] inside that folder; any other module is itself.
fn node(folders: &BTreeSet<Module>, m: &Module) -> Module {
    let mut n = m.clone();
    if folders.contains(m) {
        n.push(MOD.to_string());
    }
    n
}

/// Every folder's edges between its entries.
fn edges() -> Edges {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: Vec<(Module, String)> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).expect("readable");
            (module_of(&src, f), code_of(&text))
        })
        .collect();
    let known: BTreeSet<Module> = modules.iter().map(|(m, _)| m.clone()).collect();
    // The modules that are folders (a `mod.rs`; the root is left out: lib.rs is no entry).
    let folders: BTreeSet<Module> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "mod.rs"))
        .map(|f| module_of(&src, f))
        .collect();
    let mut out = Edges::new();
    for (module, code) in &modules {
        let from = node(&folders, module);
        for path in named_paths(module, code, &declared_children(code)) {
            let Some(to) = resolve(&known, &path) else {
                continue;
            };
            let to = node(&folders, &to);
            let k = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if k < from.len() && k < to.len() {
                out.entry(from[..k].to_vec())
                    .or_default()
                    .entry(from[k].clone())
                    .or_default()
                    .insert(to[k].clone());
            }
        }
    }
    out
}

/// Strongly connected components of more than one node (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let low = t.low[v].min(t.low[w]);
                t.low.insert(v, low);
            } else if t.on.contains(w) {
                let low = t.low[v].min(t.index[w]);
                t.low.insert(v, low);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn src_has_the_floors_and_few_loose_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut folders = BTreeSet::new();
    let mut loose = Vec::new();
    for e in std::fs::read_dir(&src).expect("src").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() {
            folders.insert(name);
        } else {
            loose.push(name);
        }
    }
    let want: BTreeSet<String> = FLOORS.iter().map(|s| s.to_string()).collect();
    assert_eq!(folders, want, "src/'s folders");
    assert!(loose.len() <= 4, "loose files in src/: {loose:?}");
}

#[test]
fn no_folder_uses_a_higher_floor() {
    let e = edges();
    let top = &e[&Vec::new()];
    // The reading works: uses known to exist are seen.
    assert!(top["engine"].contains("source"), "{top:?}");
    assert!(top["front"].contains("link"), "{top:?}");
    let floor = |m: &str| FLOORS.iter().position(|f| *f == m);
    let mut up = Vec::new();
    for (from, tos) in top {
        for to in tos {
            if let (Some(a), Some(b)) = (floor(from), floor(to)) {
                if b > a {
                    up.push(format!("{from} → {to}"));
                }
            }
        }
    }
    assert!(up.is_empty(), "uses of a higher floor: {up:?}");
}

#[test]
fn front_ends_never_use_one_another() {
    let e = edges();
    let front = e
        .get(&vec!["front".to_string()])
        .cloned()
        .unwrap_or_default();
    let crossing: Vec<String> = front
        .iter()
        .filter(|(from, _)| FRONT_ENDS.contains(&from.as_str()))
        .flat_map(|(from, tos)| {
            tos.iter()
                .filter(|to| FRONT_ENDS.contains(&to.as_str()))
                .map(move |to| format!("{from} → {to}"))
        })
        .collect();
    assert!(
        crossing.is_empty(),
        "front ends using one another: {crossing:?}"
    );
}

#[test]
fn no_circle_in_any_folder() {
    let e = edges();
    // The reading works inside folders too: known uses between siblings are seen.
    let rules = &e[&vec!["act".to_string(), "rules".to_string()]];
    assert!(rules["action"].contains("eval"), "{rules:?}");
    let gui = &e[&vec!["front".to_string(), "gui".to_string()]];
    assert!(gui["app"].contains("graph"), "{gui:?}");
    let found: Vec<(String, String)> = e
        .iter()
        .flat_map(|(folder, g)| {
            circles(g).into_iter().map(move |c| {
                // The uses between the circle's entries, to say where to cut it.
                let uses: Vec<String> = c
                    .iter()
                    .flat_map(|a| {
                        g.get(a)
                            .into_iter()
                            .flatten()
                            .filter(|b| c.contains(b))
                            .map(move |b| format!("{a} → {b}"))
                    })
                    .collect();
                let name = format!("src/{}: {}", folder.join("/"), c.join(" ↔ "));
                (name, uses.join(", "))
            })
        })
        .collect();
    let new: Vec<String> = found
        .iter()
        .filter(|(name, _)| !KNOWN_CIRCLES.contains(&name.as_str()))
        .map(|(name, uses)| format!("{name} ({uses})"))
        .collect();
    assert!(new.is_empty(), "circles: {new:#?}");
    let cut: Vec<&&str> = KNOWN_CIRCLES
        .iter()
        .filter(|k| !found.iter().any(|(name, _)| name == **k))
        .collect();
    assert!(
        cut.is_empty(),
        "cut, to be taken off KNOWN_CIRCLES: {cut:?}"
    );
}

#[test]
fn grouped_and_relative_paths_are_read() {
    let code = "use crate::{model::history::History, act::{rules::eval, park}};\n\
                use super::super::sockets::runtime_dir;\nlet x = super::protect::check();";
    let m: Module = ["act", "torch", "client"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let got: BTreeSet<String> = named_paths(&m, code, &[])
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "model::history::History",
        "act::rules::eval",
        "act::park",
        "act::sockets::runtime_dir",
        "act::torch::protect::check",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let edge = |g: &mut BTreeMap<String, BTreeSet<String>>, a: &str, b: &str| {
        g.entry(a.into()).or_default().insert(b.into());
        g.entry(b.into()).or_default();
    };
    edge(&mut g, "a", "b");
    edge(&mut g, "b", "c");
    edge(&mut g, "c", "a");
    edge(&mut g, "c", "d");
    assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
}

#[test]
fn child_and_self_paths_are_read() {
    let code = "pub mod builder;\nmod stages;\npub use builder::EngineBuilder;\n\
                use self::stages::{outbox::Alert, publish};\nlet x = other::builder::y;";
    let children = declared_children(code);
    assert_eq!(children, vec!["builder".to_string(), "stages".to_string()]);
    let m: Module = vec!["engine".to_string()];
    let got: BTreeSet<String> = named_paths(&m, code, &children)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "engine::builder::EngineBuilder",
        "engine::stages::outbox::Alert",
        "engine::stages::publish",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
}

/// The uses of an entry on a higher floor inside `folder`, whose entries stand on `floors`
/// (lowest first); every entry of the folder must have a floor.
fn uses_up(e: &Edges, folder: &[&str], floors: &[&str]) -> Vec<String> {
    let key: Module = folder.iter().map(|s| s.to_string()).collect();
    let g = e.get(&key).cloned().unwrap_or_default();
    let floor = |m: &str| floors.iter().position(|f| *f == m);
    let mut bad = Vec::new();
    for (from, tos) in &g {
        for to in tos {
            match (floor(from), floor(to)) {
                (Some(a), Some(b)) if b > a => bad.push(format!("{from} → {to}")),
                (None, _) => bad.push(format!("{from} has no floor")),
                (_, None) => bad.push(format!("{to} has no floor")),
                _ => {}
            }
        }
    }
    bad
}

#[test]
fn act_and_engine_keep_their_sub_floors() {
    let e = edges();
    // The reading works: `mod.rs` is an entry, and known uses are seen.
    let engine = &e[&vec!["engine".to_string()]];
    assert!(engine[MOD].contains("pipeline"), "{engine:?}");
    assert!(engine["builder"].contains("pipeline"), "{engine:?}");
    let act = uses_up(&e, &["act"], ACT_FLOORS);
    assert!(act.is_empty(), "in src/act: {act:?}");
    let engine = uses_up(&e, &["engine"], ENGINE_FLOORS);
    assert!(engine.is_empty(), "in src/engine: {engine:?}");
}

#[test]
fn every_entry_of_act_and_engine_has_a_sub_floor() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (folder, floors) in [("act", ACT_FLOORS), ("engine", ENGINE_FLOORS)] {
        let mut entries: BTreeSet<String> = BTreeSet::new();
        for e in std::fs::read_dir(src.join(folder))
            .expect("folder")
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            entries.insert(name.trim_end_matches(".rs").to_string());
        }
        let want: BTreeSet<String> = floors.iter().map(|s| s.to_string()).collect();
        assert_eq!(entries, want, "src/{folder}'s entries and their floors");
    }
}

/// The most items of `src/` (the library, `main.rs` left out) that may be declared bare `pub`
/// (issue 41 point 6: `pub(crate)` by default, a small public API re-exported from `lib.rs`).
/// A ratchet: lower it when items are narrowed, never raise it.
const MAX_PUB_ITEMS: usize = 900;

/// The item a code line declares and its visibility: `("pub", "fn")`, `("pub(crate)", "struct")`,
/// `("", "const")`; `None` for any other line (fields, `use`, statements).
fn item_of(line: &str) -> Option<(&str, &str)> {
    let l = line.trim_start();
    let (vis, rest) = if let Some(r) = l.strip_prefix("pub ") {
        ("pub", r)
    } else if l.starts_with("pub(") {
        let close = l.find(')')?;
        (&l[..=close], l[close + 1..].trim_start())
    } else {
        ("", l)
    };
    let mut rest = rest;
    for q in ["async ", "const ", "unsafe ", "extern \"C\" "] {
        if let Some(r) = rest.strip_prefix(q) {
            // `pub const NAME` is a const item, `pub const fn` a function.
            if q != "const " || r.starts_with("fn ") || r.starts_with("unsafe ") {
                rest = r;
            }
        }
    }
    let kind = [
        "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
    ]
    .into_iter()
    .find(|k| {
        rest.strip_prefix(k)
            .is_some_and(|r| r.starts_with(' ') && r.trim_start().starts_with(is_ident))
    })?;
    Some((vis, kind))
}

/// Per visibility (`pub`, `pub(crate)`, `pub(super)`, `` for private), how many items `src/`
/// declares (comment lines left out).
fn visibility_counts() -> BTreeMap<String, usize> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut counts = BTreeMap::new();
    for f in files.iter().filter(|f| !f.ends_with("main.rs")) {
        let text = std::fs::read_to_string(f).expect("readable");
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            if let Some((vis, _)) = item_of(line) {
                *counts.entry(vis.to_string()).or_insert(0) += 1;
            }
        }
    }
    counts
}

#[test]
fn bare_pub_items_do_not_grow() {
    let counts = visibility_counts();
    let public = counts.get("pub").copied().unwrap_or(0);
    // The reading works: crate-wide and private items are seen too.
    assert!(
        counts.get("pub(crate)").copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
    assert!(counts.get("").copied().unwrap_or(0) > 0, "{counts:?}");
    assert!(
        public <= MAX_PUB_ITEMS,
        "src/ declares {public} bare `pub` items, more than MAX_PUB_ITEMS ({MAX_PUB_ITEMS}): \
         a new item is `pub(crate)` (or private) unless tests/, benches/ or main.rs name it, \
         and the library's users get it through lib.rs's public API ({counts:?})"
    );
}

#[test]
fn item_lines_are_read() {
    assert_eq!(item_of("pub fn run() {"), Some(("pub", "fn")));
    assert_eq!(
        item_of("    pub(crate) const fn a() {"),
        Some(("pub(crate)", "fn"))
    );
    assert_eq!(item_of("pub const MAX: u32 = 1;"), Some(("pub", "const")));
    assert_eq!(
        item_of("pub(super) struct S;"),
        Some(("pub(super)", "struct"))
    );
    assert_eq!(item_of("    fn helper(x: u8) {"), Some(("", "fn")));
    assert_eq!(item_of("    pub name: String,"), None);
    assert_eq!(item_of("pub use crate::a::B;"), None);
    assert_eq!(item_of("let fn_count = 3;"), None);
}

/// The crate root's public API names the same types as their folders' paths (a re-export that
/// goes missing or points elsewhere does not compile).
#[test]
fn the_public_api_is_reexported_at_the_root() {
    use std::marker::PhantomData as P;
    fn same<T: ?Sized>(_: P<T>, _: P<T>) {}
    same(P::<vramwarden::Engine>, P::<vramwarden::engine::Engine>);
    same(
        P::<vramwarden::EngineBuilder>,
        P::<vramwarden::engine::EngineBuilder>,
    );
    same(
        P::<vramwarden::EngineOptions>,
        P::<vramwarden::engine::EngineOptions>,
    );
    same(
        P::<vramwarden::EngineCommand>,
        P::<vramwarden::engine::EngineCommand>,
    );
    same(
        P::<vramwarden::Monitor>,
        P::<vramwarden::engine::view::Monitor>,
    );
    same(
        P::<vramwarden::Settings>,
        P::<vramwarden::engine::settings::Settings>,
    );
    same(
        P::<vramwarden::WireView>,
        P::<vramwarden::link::wire::WireView>,
    );
    same(
        P::<vramwarden::WireCommand>,
        P::<vramwarden::link::wire::WireCommand>,
    );
    same(
        P::<dyn vramwarden::EngineLink>,
        P::<dyn vramwarden::link::EngineLink>,
    );
    same(
        P::<dyn vramwarden::GpuSource>,
        P::<dyn vramwarden::source::GpuSource>,
    );
    same(
        P::<vramwarden::SourceKind>,
        P::<vramwarden::source::SourceKind>,
    );
    same(
        P::<vramwarden::SimSource>,
        P::<vramwarden::source::sim::SimSource>,
    );
    // The simulated source is a GPU source through the root's names.
    let demo: Box<dyn vramwarden::GpuSource> = Box::new(vramwarden::SimSource::demo(0));
    drop(demo);
}
