//! The import rules of docs/architecture.md, checked on the source itself:
//! the modules of a crate reference each other without a circle; inside
//! the actors crate no actor's file references another actor's file (actors
//! talk through message modules and `Recipient`s wired in `system.rs`); in
//! the daemon, only the server that mounts it references the HTTP layer.
//!
//! The graph is read from the text: every `use crate::…`, `use super::…`,
//! `use self::…` tree and every inline `crate::…` path, resolved to the
//! longest module path that is a file. The crate root (`lib.rs`) is left
//! out: it only declares modules and re-exports them, so an edge through it
//! says nothing about who needs whom.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`tracker::views`) → the module paths it references.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The actors of the actors crate, by the first segment of their module
/// path; a module below one (`tracker::views`) belongs to that actor.
const ACTORS: [&str; 7] = [
    "budget",
    "dispatcher",
    "finalizer",
    "gpu_worker",
    "synthesis",
    "tracker",
    "worker_monitor",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("readable entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` is the root ("").
fn module_path(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("file under src");
    let mut segments: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(segments.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        segments.pop();
    }
    segments.join("::")
}

/// The text without comments, so that prose naming a path is no edge.
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands a use tree (`a::{b, c::{d, self}}`) into its paths.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    let segments = |path: &str| -> Vec<String> {
        path.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        // `path as alias`: the alias names nothing in the crate.
        return vec![segments(tree.split_whitespace().next().unwrap_or(""))];
    };
    let prefix = segments(&tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').expect("balanced use tree")];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand_use)
        .map(|rest| prefix.iter().cloned().chain(rest).collect())
        .collect()
}

/// The paths a file names, each from the crate root.
fn referenced_paths(module: &str, text: &str) -> Vec<Vec<String>> {
    let text = strip_comments(text);
    let parent: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let absolute = |path: Vec<String>| -> Option<Vec<String>> {
        match path.first().map(String::as_str) {
            Some("crate") => Some(path[1..].to_vec()),
            Some("super" | "self") => {
                let mut base = parent.clone();
                let mut rest = path.as_slice();
                if rest[0] == "self" {
                    rest = &rest[1..];
                }
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            _ => None,
        }
    };
    let mut paths = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("use ") {
        let statement_start = at + 4;
        let boundary_ok = at == 0 || !rest[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let end = rest[statement_start..].find(';').map(|e| statement_start + e);
        match end {
            Some(end) if boundary_ok => {
                paths.extend(expand_use(&rest[statement_start..end]).into_iter().filter_map(absolute));
                rest = &rest[end..];
            }
            _ => rest = &rest[statement_start..],
        }
    }
    for (at, _) in text.match_indices("crate::") {
        if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let path: String = text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.extend(absolute(path.split("::").filter(|s| !s.is_empty()).map(String::from).collect()));
    }
    paths
}

/// The module graph of one crate's `src` directory.
fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<String, PathBuf> =
        files.into_iter().map(|f| (module_path(src, &f), f)).collect();
    let mut graph = Graph::new();
    for (module, file) in &modules {
        if module.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable source file");
        let edges = graph.entry(module.clone()).or_default();
        for path in referenced_paths(module, &text) {
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|candidate| modules.contains_key(candidate));
            if let Some(target) = target.filter(|t| t != module) {
                edges.insert(target);
            }
        }
    }
    graph
}

/// A circle of modules, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

fn actor_of(module: &str) -> Option<&'static str> {
    let first = module.split("::").next()?;
    ACTORS.iter().copied().find(|actor| *actor == first)
}

fn crate_src(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
}

fn actors_src() -> PathBuf {
    crate_src("actors/src")
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    for dir in ["src", "kernels/src", "bench/src"] {
        let graph = module_graph(&crate_src(dir));
        assert!(graph.len() > 3, "{dir}: the graph holds the crate's modules: {graph:?}");
        assert_eq!(find_cycle(&graph), None, "{dir}: modules import each other in a circle");
    }
}

#[test]
fn only_the_server_references_the_http_layer() {
    let graph = module_graph(&crate_src("src"));
    let below: Vec<String> = graph
        .iter()
        .filter(|(from, _)| *from != "server" && *from != "http" && !from.starts_with("http::"))
        .flat_map(|(from, targets)| targets.iter().map(move |to| (from, to)))
        .filter(|(_, to)| *to == "http" || to.starts_with("http::"))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(below.is_empty(), "modules below the HTTP layer reference it: {below:?}");
}

#[test]
fn the_actors_crate_has_no_import_circle() {
    let graph = module_graph(&actors_src());
    assert!(graph.len() > 10, "the graph holds the crate's modules: {graph:?}");
    assert_eq!(find_cycle(&graph), None, "modules import each other in a circle");
}

#[test]
fn no_actor_file_references_another_actor_file() {
    let graph = module_graph(&actors_src());
    let crossings: Vec<String> = graph
        .iter()
        .flat_map(|(from, targets)| targets.iter().map(move |to| (from, to)))
        .filter(|(from, to)| {
            matches!((actor_of(from), actor_of(to)), (Some(a), Some(b)) if a != b)
        })
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(crossings.is_empty(), "actor files reference other actors: {crossings:?}");
}

/// The checker itself: a small tree with a circle through a grouped use,
/// a `super::` path and an inline `crate::` path.
#[test]
fn the_graph_sees_grouped_super_and_inline_references() {
    let src = std::env::temp_dir().join(format!("cuzk-module-graph-{}", std::process::id()));
    std::fs::create_dir_all(src.join("a")).expect("temp dir");
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).expect("write");
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n");
    write("a/mod.rs", "//! a\nmod inner;\n// use crate::c; (a comment is no edge)\n");
    write("a/inner.rs", "use super::super::{b::{self, Thing as T}};\n");
    write("b.rs", "fn f() -> crate::c::Item { todo!() }\n");
    write("c.rs", "pub use crate::a::inner;\n");
    let graph = module_graph(&src);
    std::fs::remove_dir_all(&src).expect("clean up");
    assert_eq!(graph["a"], BTreeSet::new());
    assert_eq!(graph["a::inner"], BTreeSet::from(["b".to_string()]));
    assert_eq!(graph["b"], BTreeSet::from(["c".to_string()]));
    let cycle = find_cycle(&graph).expect("a::inner -> b -> c -> a::inner");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4);
}
