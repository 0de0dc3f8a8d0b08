//! The workspace's shape, checked on its sources: no two files import each other (directly or
//! round a longer loop), no file above 1,000 lines and no function above 150 lines outside
//! tests, and the simulator builds without the transport crate. Issue 46 set these limits so
//! that someone changing one file reads few others first; this test keeps them true.
//!
//! Imports are resolved the way rustc would for the paths this workspace uses: `crate::`,
//! `super::`, `self::` and a child module's bare name, following `pub use` re-exports to the
//! file that defines the item. A child using its ancestors (`super::Engine`) is the normal
//! direction of a module tree and is not counted; a parent re-exporting a child while the child
//! uses the parent's own items is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use syn::visit::Visit;

const MAX_FILE_LINES: usize = 1_000;
const MAX_FN_LINES: usize = 150;

/// A module by crate folder and path inside the crate (`["engine", "send"]`).
type ModuleKey = (String, Vec<String>);

/// One parsed non-test source file.
struct SourceFile {
    path: PathBuf,
    ast: syn::File,
    lines: usize,
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `src` folder of every workspace member and of the binary, by crate folder name.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("workspace members line");
    let mut out = vec![(String::from("switchgnn"), root.join("src"))];
    for name in members.split('"').skip(1).step_by(2) {
        out.push((name.to_string(), root.join(name).join("src")));
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `lib.rs`/`main.rs` → `[]`, `a/mod.rs` → `["a"]`, `a/b.rs` → `["a", "b"]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("lib" | "main" | "mod")
    ) {
        parts.pop();
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(list) if list.tokens.to_string().contains("test"))
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Mod(m) => &m.attrs,
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Struct(s) => &s.attrs,
        syn::Item::Enum(e) => &e.attrs,
        syn::Item::Const(c) => &c.attrs,
        syn::Item::Static(s) => &s.attrs,
        _ => &[],
    }
}

/// Lines a file's `#[cfg(test)]` items take: they do not count against its length.
fn test_lines(ast: &syn::File) -> usize {
    ast.items
        .iter()
        .filter(|item| is_cfg_test(item_attrs(item)))
        .map(|item| {
            let span = syn::spanned::Spanned::span(item);
            span.end().line - span.start().line + 1
        })
        .sum()
}

fn read_sources() -> BTreeMap<ModuleKey, SourceFile> {
    let mut files = BTreeMap::new();
    for (krate, src) in crate_sources() {
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            let lines = text.lines().count() - test_lines(&ast);
            // A file that is all tests (a `tests.rs` child) is test code.
            if path.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            files.insert(
                (krate.clone(), module_path(&src, &path)),
                SourceFile { path, ast, lines },
            );
        }
    }
    files
}

/// Every path a `use` tree names, as segments (`use a::{b, c::d}` → `a::b`, `a::c::d`).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            if n.ident != "self" {
                path.push(n.ident.to_string());
            }
            out.push(path);
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push(path);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// What one file refers to and what it defines, outside its test modules.
#[derive(Default)]
struct FileFacts {
    /// Paths from `use` items and from expressions and types (`crate::a::b`).
    paths: Vec<Vec<String>>,
    /// Names of the items the file defines at its top level.
    defines: BTreeSet<String>,
    /// `pub use` re-exports: the name seen from outside → the path it stands for.
    reexports: BTreeMap<String, Vec<String>>,
}

impl<'ast> Visit<'ast> for FileFacts {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut paths);
        if matches!(
            u.vis,
            syn::Visibility::Public(_) | syn::Visibility::Restricted(_)
        ) {
            for p in &paths {
                if let Some(name) = p.last() {
                    self.reexports.insert(name.clone(), p.clone());
                }
            }
        }
        self.paths.extend(paths);
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) {
            self.paths.push(segments);
        }
        syn::visit::visit_path(self, p);
    }
}

fn facts_of(ast: &syn::File) -> FileFacts {
    let mut facts = FileFacts::default();
    facts.visit_file(ast);
    for item in &ast.items {
        let name = match item {
            syn::Item::Struct(s) => Some(&s.ident),
            syn::Item::Enum(e) => Some(&e.ident),
            syn::Item::Fn(f) => Some(&f.sig.ident),
            syn::Item::Trait(t) => Some(&t.ident),
            syn::Item::Type(t) => Some(&t.ident),
            syn::Item::Const(c) => Some(&c.ident),
            syn::Item::Static(s) => Some(&s.ident),
            syn::Item::Union(u) => Some(&u.ident),
            syn::Item::Macro(m) => m.ident.as_ref(),
            _ => None,
        };
        if let Some(name) = name {
            facts.defines.insert(name.to_string());
        }
    }
    facts
}

/// The module a path starts from, made absolute within the crate; `None` for other crates.
fn absolute(
    files: &BTreeMap<ModuleKey, SourceFile>,
    (krate, module): &ModuleKey,
    path: &[String],
) -> Option<Vec<String>> {
    let first = path.first()?;
    let (mut base, mut rest) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.clone(), &path[1..]),
        "super" => (module.clone(), path),
        child => {
            let mut candidate = module.clone();
            candidate.push(child.to_string());
            if !files.contains_key(&(krate.clone(), candidate)) {
                return None;
            }
            (module.clone(), path)
        }
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file that defines what an absolute path names, following re-exports.
fn resolve(
    files: &BTreeMap<ModuleKey, SourceFile>,
    facts: &BTreeMap<ModuleKey, FileFacts>,
    krate: &str,
    path: &[String],
    depth: usize,
) -> Option<ModuleKey> {
    let (module, used) = (0..=path.len()).rev().find_map(|k| {
        let key = (krate.to_string(), path[..k].to_vec());
        files.contains_key(&key).then_some((key, k))
    })?;
    if let Some(name) = path.get(used) {
        let f = &facts[&module];
        if depth < 8 && !f.defines.contains(name) {
            if let Some(target) = f.reexports.get(name) {
                if let Some(abs) = absolute(files, &module, target) {
                    if let Some(found) = resolve(files, facts, krate, &abs, depth + 1) {
                        return Some(found);
                    }
                }
            }
        }
    }
    Some(module)
}

fn is_ancestor(ancestor: &ModuleKey, of: &ModuleKey) -> bool {
    ancestor.0 == of.0 && of.1.starts_with(&ancestor.1)
}

#[test]
fn no_two_files_import_each_other() {
    let files = read_sources();
    let facts: BTreeMap<ModuleKey, FileFacts> = files
        .iter()
        .map(|(k, f)| (k.clone(), facts_of(&f.ast)))
        .collect();
    let mut graph = DiGraph::<&ModuleKey, ()>::new();
    let nodes: BTreeMap<&ModuleKey, _> = files.keys().map(|k| (k, graph.add_node(k))).collect();
    for (key, f) in &facts {
        for path in &f.paths {
            let Some(abs) = absolute(&files, key, path) else {
                continue;
            };
            let Some(target) = resolve(&files, &facts, &key.0, &abs, 0) else {
                continue;
            };
            if target != *key && !is_ancestor(&target, key) {
                graph.update_edge(nodes[key], nodes[&target], ());
            }
        }
    }
    let cycles: Vec<String> = tarjan_scc(&graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let names: Vec<String> = scc
                .iter()
                .map(|n| files[graph[*n]].path.display().to_string())
                .collect();
            names.join(" <-> ")
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "files that import each other:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn no_file_above_the_limit() {
    let long: Vec<String> = read_sources()
        .values()
        .filter(|f| f.lines > MAX_FILE_LINES)
        .map(|f| format!("{}: {} lines", f.path.display(), f.lines))
        .collect();
    assert!(
        long.is_empty(),
        "files above {MAX_FILE_LINES} non-test lines:\n{}",
        long.join("\n")
    );
}

/// Every function body's span, outside test modules.
#[derive(Default)]
struct LongFunctions {
    found: Vec<(String, usize)>,
}

impl LongFunctions {
    fn check(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let lines = span.end().line - span.start().line + 1;
        if lines > MAX_FN_LINES {
            self.found
                .push((format!("{name} (line {})", span.start().line), lines));
        }
    }
}

impl<'ast> Visit<'ast> for LongFunctions {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            self.check(&f.sig.ident, syn::spanned::Spanned::span(f));
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.sig.ident, syn::spanned::Spanned::span(f));
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if f.default.is_some() {
            self.check(&f.sig.ident, syn::spanned::Spanned::span(f));
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_above_the_limit() {
    let mut long = Vec::new();
    for f in read_sources().values() {
        let mut visitor = LongFunctions::default();
        visitor.visit_file(&f.ast);
        for (name, lines) in visitor.found {
            long.push(format!("{}: {name}: {lines} lines", f.path.display()));
        }
    }
    assert!(
        long.is_empty(),
        "functions above {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The simulator reads packet captures through the `net` crate and needs none of the
/// processes, job files or services of `transport`.
#[test]
fn the_simulator_builds_without_transport() {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let resolve = &meta["resolve"]["nodes"];
    // Package ids read `name version (source)` in older cargo, `source#name@version` in newer.
    let node_of = |name: &str| -> Option<&serde_json::Value> {
        resolve.as_array()?.iter().find(|n| {
            n["id"].as_str().is_some_and(|id| {
                id.starts_with(&format!("{name} ")) || id.contains(&format!("#{name}@"))
            })
        })
    };
    // Walk the simulator's normal (non-dev) dependencies.
    let mut seen = BTreeSet::new();
    let mut stack = vec![
        node_of("switchgnn-sim").expect("sim in the resolve graph")["id"]
            .as_str()
            .unwrap()
            .to_string(),
    ];
    while let Some(id) = stack.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let node = resolve
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                stack.push(dep["pkg"].as_str().unwrap().to_string());
            }
        }
    }
    let transport: Vec<&String> = seen
        .iter()
        .filter(|id| id.contains("switchgnn-transport"))
        .collect();
    assert!(
        transport.is_empty(),
        "switchgnn-sim depends on {transport:?}"
    );
}
