//! The example configurations in deploy/ list every `[limits]` setting the
//! daemon reads, at its default: `deploy/cuzk.toml` (the Docker image's and
//! the systemd unit's) and the CUDA variant the Kubernetes ConfigMap embeds,
//! whose `[limits]` is the same text. A setting added to `config::Limits` without
//! them fails here. The names come from the struct itself and the values from
//! its serialized default: no list of names to keep by hand.

use std::collections::BTreeSet;

use cuzk::config::{Config, Limits};
use serde::de::{self, Deserialize, Visitor};

const CUZK_TOML: &str = include_str!("../deploy/cuzk.toml");
const CONFIGMAP: &str = include_str!("../deploy/k8s/configmap.yaml");

/// A deserializer that answers nothing and records the field names a
/// struct's `Deserialize` asks for: every field, an `Option` left unset by
/// default included (serializing the default leaves those out).
#[derive(Default)]
struct FieldNames(Vec<&'static str>);

impl<'de> de::Deserializer<'de> for &mut FieldNames {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a struct's field names are read"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.extend(fields);
        Err(de::Error::custom("field names read"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// Every field name of `T`.
fn field_names<'de, T: Deserialize<'de>>() -> BTreeSet<&'static str> {
    let mut names = FieldNames::default();
    assert!(T::deserialize(&mut names).is_err(), "the probe answers no value");
    names.0.into_iter().collect()
}

/// The lines of the table `[name]` in a TOML text, up to the first blank
/// line or the next table header, set or commented out (the deploy files
/// keep a table's settings together, its blank line before what follows).
fn section<'a>(toml: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    let mut lines = toml.lines().skip_while(|line| line.trim() != header);
    assert!(lines.next().is_some(), "no {header} in\n{toml}");
    let is_header = |line: &str| line.trim_start_matches(['#', ' ']).starts_with('[');
    lines.take_while(|line| !line.trim().is_empty() && !is_header(line)).collect()
}

/// The settings a section's lines name: set (`name = value`) or shown
/// commented out at their default (`# name = value`), which is how an unset
/// `Option` is listed.
fn named(lines: &[&str]) -> BTreeSet<String> {
    lines
        .iter()
        .filter_map(|line| {
            let (name, _) = line.trim_start_matches(['#', ' ']).split_once('=')?;
            let name = name.trim();
            name.chars().all(|c| c.is_ascii_lowercase() || c == '_').then(|| name.to_string())
        })
        .collect()
}

/// The TOML file the ConfigMap embeds under `cuzk.toml: |`, unindented.
fn configmap_toml() -> String {
    let mut lines = CONFIGMAP.lines().skip_while(|line| line.trim() != "cuzk.toml: |");
    assert!(lines.next().is_some(), "no cuzk.toml in the ConfigMap");
    let block: Vec<&str> = lines.take_while(|line| line.is_empty() || line.starts_with("    ")).collect();
    block.iter().map(|line| format!("{}\n", line.get(4..).unwrap_or(""))).collect()
}

/// `toml`'s `[limits]` lists every field of `Limits`, and each one set is
/// at its default.
fn assert_every_limit_listed(file: &str, toml: &str) {
    if let Err(e) = toml::from_str::<Config>(toml) {
        panic!("{file} is not a valid config: {e}");
    }
    let missing: Vec<_> = field_names::<Limits>()
        .into_iter()
        .filter(|name| !named(&section(toml, "limits")).contains(*name))
        .collect();
    assert!(missing.is_empty(), "{file}'s [limits] does not list {missing:?}");
    let defaults = toml::Value::try_from(Limits::default()).unwrap();
    let table: toml::Table = toml::from_str(toml).unwrap();
    for (name, value) in table["limits"].as_table().unwrap() {
        assert_eq!(Some(value), defaults.get(name), "{file}: limits.{name} is not config.rs's default");
    }
}

#[test]
fn deploy_cuzk_toml_lists_every_limit_at_its_default() {
    assert_every_limit_listed("deploy/cuzk.toml", CUZK_TOML);
}

#[test]
fn the_configmap_lists_every_limit_as_deploy_cuzk_toml_does() {
    let embedded = configmap_toml();
    assert_every_limit_listed("deploy/k8s/configmap.yaml", &embedded);
    assert_eq!(
        section(&embedded, "limits"),
        section(CUZK_TOML, "limits"),
        "the ConfigMap's [limits] differs from deploy/cuzk.toml's"
    );
}

#[test]
fn a_commented_setting_shows_a_value_the_daemon_takes() {
    // `# parse_budget_bytes = ...`: an operator removes the `#` to use it.
    for line in section(CUZK_TOML, "limits").iter().filter(|line| line.starts_with('#')) {
        let setting = line.trim_start_matches(['#', ' ']).split("  #").next().unwrap();
        let toml = format!("[limits]\n{setting}\n");
        if let Err(e) = toml::from_str::<Config>(&toml) {
            panic!("deploy/cuzk.toml's `{setting}` is not taken: {e}");
        }
    }
}
