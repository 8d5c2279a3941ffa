//! The descriptor tables of `gcp::schema` and `gcp::wkt` against the
//! compiled proto files: `data/mcp_gcp.fds.bin` is the `FileDescriptorSet`
//! that protoc makes of the vendored `proto/gcp/*.proto`
//! (`scripts/gcp-schema.sh`). It is read here with this crate's own
//! `wire::Reader`, so a typo in a table, a stale table or a stale descriptor
//! set fails. The tables are compared by name: with feature `names` only.
#![cfg(feature = "names")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use mcpwire_proto::gcp::{
    self, EnumDesc, FieldType, Label, MessageDesc, PROTO_FILES, Rpc, SERVICE_PREFIX, schema, wkt,
};
use mcpwire_proto::wire::{Reader, WireType};

const FDS: &[u8] = include_bytes!("data/mcp_gcp.fds.bin");

#[derive(Debug, Default)]
struct Field {
    name: String,
    number: u64,
    label: u64,
    ty: u64,
    type_name: String,
    deprecated: bool,
    proto3_optional: bool,
}

#[derive(Debug, Default)]
struct Message {
    fields: Vec<Field>,
    map_entry: bool,
    file: String,
}

#[derive(Debug, Default)]
struct Enum {
    values: Vec<(String, i32)>,
    file: String,
}

#[derive(Debug, Default)]
struct Method {
    name: String,
    input: String,
    output: String,
    streaming: bool,
}

#[derive(Debug, Default)]
struct Catalogue {
    messages: BTreeMap<String, Message>,
    enums: BTreeMap<String, Enum>,
    /// Service full name → methods.
    services: BTreeMap<String, Vec<Method>>,
}

/// Calls `f(field number, reader positioned at the value)` for each field of
/// `bytes`; `f` reads the value or returns false to have it skipped.
fn fields(bytes: &[u8], mut f: impl FnMut(u32, WireType, &mut Reader<'_>) -> bool) {
    let mut r = Reader::new(bytes);
    while let Some(tag) = r.read_tag().unwrap() {
        if !f(tag.field, tag.wire_type, &mut r) {
            r.skip(tag.wire_type).unwrap();
        }
    }
}

fn text(r: &mut Reader<'_>) -> String {
    String::from_utf8(r.read_len().unwrap().to_vec()).unwrap()
}

/// `*Options` field `number` is a true bool.
fn option(bytes: &[u8], number: u32) -> bool {
    let mut set = false;
    fields(bytes, |n, _, r| {
        if n == number {
            set = r.read_varint().unwrap() != 0;
            return true;
        }
        false
    });
    set
}

fn parse_field(bytes: &[u8]) -> Field {
    let mut field = Field::default();
    fields(bytes, |n, _, r| {
        match n {
            1 => field.name = text(r),
            3 => field.number = r.read_varint().unwrap(),
            4 => field.label = r.read_varint().unwrap(),
            5 => field.ty = r.read_varint().unwrap(),
            6 => field.type_name = text(r).trim_start_matches('.').to_owned(),
            // FieldOptions.deprecated = 3.
            8 => field.deprecated = option(r.read_len().unwrap(), 3),
            17 => field.proto3_optional = r.read_varint().unwrap() != 0,
            _ => return false,
        }
        true
    });
    field
}

fn parse_enum(cat: &mut Catalogue, file: &str, scope: &str, bytes: &[u8]) {
    let mut name = String::new();
    let mut e = Enum {
        file: file.to_owned(),
        ..Enum::default()
    };
    fields(bytes, |n, _, r| {
        match n {
            1 => name = text(r),
            2 => {
                let (mut value_name, mut number) = (String::new(), 0i32);
                fields(r.read_len().unwrap(), |n, _, r| {
                    match n {
                        1 => value_name = text(r),
                        2 => number = r.read_varint().unwrap() as i32,
                        _ => return false,
                    }
                    true
                });
                e.values.push((value_name, number));
            }
            _ => return false,
        }
        true
    });
    cat.enums.insert(format!("{scope}.{name}"), e);
}

fn parse_message(cat: &mut Catalogue, file: &str, scope: &str, bytes: &[u8]) {
    let mut name = String::new();
    fields(bytes, |n, _, r| {
        if n == 1 {
            name = text(r);
            return true;
        }
        false
    });
    let full = format!("{scope}.{name}");
    let mut msg = Message {
        file: file.to_owned(),
        ..Message::default()
    };
    fields(bytes, |n, _, r| {
        match n {
            2 => msg.fields.push(parse_field(r.read_len().unwrap())),
            3 => parse_message(cat, file, &full, r.read_len().unwrap()),
            4 => parse_enum(cat, file, &full, r.read_len().unwrap()),
            // MessageOptions.map_entry = 7.
            7 => msg.map_entry = option(r.read_len().unwrap(), 7),
            _ => return false,
        }
        true
    });
    cat.messages.insert(full, msg);
}

fn parse_service(cat: &mut Catalogue, package: &str, bytes: &[u8]) {
    let mut name = String::new();
    let mut methods = Vec::new();
    fields(bytes, |n, _, r| {
        match n {
            1 => name = text(r),
            2 => {
                let mut m = Method::default();
                fields(r.read_len().unwrap(), |n, _, r| {
                    match n {
                        1 => m.name = text(r),
                        2 => m.input = text(r).trim_start_matches('.').to_owned(),
                        3 => m.output = text(r).trim_start_matches('.').to_owned(),
                        5 | 6 => m.streaming |= r.read_varint().unwrap() != 0,
                        _ => return false,
                    }
                    true
                });
                methods.push(m);
            }
            _ => return false,
        }
        true
    });
    cat.services.insert(format!("{package}.{name}"), methods);
}

fn catalogue() -> Catalogue {
    let mut cat = Catalogue::default();
    // FileDescriptorSet.file = 1.
    fields(FDS, |n, _, r| {
        if n != 1 {
            return false;
        }
        let file = r.read_len().unwrap();
        let (mut name, mut package) = (String::new(), String::new());
        fields(file, |n, _, r| {
            match n {
                1 => name = text(r),
                2 => package = text(r),
                _ => return false,
            }
            true
        });
        fields(file, |n, _, r| {
            match n {
                4 => parse_message(&mut cat, &name, &package, r.read_len().unwrap()),
                5 => parse_enum(&mut cat, &name, &package, r.read_len().unwrap()),
                6 => parse_service(&mut cat, &package, r.read_len().unwrap()),
                _ => return false,
            }
            true
        });
        true
    });
    cat
}

/// `ty` described as the descriptor does: (type code, type name).
fn type_of(ty: FieldType) -> (u64, &'static str) {
    match ty {
        FieldType::Double => (1, ""),
        FieldType::Float => (2, ""),
        FieldType::Int64 => (3, ""),
        FieldType::Uint64 => (4, ""),
        FieldType::Int32 => (5, ""),
        FieldType::Bool => (8, ""),
        FieldType::String => (9, ""),
        FieldType::Message(m) | FieldType::Map(m) => (11, m.name),
        FieldType::Bytes => (12, ""),
        FieldType::Uint32 => (13, ""),
        FieldType::Enum(e) => (14, e.name),
    }
}

fn check_enum(cat: &Catalogue, e: &EnumDesc) {
    let Some(compiled) = cat.enums.get(e.name) else {
        panic!("{} is not in the descriptor set", e.name);
    };
    let ours: Vec<(String, i32)> = e
        .values
        .iter()
        .map(|(n, v)| ((*n).to_owned(), *v))
        .collect();
    assert_eq!(ours, compiled.values, "{}", e.name);
}

/// Checks `desc` and everything it refers to; collects the names seen.
fn check_message(cat: &Catalogue, desc: &'static MessageDesc, seen: &mut BTreeSet<&'static str>) {
    if !seen.insert(desc.name) {
        return;
    }
    let Some(compiled) = cat.messages.get(desc.name) else {
        panic!("{} is not in the descriptor set", desc.name);
    };
    assert_eq!(
        desc.fields.len(),
        compiled.fields.len(),
        "{}: number of fields",
        desc.name
    );
    for (ours, theirs) in desc.fields.iter().zip(&compiled.fields) {
        let at = format!("{}.{}", desc.name, ours.name);
        assert_eq!(ours.name, theirs.name, "{at}: name (declaration order)");
        assert_eq!(u64::from(ours.number), theirs.number, "{at}: number");
        assert_eq!(
            type_of(ours.ty),
            (theirs.ty, theirs.type_name.as_str()),
            "{at}: type"
        );
        let label = match (theirs.label, theirs.proto3_optional) {
            (3, _) => Label::Repeated,
            (_, true) => Label::Optional,
            _ => Label::Singular,
        };
        assert_eq!(ours.label, label, "{at}: label");
        assert_eq!(ours.deprecated, theirs.deprecated, "{at}: deprecated");
        match ours.ty {
            FieldType::Map(entry) => {
                assert!(cat.messages[entry.name].map_entry, "{at}: map<> entry");
                check_message(cat, entry, seen);
            }
            FieldType::Message(m) => {
                assert!(
                    !cat.messages[m.name].map_entry,
                    "{at}: a map, not a message"
                );
                check_message(cat, m, seen);
            }
            FieldType::Enum(e) => check_enum(cat, e),
            _ => {}
        }
    }
}

#[test]
fn tables_equal_the_compiled_proto_files() {
    let cat = catalogue();
    let mut seen = BTreeSet::new();
    for desc in schema::MESSAGES {
        assert!(!cat.messages[desc.name].map_entry, "{}", desc.name);
        check_message(&cat, desc, &mut seen);
    }
    for desc in [&wkt::STRUCT, &wkt::VALUE, &wkt::LIST_VALUE, &wkt::DURATION] {
        check_message(&cat, desc, &mut seen);
    }

    // Every message of the binding's file is in MESSAGES, once, map entries
    // aside: the digest's 60 messages and 214 fields.
    let compiled: BTreeSet<&str> = cat
        .messages
        .iter()
        .filter(|(_, m)| m.file == "mcp_messages.proto" && !m.map_entry)
        .map(|(name, _)| name.as_str())
        .collect();
    let ours: BTreeSet<&str> = schema::MESSAGES.iter().map(|m| m.name).collect();
    assert_eq!(ours, compiled);
    assert_eq!(schema::MESSAGES.len(), 60);
    let fields: usize = schema::MESSAGES.iter().map(|m| m.fields.len()).sum();
    assert_eq!(fields, 214);

    let compiled: BTreeSet<&str> = cat
        .enums
        .iter()
        .filter(|(_, e)| e.file == "mcp_messages.proto")
        .map(|(name, _)| name.as_str())
        .collect();
    let ours: BTreeSet<&str> = schema::ENUMS.iter().map(|e| e.name).collect();
    assert_eq!(ours, compiled);
    assert_eq!(schema::ENUMS.len(), 8);
    let values: usize = schema::ENUMS.iter().map(|e| e.values.len()).sum();
    assert_eq!(values, 29);
    for e in schema::ENUMS {
        check_enum(&cat, e);
    }
    check_enum(&cat, &wkt::NULL_VALUE);
}

#[test]
fn rpcs_equal_the_compiled_service() {
    let cat = catalogue();
    let methods = &cat.services[gcp::SERVICE];
    assert_eq!(methods.len(), Rpc::ALL.len());
    for (rpc, method) in Rpc::ALL.into_iter().zip(methods) {
        assert_eq!(rpc.name(), method.name);
        assert_eq!(rpc.request().name, method.input, "{rpc}");
        assert_eq!(rpc.response().name, method.output, "{rpc}");
        assert!(!method.streaming, "{rpc} is unary");
        assert_eq!(rpc.path(), format!("{SERVICE_PREFIX}{}", method.name));
        assert_eq!(Rpc::from_path(rpc.path().as_bytes()), Some(rpc));
        assert_eq!(Rpc::for_method(rpc.method().as_bytes()), Some(rpc));
    }
    assert_eq!(cat.services.len(), 1, "one service");
}

#[test]
fn rpc_lookups_refuse_near_misses() {
    for path in [
        "/model_context_protocol.Mcp/Initialize",
        "/model_context_protocol.Mcp/calltool",
        "/model_context_protocol.Mcp/CallTool/",
        "/model_context_protocol.Mcp/",
        "/mcp.zig.transport.v1.Mcp/Call",
        "model_context_protocol.Mcp/CallTool",
    ] {
        assert_eq!(Rpc::from_path(path.as_bytes()), None, "{path}");
    }
    for method in [
        "server/discover",
        "subscriptions/listen",
        "ping",
        "tools/call ",
    ] {
        assert_eq!(Rpc::for_method(method.as_bytes()), None, "{method}");
    }
    let keys: Vec<_> = Rpc::ALL.map(Rpc::routing_key).into();
    assert_eq!(
        keys,
        [
            None,
            Some("mcp_resource"),
            None,
            None,
            Some("mcp_prompt"),
            None,
            Some("mcp_tool"),
            Some("mcp_resource"),
        ]
    );
    let methods = Rpc::ALL.map(Rpc::method);
    assert_eq!(
        methods,
        [
            "resources/list",
            "resources/read",
            "resources/templates/list",
            "prompts/list",
            "prompts/get",
            "tools/list",
            "tools/call",
            "completion/complete",
        ]
    );
}

/// The descriptor set is the one of the vendored text: each field of each
/// message reads `<name> = <number>` in `mcp_messages.proto`, and each RPC
/// is declared in `mcp.proto`.
#[test]
fn descriptor_set_matches_the_vendored_text() {
    let [(mcp_name, mcp), (messages_name, messages)] = PROTO_FILES;
    assert_eq!(
        (mcp_name, messages_name),
        ("mcp.proto", "mcp_messages.proto")
    );
    for desc in schema::MESSAGES {
        for field in desc.fields {
            let decl = format!(" {} = {}", field.name, field.number);
            assert!(messages.contains(&decl), "{}: {decl}", desc.name);
        }
        let short = desc.short_name();
        assert!(messages.contains(&format!("message {short} {{")), "{short}");
    }
    for rpc in Rpc::ALL {
        let decl = format!("rpc {}({})", rpc.name(), rpc.request().short_name());
        assert!(mcp.contains(&decl), "{decl}");
    }
    assert!(gcp::PROTO_LICENSE.starts_with("MIT License"));
}
