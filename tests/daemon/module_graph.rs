//! The import rules of docs/architecture.md, checked on the source itself:
//! no crate of the workspace has modules that reference each other in a
//! circle; inside the actors crate no actor's file references another
//! actor's file (actors talk through message modules and `Recipient`s wired
//! in `system.rs`); in the daemon, only the server that mounts them
//! references the front ends, the HTTP and the gRPC layers.
//!
//! The graph is read from the text, lexed just enough that comments, strings
//! and character literals name nothing. Every path that starts at `crate`,
//! `super` or `self` counts, in a `use` tree or inline in code
//! (`super::pg::describe(&e)`, `crate::http::routes()`), resolved from the
//! module it is written in (an inline `mod tests { … }` is a module of its
//! own, so its `use super::*` names the file around it) to the longest module
//! path that is a file. The modules are found as the compiler finds them:
//! from each crate root (`lib.rs`, `main.rs`: a binary is a crate of its own)
//! through its `mod` declarations.
//!
//! Two kinds of reference are no edge. A crate root only declares modules
//! and re-exports them, so an edge through it says nothing about who needs
//! whom. A file's bare paths to the modules it declares (`pg::Pg` in
//! `store.rs`) are not read: a parent and the files it declares are one
//! room whose parent is the interface, while the children's `super::` paths
//! back to it are edges like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`tracker::views`) → the module paths it references, each
/// with the first path written in its source that makes the edge (what a
/// failure prints, so that the line is easy to find).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The actors of the actors crate, by the first segment of their module
/// path; a module below one (`tracker::views`) belongs to that actor.
const ACTORS: [&str; 7] =
    ["budget", "dispatcher", "finalizer", "gpu_worker", "synthesis", "tracker", "worker_monitor"];

/// What the checker needs of Rust's tokens.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// An identifier or keyword (`r#type` as `type`).
    Word(String),
    /// `::`
    PathSep,
    /// Any other character that is not white space.
    Punct(char),
}

/// The tokens of a source text, without comments, strings, character
/// literals, lifetimes and numbers: none of them can name a module.
fn lex(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    // The end of a quoted literal whose opening quote is just before `i`.
    let closing = |mut i: usize, quote: char| {
        while i < chars.len() && chars[i] != quote {
            i += if chars[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            // Block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = closing(i + 1, '"');
        } else if c == '\'' {
            i = if at(i + 1) == '\\' {
                closing(i + 3, '\'')
            } else if at(i + 2) == '\'' {
                i + 3
            } else {
                // A lifetime or a loop label: the tick and its name.
                let mut end = i + 1;
                while end < chars.len() && is_word(chars[end]) {
                    end += 1;
                }
                end
            };
        } else if c.is_ascii_digit() {
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
        } else if is_word(c) {
            let start = i;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
            match (word.as_str(), at(i)) {
                // Raw strings: r"…", r#"…"#, br"…", cr#"…"#.
                ("r" | "br" | "cr", '"' | '#') if at(i + hashes) == '"' => {
                    let mut end = i + hashes + 1;
                    while end < chars.len()
                        && !(chars[end] == '"' && (1..=hashes).all(|k| at(end + k) == '#'))
                    {
                        end += 1;
                    }
                    i = end + 1 + hashes;
                }
                ("b" | "c", '"') => i = closing(i + 1, '"'),
                ("b", '\'') => i = closing(i + 1, '\''),
                // A raw identifier: r#type.
                ("r", '#') if hashes == 1 && is_word(at(i + 1)) => {
                    let start = i + 1;
                    i = start;
                    while i < chars.len() && is_word(chars[i]) {
                        i += 1;
                    }
                    tokens.push(Token::Word(chars[start..i].iter().collect()));
                }
                _ => tokens.push(Token::Word(word)),
            }
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(Token::PathSep);
            i += 2;
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

/// Expands the use tree at `tokens[*pos]` (`a::{b, c::{d, self}}`, `a::*`,
/// `a as b`) into its paths and moves `pos` past it.
fn use_tree(tokens: &[Token], pos: &mut usize) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    while let Some(token) = tokens.get(*pos) {
        match token {
            Token::PathSep => *pos += 1,
            // `path as alias`: the alias names nothing in the crate.
            Token::Word(word) if word == "as" => {
                *pos += 2;
                break;
            }
            Token::Word(word) => {
                prefix.push(word.clone());
                *pos += 1;
            }
            Token::Punct('*') => {
                *pos += 1;
                break;
            }
            Token::Punct('{') => {
                *pos += 1;
                let mut paths = Vec::new();
                while !matches!(tokens.get(*pos), None | Some(Token::Punct('}'))) {
                    let before = *pos;
                    for rest in use_tree(tokens, pos) {
                        paths.push(prefix.iter().cloned().chain(rest).collect());
                    }
                    // A separator, or a token no use tree holds (a macro's
                    // `$`): step over it.
                    if tokens.get(*pos) == Some(&Token::Punct(',')) || *pos == before {
                        *pos += 1;
                    }
                }
                *pos += 1;
                return paths;
            }
            Token::Punct(_) => break,
        }
    }
    vec![prefix]
}

/// A path written in `module` (segments from the crate root, an inline
/// module's name included), from the crate root; `None` when it does not
/// start at `crate`, `self` or `super` (another crate, a local name).
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let (first, mut rest) = path.split_first()?;
    let mut resolved = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut parent = module.to_vec();
            parent.pop()?;
            parent
        }
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        resolved.pop()?;
        rest = &rest[1..];
    }
    // `a::{self, b}` names `a` itself.
    resolved.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(resolved)
}

/// What one module file says about the module tree.
#[derive(Debug, Default)]
struct Reading {
    /// The paths it names, each from the crate root, with the text as
    /// written (for the failure message).
    paths: Vec<(Vec<String>, String)>,
    /// The modules it declares by `mod name;`, whose files are found next.
    declared: Vec<Vec<String>>,
}

/// Reads the file of `module` (segments from the crate root).
fn read_module(module: &[String], text: &str) -> Reading {
    let tokens = lex(text);
    let word = |i: usize| match tokens.get(i) {
        Some(Token::Word(w)) => Some(w.as_str()),
        _ => None,
    };
    let mut reading = Reading::default();
    // The module the reader is in (the file's, then the inline modules
    // around it), and the brace depth that closes each inline one.
    let mut here = module.to_vec();
    let mut closes: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let mut record = |here: &[String], written: &[String]| {
            if let Some(path) = absolute(here, written) {
                reading.paths.push((path, written.join("::")));
            }
        };
        match &tokens[i] {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if closes.last() == Some(&depth) {
                    closes.pop();
                    here.pop();
                }
                depth -= 1;
            }
            Token::Word(w) if w == "mod" => {
                if let Some(name) = word(i + 1) {
                    match tokens.get(i + 2) {
                        Some(Token::Punct('{')) => {
                            depth += 1;
                            closes.push(depth);
                            here.push(name.to_string());
                            i += 2;
                        }
                        Some(Token::Punct(';')) => {
                            reading.declared.push(here.iter().cloned().chain([name.to_string()]).collect());
                        }
                        _ => {}
                    }
                }
            }
            Token::Word(w) if w == "use" => {
                i += 1;
                for written in use_tree(&tokens, &mut i) {
                    record(&here, &written);
                }
                continue;
            }
            // An inline path's first segment: `super::pg::describe`, not
            // the `super` of `pub(super)` nor a segment after `::`.
            Token::Word(w)
                if matches!(w.as_str(), "crate" | "self" | "super")
                    && tokens.get(i + 1) == Some(&Token::PathSep)
                    && (i == 0 || tokens[i - 1] != Token::PathSep) =>
            {
                let mut written = vec![w.clone()];
                let mut end = i + 1;
                while tokens.get(end) == Some(&Token::PathSep) {
                    match word(end + 1) {
                        Some(segment) => written.push(segment.to_string()),
                        // `f::<T>`, `a::{…}` (a macro's) or `a::*`.
                        None => break,
                    }
                    end += 2;
                }
                record(&here, &written);
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    reading
}

/// The file of a module: `a/b.rs` or `a/b/mod.rs` under `src`.
fn module_file(src: &Path, module: &[String]) -> PathBuf {
    let base = module.iter().fold(src.to_path_buf(), |dir, segment| dir.join(segment));
    let flat = base.with_extension("rs");
    if flat.is_file() {
        flat
    } else {
        base.join("mod.rs")
    }
}

/// The module graph of the crate whose root file is `root` (`src/lib.rs`,
/// `src/main.rs`).
fn module_graph(root: &Path) -> Graph {
    let src = root.parent().expect("a crate root lies in a directory");
    let mut readings: BTreeMap<Vec<String>, Reading> = BTreeMap::new();
    let mut pending = vec![Vec::new()];
    while let Some(module) = pending.pop() {
        if readings.contains_key(&module) {
            continue;
        }
        let file = if module.is_empty() { root.to_path_buf() } else { module_file(src, &module) };
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("module {} ({}): {e}", module.join("::"), file.display()));
        let reading = read_module(&module, &text);
        pending.extend(reading.declared.iter().cloned());
        readings.insert(module, reading);
    }
    let mut graph = Graph::new();
    for (module, reading) in readings.iter().filter(|(module, _)| !module.is_empty()) {
        let edges = graph.entry(module.join("::")).or_default();
        for (path, written) in &reading.paths {
            let target = (1..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|candidate| readings.contains_key(*candidate));
            if let Some(target) = target.filter(|t| t != module) {
                edges.entry(target.join("::")).or_insert_with(|| written.clone());
            }
        }
    }
    graph
}

/// The circles of a graph: its strongly connected components of more than
/// one module (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct Search<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'g> Search<'g> {
        fn visit(&mut self, node: &'g str) {
            let index = self.index.len();
            self.index.insert(node, index);
            self.low.insert(node, index);
            self.stack.push(node);
            let graph = self.graph;
            for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == index {
                let at = self.stack.iter().position(|n| *n == node).expect("on the stack");
                let component: BTreeSet<String> = self.stack.drain(at..).map(String::from).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut search =
        Search { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for node in graph.keys() {
        if !search.index.contains_key(node.as_str()) {
            search.visit(node);
        }
    }
    search.found
}

/// A circle as its edges and the paths that make them, for a failure.
fn describe(graph: &Graph, circle: &BTreeSet<String>) -> String {
    let edges: Vec<String> = circle
        .iter()
        .flat_map(|from| {
            graph[from]
                .iter()
                .filter(|(to, _)| circle.contains(*to))
                .map(move |(to, written)| format!("{from} -> {to} ({written})"))
        })
        .collect();
    edges.join(", ")
}

/// Every crate root of the workspace, relative to it: each member's
/// `src/lib.rs` and `src/main.rs`, read from the members of the workspace's
/// Cargo.toml so that a new crate is checked without editing this test.
fn crate_roots() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace_file("Cargo.toml")).expect("workspace Cargo.toml");
    let members = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("a members list in the workspace Cargo.toml")
        .0;
    let roots: Vec<String> = members
        .split(',')
        .map(|member| member.trim().trim_matches('"'))
        .filter(|member| !member.is_empty())
        .flat_map(|member| {
            let src = if member == "." { "src".to_string() } else { format!("{member}/src") };
            ["lib.rs", "main.rs"].map(|root| format!("{src}/{root}"))
        })
        .filter(|root| workspace_file(root).is_file())
        .collect();
    assert!(roots.len() >= 5, "every member's crate roots: {roots:?}");
    roots
}

fn actor_of(module: &str) -> Option<&'static str> {
    let first = module.split("::").next()?;
    ACTORS.iter().copied().find(|actor| *actor == first)
}

fn workspace_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let mut failures = Vec::new();
    for root in crate_roots() {
        let graph = module_graph(&workspace_file(&root));
        for circle in circles(&graph) {
            failures.push(format!("{root}: {}", describe(&graph, &circle)));
        }
    }
    assert!(failures.is_empty(), "modules reference each other in a circle: {failures:#?}");
}

#[test]
fn every_crate_graph_holds_its_modules() {
    for (root, at_least) in [
        ("src/lib.rs", 30),
        ("actors/src/lib.rs", 20),
        ("kernels/src/lib.rs", 10),
        ("filecoin/src/lib.rs", 10),
        ("bench/src/lib.rs", 10),
    ] {
        let graph = module_graph(&workspace_file(root));
        assert!(graph.len() >= at_least, "{root}: {} modules: {graph:?}", graph.len());
    }
}

/// The daemon's modules outside `server` and `room` that reference `room`
/// (a front end: only the server, which mounts it, may). The server's own
/// references to it are checked to exist, so that a room the graph does
/// not see (renamed, moved) fails rather than passes with nothing to check.
fn references_from_outside_the_server(room: &str) -> Vec<String> {
    let graph = module_graph(&workspace_file("src/lib.rs"));
    let within = |module: &str, of: &str| module == of || module.starts_with(&format!("{of}::"));
    let edges = || {
        graph
            .iter()
            .flat_map(|(from, targets)| targets.iter().map(move |(to, written)| (from, to, written)))
            .filter(|(_, to, _)| within(to, room))
    };
    assert!(edges().any(|(from, _, _)| within(from, "server")), "the server references no module of {room}");
    edges()
        .filter(|(from, _, _)| !within(from, "server") && !within(from, room))
        .map(|(from, to, written)| format!("{from} -> {to} ({written})"))
        .collect()
}

#[test]
fn only_the_server_references_the_http_layer() {
    let below = references_from_outside_the_server("http");
    assert!(below.is_empty(), "modules below the HTTP layer reference it: {below:?}");
}

/// The gRPC front end as the HTTP one: below the server, beside HTTP
/// (neither references the other), above everything else.
#[test]
fn only_the_server_references_the_grpc_layer() {
    let below = references_from_outside_the_server("grpc");
    assert!(below.is_empty(), "modules below the gRPC layer reference it: {below:?}");
}

#[test]
fn no_actor_file_references_another_actor_file() {
    let graph = module_graph(&workspace_file("actors/src/lib.rs"));
    let crossings: Vec<String> = graph
        .iter()
        .flat_map(|(from, targets)| targets.iter().map(move |(to, written)| (from, to, written)))
        .filter(|(from, to, _)| matches!((actor_of(from), actor_of(to)), (Some(a), Some(b)) if a != b))
        .map(|(from, to, written)| format!("{from} -> {to} ({written})"))
        .collect();
    assert!(crossings.is_empty(), "actor files reference other actors: {crossings:?}");
}

/// The checker itself, on a small crate: grouped, nested and inline paths;
/// an inline module's own `super`; comments, strings and a second crate root
/// that name nothing.
#[test]
fn the_graph_sees_use_trees_and_inline_paths() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let file = src.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).expect("module dir");
        std::fs::write(file, text).expect("write");
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\n");
    // `crate::d` in the binary is the binary's own module, not the library's.
    write("main.rs", "mod d;\nfn main() { crate::d::run() }\n");
    write("a/mod.rs", "//! a: `use crate::c;` in a comment\nmod inner;\nfn f() { inner::g() }\n");
    write("a/inner.rs", "use super::super::{b::{self, Thing as T}};\n");
    write("b.rs", "fn f() -> crate::c::Item { todo!() }\n/* crate::e:: /* nested */ crate::e */\n");
    write(
        "c.rs",
        "pub fn f() { let url = \"http://x\"; super::a::inner::g(); }\n\
         const S: &str = r#\"crate::e\"#;\nconst Q: char = '\"'; fn g<'a>(x: &'a str) {}\n",
    );
    write("d.rs", "#[cfg(test)]\nmod tests { use super::*; fn t() { self::helper(); crate::e::h(); } }\n");
    write("e.rs", "pub(super) fn h() { let _ = self::h; }\n");
    let graph = module_graph(&src.join("lib.rs"));
    let targets = |module: &str| graph[module].keys().cloned().collect::<BTreeSet<String>>();
    let set = |modules: &[&str]| modules.iter().map(|m| m.to_string()).collect::<BTreeSet<String>>();
    let expected: [(&str, &[&str], &str); 6] = [
        ("a", &[], "comments and a parent's bare paths to its children are no edge"),
        ("a::inner", &["b"], "a nested super in a use tree"),
        ("b", &["c"], "an inline crate path, not one in a block comment"),
        ("c", &["a::inner"], "an inline super path after a string with //"),
        ("d", &["e"], "super and self in an inline module name the file's own module"),
        ("e", &[], "pub(super) and self::item name no other module"),
    ];
    for (module, edges, why) in expected {
        assert_eq!(targets(module), set(edges), "{module}: {why}");
    }
    assert_eq!(graph["c"]["a::inner"], "super::a::inner::g");
    let circle = set(&["a::inner", "b", "c"]);
    assert_eq!(circles(&graph), vec![circle.clone()]);
    assert!(describe(&graph, &circle).contains("c -> a::inner (super::a::inner::g)"));

    let binary = module_graph(&src.join("main.rs"));
    assert_eq!(binary.keys().cloned().collect::<Vec<_>>(), ["d"]);
}

/// What made this check necessary: a circle closed only by an inline path
/// in code is found.
#[test]
fn an_inline_path_closes_a_circle() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
    write("lib.rs", "mod pg;\nmod migrate;\n");
    write("pg.rs", "use super::migrate;\npub fn describe() {}\n");
    write("migrate.rs", "pub fn run() { let _ = format!(\"{}\", super::pg::describe()); }\n");
    let graph = module_graph(&dir.path().join("lib.rs"));
    let found = circles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(
        describe(&graph, &found[0]),
        "migrate -> pg (super::pg::describe), pg -> migrate (super::migrate)"
    );
}
