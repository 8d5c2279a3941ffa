#!/usr/bin/env python3
"""Writes proto/src/gcp/schema.rs and proto/src/gcp/wkt.rs from the
FileDescriptorSet proto/tests/data/mcp_gcp.fds.bin (see gcp-schema.sh).

Each message, map entry and enum of model_context_protocol (and the
well-known Struct, Value, ListValue, NullValue, Duration) becomes one
`pub static`, named after its path in SCREAMING_SNAKE_CASE.
Needs the `protobuf` Python package (grpcio-tools brings it).
"""
import re
import sys

from google.protobuf import descriptor_pb2 as d

PACKAGE = "model_context_protocol"
WKT_FILES = ("google/protobuf/struct.proto", "google/protobuf/duration.proto")

SCALARS = {
    d.FieldDescriptorProto.TYPE_STRING: "String",
    d.FieldDescriptorProto.TYPE_BYTES: "Bytes",
    d.FieldDescriptorProto.TYPE_BOOL: "Bool",
    d.FieldDescriptorProto.TYPE_INT32: "Int32",
    d.FieldDescriptorProto.TYPE_INT64: "Int64",
    d.FieldDescriptorProto.TYPE_UINT32: "Uint32",
    d.FieldDescriptorProto.TYPE_UINT64: "Uint64",
    d.FieldDescriptorProto.TYPE_FLOAT: "Float",
    d.FieldDescriptorProto.TYPE_DOUBLE: "Double",
}


def screaming(path):
    """`CallToolRequest.Request` -> `CALL_TOOL_REQUEST_REQUEST`."""
    parts = []
    for part in path.split("."):
        parts.append(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", part).upper())
    return "_".join(parts)


class Gen:
    def __init__(self, fds):
        self.msgs = {}  # full name -> (DescriptorProto, module)
        self.enums = {}  # full name -> (EnumDescriptorProto, module)
        self.order = []  # (kind, full name, module) in descriptor order
        for f in fds.file:
            if f.package == PACKAGE:
                module = "schema"
            elif f.name in WKT_FILES:
                module = "wkt"
            else:
                continue
            for e in f.enum_type:
                self.add_enum(f.package + "." + e.name, e, module)
            for m in f.message_type:
                self.add_msg(f.package + "." + m.name, m, module)

    def add_enum(self, full, e, module):
        self.enums[full] = (e, module)
        self.order.append(("enum", full, module))

    def add_msg(self, full, m, module):
        self.msgs[full] = (m, module)
        self.order.append(("msg", full, module))
        for e in m.enum_type:
            self.add_enum(full + "." + e.name, e, module)
        for n in m.nested_type:
            self.add_msg(full + "." + n.name, n, module)

    def ident(self, full, here):
        """The Rust path of the static of `full`, seen from module `here`."""
        table = self.msgs if full in self.msgs else self.enums
        module = table[full][1]
        pkg = PACKAGE if module == "schema" else "google.protobuf"
        name = screaming(full[len(pkg) + 1:])
        return name if module == here else "super::%s::%s" % (module, name)

    def field_type(self, f, here):
        if f.type in SCALARS:
            return "FieldType::" + SCALARS[f.type]
        full = f.type_name.lstrip(".")
        if f.type == d.FieldDescriptorProto.TYPE_ENUM:
            return "FieldType::Enum(&%s)" % self.ident(full, here)
        if f.type == d.FieldDescriptorProto.TYPE_MESSAGE:
            entry = self.msgs[full][0]
            kind = "Map" if entry.options.map_entry else "Message"
            return "FieldType::%s(&%s)" % (kind, self.ident(full, here))
        sys.exit("unsupported field type %d of %s" % (f.type, f.name))

    def label(self, f):
        if f.label == d.FieldDescriptorProto.LABEL_REPEATED:
            return "Label::Repeated"
        if f.proto3_optional:
            return "Label::Optional"
        return "Label::Singular"

    def emit(self, here):
        out = []
        for kind, full, module in self.order:
            if module != here:
                continue
            pkg = PACKAGE if module == "schema" else "google.protobuf"
            name = screaming(full[len(pkg) + 1:])
            if kind == "enum":
                e = self.enums[full][0]
                out.append("/// The enum `%s`." % full)
                out.append("pub static %s: EnumDesc = EnumDesc {" % name)
                out.append('    #[cfg(feature = "names")]')
                out.append('    name: "%s",' % full)
                out.append("    values: &[")
                for v in e.value:
                    out.append('        (proto_name!("%s"), %d),' % (v.name, v.number))
                out.append("    ],")
                out.append("};")
                out.append("")
                continue
            m = self.msgs[full][0]
            what = "map entry" if m.options.map_entry else "message"
            out.append("/// The %s `%s`." % (what, full))
            out.append("pub static %s: MessageDesc = MessageDesc {" % name)
            out.append('    #[cfg(feature = "names")]')
            out.append('    name: "%s",' % full)
            out.append("    fields: &[")
            for f in m.field:
                out.append("        FieldDesc {")
                out.append("            number: %d," % f.number)
                out.append('            #[cfg(feature = "names")]')
                out.append('            name: "%s",' % f.name)
                out.append("            ty: %s," % self.field_type(f, here))
                out.append("            label: %s," % self.label(f))
                dep = "true" if f.options.deprecated else "false"
                out.append("            deprecated: %s," % dep)
                out.append("        },")
            out.append("    ],")
            out.append("};")
            out.append("")
        return out

    def lists(self):
        msgs = [
            screaming(full[len(PACKAGE) + 1:])
            for kind, full, module in self.order
            if kind == "msg" and module == "schema" and not self.msgs[full][0].options.map_entry
        ]
        enums = [
            screaming(full[len(PACKAGE) + 1:])
            for kind, full, module in self.order
            if kind == "enum" and module == "schema"
        ]
        out = ["/// Every message of `mcp_messages.proto`, map entries aside, in declaration order."]
        out.append("pub static MESSAGES: [&MessageDesc; %d] = [" % len(msgs))
        out += ["    &%s," % n for n in msgs]
        out.append("];")
        out.append("")
        out.append("/// Every enum of `mcp_messages.proto`, in declaration order.")
        out.append("pub static ENUMS: [&EnumDesc; %d] = [" % len(enums))
        out += ["    &%s," % n for n in enums]
        out.append("];")
        return out


HEADER = """\
// @generated by scripts/gcp_schema.py from proto/tests/data/mcp_gcp.fds.bin
// (scripts/gcp-schema.sh). Do not edit: proto/tests/gcp_schema.rs checks these
// tables against the descriptor set.
"""


def main():
    fds_path, schema_rs, wkt_rs = sys.argv[1:4]
    fds = d.FileDescriptorSet()
    with open(fds_path, "rb") as f:
        fds.ParseFromString(f.read())
    g = Gen(fds)
    schema = [
        HEADER.rstrip("\n"),
        "",
        "//! The messages and enums of the typed binding's `mcp_messages.proto`",
        "//! (package `model_context_protocol`, release v0.2.0) as static descriptor",
        "//! tables: one `pub static` per message, map entry and enum.",
        "",
        "pub use super::desc::{EnumDesc, FieldDesc, FieldType, Label, MessageDesc};",
        "",
    ] + g.emit("schema") + g.lists()
    wkt = [
        HEADER.rstrip("\n"),
        "",
        "//! The well-known types the typed binding uses (`google/protobuf/struct.proto`",
        "//! and `duration.proto`) as static descriptor tables.",
        "",
        "use super::desc::{EnumDesc, FieldDesc, FieldType, Label, MessageDesc};",
        "",
    ] + g.emit("wkt")
    for path, lines in ((schema_rs, schema), (wkt_rs, wkt)):
        while lines and lines[-1] == "":
            lines.pop()
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
