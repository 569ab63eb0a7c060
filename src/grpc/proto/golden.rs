//! The golden test of the gRPC contract (a unit test, so that it adds no
//! test binary to link): the compiled descriptor of
//! proto/cuzk/v1/proving.proto (package, service, RPC names and kinds,
//! every enum's values and every message's field names, numbers, labels
//! and types) rendered as text must equal tests/fixtures/curio-proto.txt,
//! which was written by hand from the tables of Curio's protocol
//! (docs/curio.md describes it). An edit of the .proto that would
//! change what Curio's client sends or reads fails here.

use std::collections::BTreeMap;

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet};

/// Item header (`message X`, `enum X`, `service X`, or a file-level line)
/// → its indented lines, in order.
type Blocks = BTreeMap<String, Vec<String>>;

fn fixture() -> Blocks {
    let text = include_str!("../../../tests/fixtures/curio-proto.txt");
    let mut blocks = Blocks::new();
    let mut current = None;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        match line.strip_prefix("  ") {
            Some(member) => blocks
                .get_mut(current.as_ref().expect("a member follows its header"))
                .expect("header inserted")
                .push(member.to_string()),
            None => {
                blocks.insert(line.to_string(), Vec::new());
                current = Some(line.to_string());
            }
        }
    }
    blocks
}

/// A type as the fixture writes it: scalars by their proto name, messages
/// and enums by their name within the package (`Outer.Inner` if nested).
fn type_name(field: &FieldDescriptorProto) -> String {
    match field.r#type() {
        Type::Message | Type::Enum => field.type_name().trim_start_matches(".cuzk.v1.").to_string(),
        Type::String => "string".into(),
        Type::Bytes => "bytes".into(),
        Type::Bool => "bool".into(),
        Type::Uint64 => "uint64".into(),
        Type::Uint32 => "uint32".into(),
        other => format!("{other:?}"),
    }
}

fn render_enum(blocks: &mut Blocks, prefix: &str, e: &EnumDescriptorProto) {
    let values = e.value.iter().map(|v| format!("{} {}", v.number(), v.name())).collect();
    blocks.insert(format!("enum {prefix}{}", e.name()), values);
}

fn render_message(blocks: &mut Blocks, prefix: &str, m: &DescriptorProto) {
    let mut fields: Vec<&FieldDescriptorProto> = m.field.iter().collect();
    fields.sort_by_key(|f| f.number());
    let lines = fields
        .iter()
        .map(|f| {
            let label = match (f.label(), f.proto3_optional()) {
                (Label::Repeated, _) => "repeated ",
                (_, true) => "optional ",
                _ => "",
            };
            format!("{} {} {label}{}", f.number(), f.name(), type_name(f))
        })
        .collect();
    blocks.insert(format!("message {prefix}{}", m.name()), lines);
    let inner = format!("{prefix}{}.", m.name());
    for e in &m.enum_type {
        render_enum(blocks, &inner, e);
    }
    for nested in &m.nested_type {
        render_message(blocks, &inner, nested);
    }
}

fn compiled() -> Blocks {
    let set = FileDescriptorSet::decode(super::DESCRIPTOR_SET).expect("the descriptor set decodes");
    assert_eq!(set.file.len(), 1, "proving.proto alone, importing nothing");
    let file = &set.file[0];
    let mut blocks = Blocks::new();
    for line in [
        format!("syntax {}", file.syntax()),
        format!("package {}", file.package()),
        match file.dependency.is_empty() {
            true => "imports none".into(),
            false => format!("imports {}", file.dependency.join(", ")),
        },
        match file.options {
            None => "options none".into(),
            Some(ref options) => format!("options {options:?}"),
        },
    ] {
        blocks.insert(line, Vec::new());
    }
    for service in &file.service {
        let rpcs = service
            .method
            .iter()
            .map(|m| {
                let kind = match (m.client_streaming(), m.server_streaming()) {
                    (false, false) => "unary",
                    _ => "streaming",
                };
                format!(
                    "rpc {} ({}) returns ({}) {kind}",
                    m.name(),
                    m.input_type().trim_start_matches(".cuzk.v1."),
                    m.output_type().trim_start_matches(".cuzk.v1.")
                )
            })
            .collect();
        blocks.insert(format!("service {}", service.name()), rpcs);
    }
    for e in &file.enum_type {
        render_enum(&mut blocks, "", e);
    }
    for m in &file.message_type {
        render_message(&mut blocks, "", m);
    }
    blocks
}

#[test]
fn the_compiled_proto_is_curios_protocol() {
    let (expected, actual) = (fixture(), compiled());
    for (header, lines) in &expected {
        assert_eq!(actual.get(header), Some(lines), "{header}: the .proto differs from Curio's protocol");
    }
    let extra: Vec<&String> = actual.keys().filter(|h| !expected.contains_key(*h)).collect();
    assert!(extra.is_empty(), "items Curio's protocol does not have: {extra:?}");
    // The fixture itself holds what the service is known by on the wire.
    assert!(expected.contains_key("package cuzk.v1") && expected.contains_key("service ProvingEngine"));
    assert_eq!(expected["service ProvingEngine"].len(), 8);
}
