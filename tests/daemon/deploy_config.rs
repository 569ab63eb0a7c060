//! The example configurations in deploy/ list every setting the daemon
//! reads: `deploy/cuzk.toml` (the Docker image's, compose's and the systemd
//! unit's) has every table of `Config`, nested ones included, and every
//! table lists every field, set or shown commented out; the CUDA variant the
//! Kubernetes ConfigMap embeds lists every field of each table it has. A
//! setting added to config.rs without them fails here, named. The tables and
//! names come from the types' own `Deserialize` and the values from the
//! serialized default: no list of names to keep by hand.

use std::cell::RefCell;

use cuzk::config::Config;
use serde::de::{self, Deserialize, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

const CUZK_TOML: &str = include_str!("../../deploy/cuzk.toml");
const CONFIGMAP: &str = include_str!("../../deploy/k8s/configmap.yaml");

/// The step of a path into an array's element (`[[a.b]]` in TOML).
const ELEMENT: &str = "[]";
/// The step of a path into a map's value under any key (`[a.b.NAME]`).
const ANY_KEY: &str = "*";

/// What a type's `Deserialize` asks for at the end of a path.
#[derive(Debug)]
enum Asked {
    /// A struct: a TOML table with these fields.
    Struct(&'static [&'static str]),
    /// A sequence: an array of values, or of tables.
    Seq,
    /// A map: a table of values, or of tables, under names an operator picks.
    Map,
    /// Anything else (a number, a string, an enum, an untagged `"auto"`-or-
    /// bytes): a value on its setting's own line.
    Value,
}

/// A deserializer that answers no value: it follows `rest` down the struct
/// fields, array elements and map values that `Config`'s `Deserialize` asks
/// for, records what is asked for where the path ends, and fails there.
/// Every field is reached, an `Option` unset by default included
/// (serializing the default leaves those out).
#[derive(Clone, Copy)]
struct Probe<'a> {
    /// The steps still to take: field names, [`ELEMENT`], [`ANY_KEY`].
    rest: &'a [String],
    /// What the path's end asked for.
    asked: &'a RefCell<Option<Asked>>,
}

impl<'a> Probe<'a> {
    fn deeper(&self) -> Probe<'a> {
        Probe { rest: &self.rest[1..], asked: self.asked }
    }

    /// Records `asked` if the path ends here; the probe's answer either way
    /// is an error (it builds no value).
    fn ends_here(&self, asked: Asked) -> bool {
        let end = self.rest.is_empty();
        if end {
            *self.asked.borrow_mut() = Some(asked);
        }
        end
    }
}

fn stop<T>() -> Result<T, de::value::Error> {
    Err(de::Error::custom("the probe answers no value"))
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        self.ends_here(Asked::Value);
        stop()
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        if self.ends_here(Asked::Struct(fields)) {
            return stop();
        }
        visitor.visit_map(OneEntry { key: Some(self.rest[0].as_str()), value: self.deeper() })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if self.ends_here(Asked::Map) {
            return stop();
        }
        visitor.visit_map(OneEntry { key: Some("name"), value: self.deeper() })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if self.ends_here(Asked::Seq) {
            return stop();
        }
        visitor.visit_seq(OneElement(Some(self.deeper())))
    }

    /// An `Option` is its content, set.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    /// A newtype (`StoreUrl`) is its content.
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct tuple tuple_struct enum identifier ignored_any
    }
}

/// A struct's or map's one entry on the probe's path.
struct OneEntry<'a, 'k> {
    key: Option<&'k str>,
    value: Probe<'a>,
}

impl<'de> MapAccess<'de> for OneEntry<'_, '_> {
    type Error = de::value::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        self.key.take().map(|key| seed.deserialize(key.into_deserializer())).transpose()
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        seed.deserialize(self.value)
    }
}

/// An array's one element on the probe's path.
struct OneElement<'a>(Option<Probe<'a>>);

impl<'de> SeqAccess<'de> for OneElement<'_> {
    type Error = de::value::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0.take().map(|probe| seed.deserialize(probe)).transpose()
    }
}

/// What `Config` asks for at `path`.
fn asked_at(path: &[String]) -> Asked {
    let asked = RefCell::new(None);
    assert!(Config::deserialize(Probe { rest: path, asked: &asked }).is_err(), "the probe answers no value");
    asked.into_inner().unwrap_or_else(|| panic!("Config has nothing at {path:?}"))
}

/// One TOML table of the configuration: where it is and what it holds.
#[derive(Debug)]
struct Table {
    /// Its path from the top: field names, [`ELEMENT`], [`ANY_KEY`]; empty
    /// for the top level.
    path: Vec<String>,
    /// Its fields written as `name = value` lines (not as tables of their own).
    settings: Vec<&'static str>,
}

impl Table {
    /// The table's name as a file writes its header (`a.b`; `auth.tenants.*`).
    fn name(&self) -> String {
        let steps: Vec<&str> = self.path.iter().map(String::as_str).filter(|step| *step != ELEMENT).collect();
        steps.join(".")
    }

    /// An array of tables: `[[name]]`.
    fn is_array(&self) -> bool {
        self.path.last().is_some_and(|step| step == ELEMENT)
    }

    /// Whether a header's name (between its brackets) is this table's.
    fn is_named(&self, header: &str) -> bool {
        let name = self.name();
        let (mine, theirs): (Vec<&str>, Vec<&str>) = (name.split('.').collect(), header.split('.').collect());
        mine.len() == theirs.len() && mine.iter().zip(&theirs).all(|(m, t)| *m == ANY_KEY || m == t)
    }

    /// The value config.rs's default gives `field` of this table, if it
    /// serializes one (an unset `Option`, or an element of an array or map
    /// empty by default, has none).
    fn default_of(&self, defaults: &toml::Value, field: &str) -> Option<toml::Value> {
        let mut value = defaults;
        for step in &self.path {
            value = value.get(step.as_str())?;
        }
        value.get(field).cloned()
    }
}

/// Every table of `Config`, the top level first, found by walking the
/// types' `Deserialize`: a struct field is a table; an array or map of
/// structs, tables under `[[...]]` or `[....NAME]`; anything else a setting.
fn tables() -> Vec<Table> {
    let mut found = Vec::new();
    let mut pending = vec![Vec::new()];
    while let Some(path) = pending.pop() {
        let Asked::Struct(fields) = asked_at(&path) else { unreachable!("{path:?} was probed as a struct") };
        let mut settings = Vec::new();
        for field in fields {
            let at = |steps: &[&str]| -> Vec<String> {
                path.iter()
                    .cloned()
                    .chain([field.to_string()])
                    .chain(steps.iter().map(|s| s.to_string()))
                    .collect()
            };
            let table = match asked_at(&at(&[])) {
                Asked::Struct(_) => Some(at(&[])),
                Asked::Seq => matches!(asked_at(&at(&[ELEMENT])), Asked::Struct(_)).then(|| at(&[ELEMENT])),
                Asked::Map => matches!(asked_at(&at(&[ANY_KEY])), Asked::Struct(_)).then(|| at(&[ANY_KEY])),
                Asked::Value => None,
            };
            match table {
                Some(table) => pending.push(table),
                None => settings.push(*field),
            }
        }
        found.push(Table { path, settings });
    }
    found
}

/// A line without its leading `#`s and spaces: how an operator uncomments it.
fn uncommented(line: &str) -> &str {
    line.trim_start_matches(['#', ' '])
}

/// The name between a header line's brackets, set or commented out.
fn header(line: &str) -> Option<(&str, bool)> {
    let word = uncommented(line).split_whitespace().next()?;
    if let Some(name) = word.strip_prefix("[[").and_then(|w| w.strip_suffix("]]")) {
        return Some((name, true));
    }
    word.strip_prefix('[').and_then(|w| w.strip_suffix(']')).map(|name| (name, false))
}

/// The setting a line names, set (`name = value`) or shown commented out
/// (`# name = value`), which is how an unset `Option` is listed.
fn setting(line: &str) -> Option<&str> {
    let (name, _) = uncommented(line).split_once('=')?;
    let name = name.trim();
    name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_').then_some(name)
}

/// One table as a file writes it: its header line (none at the top level)
/// and its lines up to the first blank one or the next header, set or
/// commented out (the deploy files keep a table's settings together, a blank
/// line before what follows). The top level runs to the first header.
struct Section<'a> {
    header: Option<&'a str>,
    lines: Vec<&'a str>,
}

/// Every section of `toml` that writes `table` (an array of tables, or
/// tables under names, may be written several times).
fn sections<'a>(toml: &'a str, table: &Table) -> Vec<Section<'a>> {
    let lines: Vec<&str> = toml.lines().collect();
    if table.path.is_empty() {
        let top = lines.iter().take_while(|line| header(line).is_none()).copied().collect();
        return vec![Section { header: None, lines: top }];
    }
    let starts = lines.iter().enumerate().filter(|(_, line)| {
        header(line).is_some_and(|(name, array)| array == table.is_array() && table.is_named(name))
    });
    starts
        .map(|(at, line)| Section {
            header: Some(line),
            lines: lines[at + 1..]
                .iter()
                .take_while(|line| !line.trim().is_empty() && header(line).is_none())
                .copied()
                .collect(),
        })
        .collect()
}

impl Section<'_> {
    /// The section's text with its commented-out header and settings
    /// uncommented, as an operator would to use them all.
    fn uncommented(&self) -> String {
        let lines =
            self.header.into_iter().chain(self.lines.iter().copied().filter(|line| setting(line).is_some()));
        lines.map(|line| format!("{}\n", uncommented(line))).collect()
    }
}

/// Checks `toml` against config.rs: it is a valid config; each of `tables`
/// it writes lists every setting of the table; every commented-out section
/// and setting, uncommented, is one the daemon takes; and every value shown,
/// set or commented out, is config.rs's default or says what that is
/// (`# default: 30`). `required`: every table must be written.
fn assert_lists_every_setting(file: &str, toml: &str, tables: &[Table], required: bool) {
    if let Err(e) = toml::from_str::<Config>(toml) {
        panic!("{file} is not a valid config: {e}");
    }
    let defaults = toml::Value::try_from(Config::default()).unwrap();
    for table in tables {
        let name = table.name();
        let sections = sections(toml, table);
        if sections.is_empty() {
            assert!(!required, "{file} has no [{name}] (not even commented out)");
            continue;
        }
        let named: Vec<&str> =
            sections.iter().flat_map(|s| s.lines.iter().filter_map(|line| setting(line))).collect();
        let missing: Vec<_> = table.settings.iter().filter(|field| !named.contains(field)).collect();
        assert!(missing.is_empty(), "{file}'s [{name}] does not list {missing:?}");
        for section in &sections {
            let text = section.uncommented();
            if let Err(e) = toml::from_str::<Config>(&text) {
                panic!("{file}: the daemon does not take\n{text}: {e}");
            }
            for line in section.lines.iter().filter(|line| setting(line).is_some()) {
                let shown: toml::Table = toml::from_str(uncommented(line)).unwrap();
                let (field, value) = shown.into_iter().next().unwrap();
                let Some(default) = table.default_of(&defaults, &field) else { continue };
                assert!(
                    value == default || line.contains(&format!("default: {default}")),
                    "{file}: {name}.{field} is {value}, not config.rs's default {default}, and does not say so"
                );
            }
        }
    }
}

/// The TOML file the ConfigMap embeds under `cuzk.toml: |`, unindented.
fn configmap_toml() -> String {
    let mut lines = CONFIGMAP.lines().skip_while(|line| line.trim() != "cuzk.toml: |");
    assert!(lines.next().is_some(), "no cuzk.toml in the ConfigMap");
    let block: Vec<&str> = lines.take_while(|line| line.is_empty() || line.starts_with("    ")).collect();
    block.iter().map(|line| format!("{}\n", line.get(4..).unwrap_or(""))).collect()
}

#[test]
fn config_has_the_tables_a_deploy_file_writes() {
    // The walk itself: a table missed here would go unchecked below.
    let names: Vec<(String, bool)> = tables().iter().map(|table| (table.name(), table.is_array())).collect();
    for expected in
        ["", "scheduler.pacer", "sim.faults.prove", "auth.tenant_defaults", "auth.tenants.*", "tls"]
    {
        assert!(names.contains(&(expected.to_string(), false)), "no [{expected}] in {names:?}");
    }
    assert!(names.contains(&("auth.tokens".to_string(), true)), "no [[auth.tokens]] in {names:?}");
    let top = tables().into_iter().find(|table| table.path.is_empty()).unwrap();
    assert!(
        top.settings.contains(&"params_dir") && !top.settings.contains(&"scheduler"),
        "{:?}",
        top.settings
    );
}

#[test]
fn deploy_cuzk_toml_lists_every_setting() {
    assert_lists_every_setting("deploy/cuzk.toml", CUZK_TOML, &tables(), true);
}

/// The ConfigMap is the CUDA variant of deploy/cuzk.toml for a fleet of
/// pods. It leaves out [cpu] and [sim] (a CUDA backend reads neither),
/// [auth] (the tokens come from the Secret's token file) and [grpc] and
/// [tls] (off, as their defaults are). Of the tables it has, these differ
/// from deploy/cuzk.toml's on purpose: the top level (`backend = "cuda"`),
/// [scheduler] and [cuda] (comments about the container and the device
/// plugin) and [fleet] (the node's name is the pod's). The others are the
/// same text.
const SAME_IN_BOTH: [&str; 4] = ["scheduler.pacer", "proving", "limits", "store"];

#[test]
fn the_configmap_lists_every_setting_of_its_tables() {
    let embedded = configmap_toml();
    let tables = tables();
    assert_lists_every_setting("deploy/k8s/configmap.yaml", &embedded, &tables, false);
    for name in SAME_IN_BOTH {
        let table = tables.iter().find(|table| table.name() == name).unwrap();
        let (theirs, ours) = (sections(&embedded, table), sections(CUZK_TOML, table));
        let lines = |sections: &[Section]| {
            sections.iter().map(|section| section.lines.join("\n")).collect::<Vec<_>>()
        };
        assert_eq!(lines(&theirs), lines(&ours), "the ConfigMap's [{name}] differs from deploy/cuzk.toml's");
    }
}
