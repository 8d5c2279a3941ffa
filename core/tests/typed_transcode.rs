//! The typed binding's transcoder (`mcp::typed`): the golden vectors of the
//! digest (§11) both ways, round trips of every RPC with every field set,
//! truncated messages, depth bounds and the refusals of §6.10.
#![cfg(feature = "typed")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mcpwire_core::mcp::typed::{
    self, MAX_DEPTH, TypedError, request_to_json, request_to_proto, result_to_json, result_to_proto,
};
use mcpwire_proto::gcp::Rpc;
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

type Fun = fn(Rpc, &[u8], &mut [u8]) -> Result<usize, TypedError>;

/// Runs a transcoder with a buffer that grows to what it says it needs.
fn run(f: Fun, rpc: Rpc, input: &[u8]) -> Result<Vec<u8>, TypedError> {
    let mut out = vec![0u8; 16];
    match f(rpc, input, &mut out) {
        Ok(n) => {
            out.truncate(n);
            Ok(out)
        }
        Err(TypedError::BufferTooSmall { needed }) => {
            let mut out = vec![0u8; needed];
            let n = f(rpc, input, &mut out)?;
            assert_eq!(n, needed, "the size it asked for is the size it wrote");
            out.truncate(n);
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(b)))
}

fn req_proto(rpc: Rpc, params: &str) -> Result<Vec<u8>, TypedError> {
    run(request_to_proto, rpc, params.as_bytes())
}
fn req_json(rpc: Rpc, msg: &[u8]) -> Result<Value, TypedError> {
    run(request_to_json, rpc, msg).map(|b| json(&b))
}
fn res_proto(rpc: Rpc, result: &str) -> Result<Vec<u8>, TypedError> {
    run(result_to_proto, rpc, result.as_bytes())
}
fn res_json(rpc: Rpc, msg: &[u8]) -> Result<Value, TypedError> {
    run(result_to_json, rpc, msg).map(|b| json(&b))
}

// ---- §11 golden vectors ------------------------------------------------

#[test]
fn golden_call_tool_request() {
    let bytes = hex("0a020a00 1217 0a03616464 1210 0a0e 0a0161 1209 11000000000000f03f");
    let params = r#"{"_meta":{},"name":"add","arguments":{"a":1}}"#;
    assert_eq!(
        to_hex(&req_proto(Rpc::CallTool, params).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        req_json(Rpc::CallTool, &bytes).unwrap(),
        json(params.as_bytes())
    );
}

#[test]
fn golden_call_tool_response() {
    let bytes = hex("0a024801 1206 0a04 0a026869");
    let result = r#"{"resultType":"complete","content":[{"type":"text","text":"hi"}]}"#;
    assert_eq!(
        to_hex(&res_proto(Rpc::CallTool, result).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        res_json(Rpc::CallTool, &bytes).unwrap(),
        json(result.as_bytes())
    );
    // Without resultType the result is complete all the same.
    let bare = r#"{"content":[{"type":"text","text":"hi"}]}"#;
    assert_eq!(res_proto(Rpc::CallTool, bare).unwrap(), bytes);
}

#[test]
fn golden_annotations_packed_audience_and_zero_priority() {
    // A text block carrying the vector's Annotations as field 2.
    let ann = hex("0a020102 1500000000");
    let mut text = hex("0a0178");
    text.push(0x12);
    text.push(ann.len() as u8);
    text.extend_from_slice(&ann);
    let mut bytes = hex("0a024801 12");
    bytes.push(text.len() as u8 + 2);
    bytes.push(0x0a);
    bytes.push(text.len() as u8);
    bytes.extend_from_slice(&text);
    let result = r#"{"resultType":"complete","content":[{"type":"text","text":"x","annotations":{"audience":["user","assistant"],"priority":0}}]}"#;
    assert_eq!(
        to_hex(&res_proto(Rpc::CallTool, result).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        res_json(Rpc::CallTool, &bytes).unwrap(),
        json(result.as_bytes())
    );
    // An unpacked audience decodes the same.
    let unpacked = hex("0801 0802 1500000000");
    let mut text = hex("0a0178");
    text.push(0x12);
    text.push(unpacked.len() as u8);
    text.extend_from_slice(&unpacked);
    let mut bytes = hex("0a024801 12");
    bytes.push(text.len() as u8 + 2);
    bytes.push(0x0a);
    bytes.push(text.len() as u8);
    bytes.extend_from_slice(&text);
    assert_eq!(
        res_json(Rpc::CallTool, &bytes).unwrap(),
        json(result.as_bytes())
    );
}

#[test]
fn golden_list_tools_input_required() {
    let bytes = hex("0a0e 3a07 0a016b 1202 4a00 4802 520173");
    let result = r#"{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}},"requestState":"s"}"#;
    assert_eq!(
        to_hex(&res_proto(Rpc::ListTools, result).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        res_json(Rpc::ListTools, &bytes).unwrap(),
        json(result.as_bytes())
    );
}

#[test]
fn golden_struct_kinds() {
    let inner = hex(
        "0a0174 1239 0a070a016e12020800 0a070a016212022001 0a080a017312031a0178 \
         0a120a016c120d320b0a09110000000000000440 0a070a016f12022a00",
    );
    let mut bytes = vec![0x12, inner.len() as u8];
    bytes.extend_from_slice(&inner);
    let params = r#"{"name":"t","arguments":{"n":null,"b":true,"s":"x","l":[2.5],"o":{}}}"#;
    assert_eq!(
        to_hex(&req_proto(Rpc::CallTool, params).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        req_json(Rpc::CallTool, &bytes).unwrap(),
        json(params.as_bytes())
    );
}

#[test]
fn golden_duration_as_ttl() {
    // tools = [] writes nothing; ttl = {90 s, 5 ms}.
    let bytes = hex("0a024801 1a07 085a 10c096b102");
    let result = r#"{"resultType":"complete","tools":[],"ttlMs":90005}"#;
    assert_eq!(
        to_hex(&res_proto(Rpc::ListTools, result).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        res_json(Rpc::ListTools, &bytes).unwrap(),
        json(result.as_bytes())
    );
}

#[test]
fn golden_get_prompt_request() {
    let bytes = hex("120170 1a06 0a0161 120178");
    let params = r#"{"name":"p","arguments":{"a":"x"}}"#;
    assert_eq!(
        to_hex(&req_proto(Rpc::GetPrompt, params).unwrap()),
        to_hex(&bytes)
    );
    assert_eq!(
        req_json(Rpc::GetPrompt, &bytes).unwrap(),
        json(params.as_bytes())
    );
}

#[test]
fn golden_completion_response_total_zero() {
    let bytes = hex("120161 1800");
    let result = r#"{"resultType":"complete","completion":{"values":["a"],"total":0}}"#;
    assert_eq!(
        res_json(Rpc::Complete, &bytes).unwrap(),
        json(result.as_bytes())
    );
    let mut with_common = hex("0a024801");
    with_common.extend_from_slice(&bytes);
    assert_eq!(
        to_hex(&res_proto(Rpc::Complete, result).unwrap()),
        to_hex(&with_common)
    );
}

#[test]
fn golden_empty_list_tools_request() {
    assert_eq!(req_proto(Rpc::ListTools, "{}").unwrap(), b"");
    assert_eq!(req_proto(Rpc::ListTools, "").unwrap(), b"");
    assert_eq!(req_json(Rpc::ListTools, b"").unwrap(), json(b"{}"));
}

#[test]
fn golden_negative_vectors() {
    assert!(matches!(
        res_json(Rpc::ListTools, &hex("0a02 4807")),
        Err(TypedError::Invalid(_))
    ));
    assert_eq!(
        res_json(Rpc::CallTool, &hex("1206 1204 0a02 2121")),
        Err(TypedError::Invalid("not base64 text"))
    );
    assert!(matches!(
        req_json(Rpc::ListTools, &hex("0a05")),
        Err(TypedError::Malformed(_))
    ));
}

// ---- round trips ---------------------------------------------------------

const INPUT_RESPONSES: &str = r#"{
  "e":{"action":"accept","content":{"x":1,"y":"z"}},
  "d":{"action":"decline"},
  "s":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","stopReason":"endTurn"},
  "r":{"roots":[{"uri":"file:///a","name":"A"},{"uri":"file:///b"}]}
}"#;

fn with_common(fields: &str) -> String {
    format!(
        r#"{{"_meta":{{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"inputResponses":{INPUT_RESPONSES},"requestState":"st",{fields}}}"#
    )
}

fn requests() -> Vec<(Rpc, String)> {
    vec![
        (
            Rpc::CallTool,
            with_common(
                r#""name":"add","arguments":{"a":1,"b":-2.5,"s":"x\"y\u00e9\n","n":null,"t":true,"f":false,"l":[1,[2,{}],"z"],"o":{"p":{"q":[]}},"big":9007199254740992,"e":1e300,"tiny":-1.5e-7}"#,
            ),
        ),
        (Rpc::ListTools, with_common(r#""cursor":null"#).replace(r#","cursor":null"#, "")),
        (Rpc::ListTools, "{}".into()),
        (Rpc::ListResources, with_common(r#""requestState":"st""#).replace(r#","requestState":"st""#, "")),
        (Rpc::ListResourceTemplates, r#"{"_meta":{}}"#.into()),
        (Rpc::ListPrompts, r#"{"requestState":""}"#.into()),
        (Rpc::ReadResource, with_common(r#""uri":"file:///a""#)),
        (
            Rpc::GetPrompt,
            with_common(r#""name":"p","arguments":{"a":"x","b":"\u263a"}"#),
        ),
        (
            Rpc::Complete,
            with_common(
                r#""ref":{"type":"ref/prompt","name":"p","title":"P"},"argument":{"name":"a","value":"v"},"context":{"arguments":{"b":"c"}}"#,
            ),
        ),
        (
            Rpc::Complete,
            r#"{"ref":{"type":"ref/resource","uri":"file:///{x}"},"argument":{"name":"x","value":""},"context":{}}"#.into(),
        ),
    ]
}

const ICON: &str =
    r#"{"src":"https://i/x.png","mimeType":"image/png","sizes":["48x48","any"],"theme":"dark"}"#;
const ANN: &str = r#"{"audience":["user"],"priority":0.3,"lastModified":"2025-01-01T00:00:00Z"}"#;

fn results() -> Vec<(Rpc, String)> {
    let resource = format!(
        r#"{{"uri":"file:///z","name":"z","title":"Z","description":"d","mimeType":"text/plain","size":12,"icons":[{ICON}],"annotations":{ANN},"_meta":{{"m":[1,2]}}}}"#
    );
    let input_required = r#"{"resultType":"input_required","_meta":{"a":1},"inputRequests":{
 "r":{"method":"roots/list"},
 "u":{"method":"elicitation/create","params":{"mode":"url","message":"go","url":"https://x"}},
 "f":{"method":"elicitation/create","params":{"message":"fill","requestedSchema":{"type":"object","properties":{
    "s":{"type":"string","title":"S","description":"d","minLength":1,"maxLength":9,"format":"email","default":"a@b"},
    "s0":{"type":"string"},
    "i":{"type":"integer","title":"I","minimum":1,"maximum":5,"default":3},
    "n":{"type":"number","description":"N","minimum":0.5,"maximum":2.5,"default":1.5},
    "b":{"type":"boolean","default":true},
    "e":{"type":"string","enum":["x","y"],"default":"x"},
    "o":{"type":"string","title":"O","oneOf":[{"const":"x","title":"X"},{"const":"y","title":"Y"}]},
    "m":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"string","enum":["x","y"]},"default":["x"]},
    "t":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]}}
  },"required":["s","i"]}}},
 "s":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"q"}},{"role":"assistant","content":{"type":"image","data":"AAEC","mimeType":"image/png"}}],"modelPreferences":{"hints":[{"name":"claude"}],"costPriority":0.5,"speedPriority":0.25,"intelligencePriority":1},"systemPrompt":"sys","includeContext":"thisServer","temperature":0.7,"maxTokens":100,"stopSequences":["\n"]}}
},"requestState":"st"}"#;
    vec![
        (
            Rpc::CallTool,
            format!(
                r#"{{"resultType":"complete","_meta":{{"k":"v"}},"content":[
  {{"type":"text","text":"hi","annotations":{ANN},"_meta":{{"a":1}}}},
  {{"type":"image","data":"AAEC","mimeType":"image/png","annotations":{{"audience":["assistant","user"]}}}},
  {{"type":"audio","data":"AA==","mimeType":"audio/wav","_meta":{{}}}},
  {{"type":"resource","resource":{{"uri":"file:///x","mimeType":"text/plain","text":"t","_meta":{{"q":true}}}},"annotations":{{"priority":1}},"_meta":{{}}}},
  {{"type":"resource","resource":{{"uri":"file:///y","blob":"AAEC"}}}},
  {{"type":"resource","resource":{{"uri":"file:///e","text":""}}}},
  {{"type":"resource_link",{}}}
],"structuredContent":{{"sum":3,"list":[{{"deep":[null]}}]}},"isError":true}}"#,
                &resource[1..resource.len() - 1]
            ),
        ),
        (Rpc::CallTool, input_required.into()),
        (Rpc::CallTool, r#"{"resultType":"complete","content":[]}"#.into()),
        (
            Rpc::ListTools,
            format!(
                r#"{{"resultType":"complete","tools":[{{"name":"add","title":"Add","description":"adds","inputSchema":{{"type":"object","properties":{{"a":{{"type":"number"}}}},"required":["a"]}},"outputSchema":{{"type":"object"}},"annotations":{{"title":"A","readOnlyHint":true,"destructiveHint":true,"idempotentHint":true,"openWorldHint":true}},"icons":[{ICON}],"_meta":{{"m":1}}}},{{"name":"b","inputSchema":{{}},"annotations":{{}}}}],"ttlMs":90005,"cacheScope":"private"}}"#
            ),
        ),
        (
            Rpc::ListResources,
            format!(r#"{{"resultType":"complete","_meta":{{}},"resources":[{resource},{{"uri":"u","name":"n"}}],"ttlMs":0,"cacheScope":"public"}}"#),
        ),
        (
            Rpc::ListResourceTemplates,
            format!(
                r#"{{"resultType":"complete","resourceTemplates":[{{"uriTemplate":"file:///{{p}}","name":"t","title":"T","description":"d","mimeType":"text/plain","annotations":{ANN},"icons":[{ICON}],"_meta":{{"x":"y"}}}}],"ttlMs":1500}}"#
            ),
        ),
        (
            Rpc::ListPrompts,
            format!(
                r#"{{"resultType":"complete","prompts":[{{"name":"p","title":"P","description":"d","arguments":[{{"name":"a","title":"A","description":"d","required":true}},{{"name":"b"}}],"icons":[{ICON}],"_meta":{{}}}}]}}"#
            ),
        ),
        (
            Rpc::ReadResource,
            r#"{"resultType":"complete","contents":[{"uri":"file:///a","mimeType":"text/plain","text":"hello","_meta":{"a":1}},{"uri":"file:///b","blob":"AAECAw=="}],"ttlMs":60000,"cacheScope":"private"}"#.into(),
        ),
        (
            Rpc::GetPrompt,
            r#"{"resultType":"complete","_meta":{"z":0},"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}},{"role":"assistant","content":{"type":"resource_link","uri":"u","name":"n"}},{"role":"user","content":{"type":"image","data":"AAEC","mimeType":"image/png"}},{"role":"user","content":{"type":"audio","data":"AAEC","mimeType":"audio/wav"}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"r","text":"t"}}}]}"#.into(),
        ),
        (
            Rpc::Complete,
            r#"{"resultType":"complete","completion":{"values":["a","b"],"total":10,"hasMore":true}}"#.into(),
        ),
        (
            Rpc::ListPrompts,
            r#"{"resultType":"input_required","requestState":""}"#.into(),
        ),
    ]
}

#[test]
fn every_request_round_trips() {
    for (rpc, params) in requests() {
        let bytes = req_proto(rpc, &params).unwrap_or_else(|e| panic!("{rpc}: {e}: {params}"));
        let back = req_json(rpc, &bytes).unwrap_or_else(|e| panic!("{rpc}: {e}"));
        assert_eq!(back, json(params.as_bytes()), "{rpc}");
        // And the JSON it gives encodes to the same bytes.
        let again = req_proto(rpc, &back.to_string()).unwrap();
        assert_eq!(
            json(&run(request_to_json, rpc, &again).unwrap()),
            back,
            "{rpc}"
        );
    }
}

#[test]
fn every_result_round_trips() {
    for (rpc, result) in results() {
        let bytes = res_proto(rpc, &result).unwrap_or_else(|e| panic!("{rpc}: {e}: {result}"));
        let back = res_json(rpc, &bytes).unwrap_or_else(|e| panic!("{rpc}: {e}"));
        assert_eq!(back, json(result.as_bytes()), "{rpc}");
        let again = res_proto(rpc, &back.to_string()).unwrap();
        assert_eq!(res_json(rpc, &again).unwrap(), back, "{rpc}");
    }
}

#[test]
fn every_rpc_is_covered_both_ways() {
    for rpc in Rpc::ALL {
        assert!(requests().iter().any(|(r, _)| *r == rpc), "{rpc} request");
        assert!(results().iter().any(|(r, _)| *r == rpc), "{rpc} result");
    }
}

#[test]
fn the_lossy_parts_arrive_as_the_binding_says() {
    // false hints and a false boolean default arrive absent; an empty blob
    // arrives as empty text; f32 keeps about seven digits; a whole double
    // is an integer; absent inputSchema reads as an object schema.
    let result = r#"{"tools":[{"name":"t","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}]}"#;
    let back = res_json(Rpc::ListTools, &res_proto(Rpc::ListTools, result).unwrap()).unwrap();
    assert_eq!(back["tools"][0]["annotations"], json(b"{}"));
    let back = res_json(
        Rpc::ReadResource,
        &res_proto(Rpc::ReadResource, r#"{"contents":[{"uri":"u","blob":""}]}"#).unwrap(),
    )
    .unwrap();
    assert_eq!(back["contents"][0], json(br#"{"uri":"u","text":""}"#));
    let back = res_json(
        Rpc::CallTool,
        &res_proto(
            Rpc::CallTool,
            r#"{"content":[{"type":"text","text":"x","annotations":{"priority":0.123456789}}],"structuredContent":{"n":5.0}}"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        back["content"][0]["annotations"]["priority"],
        json(b"0.12345679")
    );
    assert_eq!(back["structuredContent"]["n"], json(b"5"));
    // The tool with no input_schema on the wire.
    let bytes = hex("0a024801 1203 0a0174");
    assert_eq!(
        res_json(Rpc::ListTools, &bytes).unwrap()["tools"][0]["inputSchema"],
        json(br#"{"type":"object"}"#)
    );
    // Legacy enumNames arrive as oneOf.
    let ir = r#"{"resultType":"input_required","inputRequests":{"f":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"properties":{"e":{"type":"string","enum":["x"],"enumNames":["X"]}}}}}}}"#;
    let back = res_json(Rpc::CallTool, &res_proto(Rpc::CallTool, ir).unwrap()).unwrap();
    assert_eq!(
        back["inputRequests"]["f"]["params"]["requestedSchema"]["properties"]["e"],
        json(br#"{"type":"string","oneOf":[{"const":"x","title":"X"}]}"#)
    );
}

#[test]
fn absent_and_empty_arguments_stay_apart() {
    let none = req_proto(Rpc::CallTool, r#"{"name":"t"}"#).unwrap();
    let empty = req_proto(Rpc::CallTool, r#"{"name":"t","arguments":{}}"#).unwrap();
    assert_eq!(to_hex(&none), "12030a0174");
    assert_eq!(to_hex(&empty), "12050a01741200");
    assert_eq!(
        req_json(Rpc::CallTool, &none).unwrap(),
        json(br#"{"name":"t"}"#)
    );
    assert_eq!(
        req_json(Rpc::CallTool, &empty).unwrap(),
        json(br#"{"name":"t","arguments":{}}"#)
    );
}

// ---- truncation, unknown fields, depth -----------------------------------

/// The offsets where a top-level field of `msg` ends.
fn field_ends(msg: &[u8]) -> Vec<usize> {
    let mut ends = vec![0];
    let mut at = 0;
    while at < msg.len() {
        let (_, n) = mcpwire_proto::wire::skip_field(&msg[at..]).unwrap();
        at += n;
        ends.push(at);
    }
    ends
}

#[test]
fn every_prefix_of_a_message_is_a_clean_error_or_ends_on_a_field() {
    let mut checked = 0;
    for (rpc, params) in requests() {
        let bytes = req_proto(rpc, &params).unwrap();
        let ends = field_ends(&bytes);
        for cut in 0..bytes.len() {
            let got = run(request_to_json, rpc, &bytes[..cut]);
            if !ends.contains(&cut) {
                assert!(
                    matches!(got, Err(TypedError::Malformed(_))),
                    "{rpc} cut at {cut}: {got:?}"
                );
            }
            checked += 1;
        }
    }
    for (rpc, result) in results() {
        let bytes = res_proto(rpc, &result).unwrap();
        let ends = field_ends(&bytes);
        for cut in 0..bytes.len() {
            let got = run(result_to_json, rpc, &bytes[..cut]);
            if !ends.contains(&cut) {
                assert!(
                    matches!(got, Err(TypedError::Malformed(_))),
                    "{rpc} cut at {cut}: {got:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 1000);
}

#[test]
fn unknown_fields_are_skipped() {
    // The old `cursor = 2` of RequestFields and `next_cursor = 3` of
    // ResponseFields, and an unknown top-level varint.
    let req = hex("0a05 1203 616263 12030a0174 f80101");
    assert_eq!(
        req_json(Rpc::CallTool, &req).unwrap(),
        json(br#"{"name":"t"}"#)
    );
    let res = hex("0a05 4801 1a0178 1200");
    assert_eq!(
        res_json(Rpc::ListTools, &res).unwrap(),
        json(br#"{"resultType":"complete","tools":[{"name":"","inputSchema":{"type":"object"}}]}"#)
    );
}

fn nested_arrays(n: usize) -> String {
    format!("{}{}", "[".repeat(n), "]".repeat(n))
}

#[test]
fn nesting_is_bounded_both_ways() {
    // CallToolRequest (1) > Request (2) > Struct (3) > n ListValues.
    let deepest = MAX_DEPTH - 3;
    let ok = format!(
        r#"{{"name":"t","arguments":{{"a":{}}}}}"#,
        nested_arrays(deepest)
    );
    let bytes = req_proto(Rpc::CallTool, &ok).unwrap();
    assert_eq!(
        req_json(Rpc::CallTool, &bytes).unwrap(),
        json(ok.as_bytes())
    );
    let too_deep = format!(
        r#"{{"name":"t","arguments":{{"a":{}}}}}"#,
        nested_arrays(deepest + 1)
    );
    assert!(matches!(
        req_proto(Rpc::CallTool, &too_deep),
        Err(TypedError::Unexpressible(_))
    ));
    // The same nesting, one level deeper, written by hand: the decoder
    // refuses it.
    let mut value = hex("3200"); // an empty ListValue as a Value
    for _ in 0..deepest {
        let mut list = vec![0x0a];
        list.extend(len_prefixed(&value));
        let mut v = vec![0x32];
        v.extend(len_prefixed(&list));
        value = v;
    }
    let mut entry = hex("0a0161 12");
    entry.extend(len_prefixed(&value));
    let mut structure = vec![0x0a];
    structure.extend(len_prefixed(&entry));
    let mut request = hex("0a0174 12");
    request.extend(len_prefixed(&structure));
    let mut msg = vec![0x12];
    msg.extend(len_prefixed(&request));
    assert!(matches!(
        req_json(Rpc::CallTool, &msg),
        Err(TypedError::Malformed(_))
    ));
}

fn len_prefixed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = body.len() as u64;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    out.extend_from_slice(body);
    out
}

// ---- refusals (§6.10) -----------------------------------------------------

fn unexpressible(r: Result<Vec<u8>, TypedError>) -> bool {
    matches!(r, Err(e) if e.is_unexpressible())
}

fn invalid(r: Result<Vec<u8>, TypedError>) -> bool {
    matches!(r, Err(e) if e.is_invalid())
}

#[test]
fn the_binding_refuses_what_the_messages_cannot_carry() {
    assert!(unexpressible(req_proto(
        Rpc::ListTools,
        r#"{"cursor":"c1"}"#
    )));
    assert!(req_proto(Rpc::ListTools, r#"{"cursor":""}"#).is_ok());
    assert!(unexpressible(res_proto(
        Rpc::ListTools,
        r#"{"tools":[],"nextCursor":"c"}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"task","content":[]}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"content":[],"structuredContent":[1]}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::ListTools,
        r#"{"tools":[{"name":"t","inputSchema":{},"execution":{"taskSupport":"optional"}}]}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"content":[{"type":"tool_use","id":"x","name":"n","input":{}}]}"#
    )));
    for n in [
        "9007199254740993",
        "-9007199254740993",
        "100000000000000000000",
    ] {
        assert!(
            unexpressible(req_proto(
                Rpc::CallTool,
                &format!(r#"{{"name":"t","arguments":{{"n":{n}}}}}"#)
            )),
            "{n}"
        );
    }
    assert!(
        req_proto(
            Rpc::CallTool,
            r#"{"name":"t","arguments":{"n":-9007199254740992}}"#
        )
        .is_ok()
    );
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"input_required","inputRequests":{"p":{"method":"ping"}}}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"input_required","content":[]}"#
    )));
    assert!(unexpressible(req_proto(
        Rpc::CallTool,
        r#"{"name":"t","inputResponses":{"k":{"_meta":{}}}}"#
    )));
    assert!(unexpressible(req_proto(
        Rpc::CallTool,
        r#"{"name":"t","inputResponses":{"k":{"action":"accept","_meta":{}}}}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,"tools":[]}}}}"#
    )));
    assert!(unexpressible(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"input_required","inputRequests":{"f":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"$schema":"x","properties":{}}}}}}"#
    )));
    assert!(unexpressible(req_proto(
        Rpc::CallTool,
        r#"{"name":"t","task":{}}"#
    )));
}

#[test]
fn values_of_the_wrong_shape_are_invalid() {
    assert_eq!(
        req_proto(Rpc::CallTool, r#"{"arguments":{}}"#),
        Err(TypedError::Missing("name"))
    );
    assert!(invalid(req_proto(
        Rpc::CallTool,
        r#"{"name":"t","arguments":[1]}"#
    )));
    assert!(invalid(req_proto(
        Rpc::CallTool,
        r#"{"name":"t","name":"u"}"#
    )));
    assert!(invalid(req_proto(Rpc::CallTool, r#"{"name":7}"#)));
    assert!(invalid(req_proto(
        Rpc::GetPrompt,
        r#"{"name":"p","arguments":{"a":1}}"#
    )));
    assert!(invalid(req_proto(
        Rpc::Complete,
        r#"{"ref":{"type":"ref/x"},"argument":{"name":"a","value":"b"}}"#
    )));
    assert!(invalid(res_proto(
        Rpc::CallTool,
        r#"{"content":[{"type":"image","data":"!!","mimeType":"image/png"}]}"#
    )));
    assert!(invalid(res_proto(
        Rpc::CallTool,
        r#"{"content":[{"type":"text","text":"x","annotations":{"audience":["robot"]}}]}"#
    )));
    assert!(invalid(res_proto(
        Rpc::ListTools,
        r#"{"tools":[],"cacheScope":"shared"}"#
    )));
    // A sampling answer holds text, image or audio only (§6.7).
    assert!(invalid(req_proto(
        Rpc::CallTool,
        r#"{"name":"t","inputResponses":{"s":{"role":"user","model":"m","content":{"type":"resource","resource":{"uri":"u","text":""}}}}}"#
    )));
    assert!(invalid(res_proto(
        Rpc::ReadResource,
        r#"{"contents":[{"uri":"u","text":"t","blob":"AAEC"}]}"#
    )));
    assert!(invalid(res_proto(
        Rpc::ReadResource,
        r#"{"contents":[{"uri":"u"}]}"#
    )));
    assert!(invalid(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"complete","content":[],"resultType":"input_required"}"#
    )));
    assert!(invalid(res_proto(
        Rpc::CallTool,
        r#"{"resultType":"input_required","requestState":"a","requestState":"b"}"#
    )));
    assert_eq!(req_proto(Rpc::CallTool, "[1]"), Err(TypedError::Json));
    assert_eq!(
        req_proto(Rpc::CallTool, r#"{"name":"t""#),
        Err(TypedError::Json)
    );
}

#[test]
fn a_server_answers_a_bad_request_with_the_binding_codes() {
    let code = |msg: &[u8]| {
        request_to_json(Rpc::CallTool, msg, &mut [0u8; 64])
            .unwrap_err()
            .request_error_code()
    };
    assert_eq!(code(&hex("0a05")), -32700);
    assert_eq!(code(b""), -32602);
    let too_big = req_proto(
        Rpc::CallTool,
        r#"{"name":"a-rather-long-tool-name","arguments":{"k":"a value that does not fit"}}"#,
    )
    .unwrap();
    assert_eq!(code(&too_big), -32603);
}

#[test]
fn a_server_refuses_requests_without_their_key_member() {
    assert_eq!(
        req_json(Rpc::CallTool, b""),
        Err(TypedError::Invalid("Missing tool name"))
    );
    assert_eq!(
        req_json(Rpc::CallTool, &hex("1202 1200")),
        Err(TypedError::Invalid("Missing tool name"))
    );
    assert_eq!(
        req_json(Rpc::ReadResource, b""),
        Err(TypedError::Invalid("Missing resource URI"))
    );
    assert_eq!(
        req_json(Rpc::GetPrompt, b""),
        Err(TypedError::Invalid("Missing prompt name"))
    );
    // Both references, or neither, or no argument.
    assert!(matches!(
        req_json(Rpc::Complete, &hex("1200 1a00 2200")),
        Err(TypedError::Invalid(_))
    ));
    assert!(matches!(
        req_json(Rpc::Complete, &hex("2200")),
        Err(TypedError::Invalid(_))
    ));
    assert_eq!(
        req_json(Rpc::Complete, &hex("1a00")),
        Err(TypedError::Missing("argument"))
    );
}

#[test]
fn a_client_refuses_results_it_cannot_read() {
    // Content block with two kinds, or none.
    assert!(matches!(
        res_json(Rpc::CallTool, &hex("1208 0a020a00 12021200")),
        Err(TypedError::Invalid(_))
    ));
    assert!(matches!(
        res_json(Rpc::CallTool, &hex("1200")),
        Err(TypedError::Invalid(_))
    ));
    // An unknown role, theme, cache scope.
    assert!(matches!(
        res_json(Rpc::GetPrompt, &hex("1a06 0807 12020a00")),
        Err(TypedError::Invalid(_))
    ));
    assert!(matches!(
        res_json(Rpc::ListTools, &hex("2003")),
        Err(TypedError::Invalid(_))
    ));
    // A negative duration.
    assert!(matches!(
        res_json(Rpc::ListTools, &hex("1a0b 08ffffffffffffffffff01")),
        Err(TypedError::Invalid(_))
    ));
    // A double that is not finite in a Struct.
    assert!(matches!(
        res_json(
            Rpc::CallTool,
            &hex("1a10 0a0e 0a0161 1209 11000000000000f07f")
        ),
        Err(TypedError::Invalid(_))
    ));
}

#[test]
fn a_small_buffer_says_what_it_needs() {
    let params = r#"{"name":"add","arguments":{"a":1}}"#;
    let mut out = [0u8; 4];
    let Err(TypedError::BufferTooSmall { needed }) =
        request_to_proto(Rpc::CallTool, params.as_bytes(), &mut out)
    else {
        panic!("fits in four bytes?")
    };
    let mut out = vec![0u8; needed];
    assert_eq!(
        request_to_proto(Rpc::CallTool, params.as_bytes(), &mut out),
        Ok(needed)
    );
    let msg = out;
    let mut out = [0u8; 4];
    let Err(TypedError::BufferTooSmall { needed }) = request_to_json(Rpc::CallTool, &msg, &mut out)
    else {
        panic!("fits in four bytes?")
    };
    let mut out = vec![0u8; needed];
    assert_eq!(request_to_json(Rpc::CallTool, &msg, &mut out), Ok(needed));
}

#[test]
fn negative_zero_and_float_text_survive_the_round_trip() {
    let params = r#"{"name":"t","arguments":{"z":-0.0,"f":0.1,"e":1e300,"s":-1.5e-7}}"#;
    let bytes = req_proto(Rpc::CallTool, params).unwrap();
    let text = String::from_utf8(run(request_to_json, Rpc::CallTool, &bytes).unwrap()).unwrap();
    assert!(text.contains(r#""z":-0"#), "{text}");
    assert_eq!(req_proto(Rpc::CallTool, &text).unwrap(), bytes);
}

#[test]
fn a_client_refuses_an_empty_key_member_before_sending() {
    assert_eq!(
        req_proto(Rpc::CallTool, r#"{"name":""}"#),
        Err(TypedError::Invalid("Missing tool name"))
    );
    assert_eq!(
        req_proto(Rpc::ReadResource, r#"{"uri":""}"#),
        Err(TypedError::Invalid("Missing resource URI"))
    );
}

#[test]
fn every_message_reads_the_same_with_unknown_fields_appended() {
    // A varint, a 64-bit, a length-delimited and a 32-bit field, numbers
    // no message declares (and the old cursor numbers of 2026-01).
    let unknown = hex("f8010a f9010102030405060708 fa0103616263 fd0101020304");
    for (rpc, params) in requests() {
        let mut bytes = req_proto(rpc, &params).unwrap();
        let before = req_json(rpc, &bytes).unwrap();
        bytes.extend_from_slice(&unknown);
        assert_eq!(req_json(rpc, &bytes).unwrap(), before, "{rpc}");
    }
    for (rpc, result) in results() {
        let mut bytes = res_proto(rpc, &result).unwrap();
        let before = res_json(rpc, &bytes).unwrap();
        bytes.extend_from_slice(&unknown);
        assert_eq!(res_json(rpc, &bytes).unwrap(), before, "{rpc}");
        // Inside `common` too: the old next_cursor (3) and task_id (6).
        let mut inner = hex("1a0163 320174");
        let common = res_proto(rpc, &result).unwrap();
        // `common` is the first field of every result the encoder writes.
        assert_eq!(common[0], 0x0a, "{rpc}");
        let (len, n) = mcpwire_proto::wire::decode_varint(&common[1..]).unwrap();
        let body_end = 1 + n + len as usize;
        let mut body = common[1 + n..body_end].to_vec();
        body.append(&mut inner);
        let mut patched = vec![0x0a];
        patched.extend(len_prefixed(&body));
        patched.extend_from_slice(&common[body_end..]);
        assert_eq!(res_json(rpc, &patched).unwrap(), before, "{rpc} common");
    }
}

#[test]
fn the_routing_value_comes_from_the_message() {
    let value = |rpc, params: &str| {
        let bytes = req_proto(rpc, params).unwrap();
        typed::routing_value(rpc, &bytes)
            .unwrap()
            .map(str::to_owned)
    };
    assert_eq!(
        value(Rpc::CallTool, r#"{"name":"add"}"#).as_deref(),
        Some("add")
    );
    assert_eq!(
        value(Rpc::GetPrompt, r#"{"name":"p"}"#).as_deref(),
        Some("p")
    );
    assert_eq!(
        value(Rpc::ReadResource, r#"{"uri":"file:///a"}"#).as_deref(),
        Some("file:///a")
    );
    let complete =
        r#"{"ref":{"type":"ref/resource","uri":"db://t"},"argument":{"name":"a","value":""}}"#;
    assert_eq!(value(Rpc::Complete, complete).as_deref(), Some("db://t"));
    let complete = r#"{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}"#;
    assert_eq!(value(Rpc::Complete, complete).as_deref(), Some("p"));
    assert_eq!(value(Rpc::ListTools, r#"{"_meta":{}}"#), None);
    assert_eq!(typed::routing_value(Rpc::CallTool, b""), Ok(None));
    assert!(matches!(
        typed::routing_value(Rpc::CallTool, &hex("0a05")),
        Err(TypedError::Malformed(_))
    ));
}

/// A sampling answer among a request's input responses whose `message`
/// (the group of `role` and `content`) is absent: `role` is missing, as it
/// is from a present but empty `message`; the JSON it decoded to before
/// was one the encoder refuses (found by the `typed_transcode` fuzz
/// target).
#[test]
fn a_required_member_of_an_absent_group_is_missing() {
    let proto = [10, 14, 50, 7, 26, 1, 107, 18, 2, 58, 0, 72, 2, 82, 1, 115];
    assert_eq!(
        req_json(Rpc::ListResources, &proto),
        Err(TypedError::Missing("role"))
    );
}

// ---- repeated map keys (issue #32, A3) -----------------------------------

/// `msg` with every `from` replaced by `to` (as long): a way to a message
/// whose map repeats a key, which the encoder does not write.
fn patched(msg: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let (from, to) = (from.as_bytes(), to.as_bytes());
    let mut out = msg.to_vec();
    let mut i = 0;
    let mut found = false;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            found = true;
        }
        i += 1;
    }
    assert!(found, "no {from:?} in the message");
    out
}

/// A map whose entries repeat a key is refused on decode, at any depth and
/// in every kind of map, instead of becoming JSON with the key twice (the
/// engine would read the first, serde and protobuf the last); the encoder
/// refuses the JSON objects that would make one (escaped spellings too).
#[test]
fn maps_with_a_repeated_key_are_refused() {
    let repeated = TypedError::Invalid("a map with a repeated key");
    // Each with two keys `dupA` and `dupB`, made one in the message.
    let requests = [
        (
            Rpc::CallTool,
            r#"{"name":"add","arguments":{"dupA":"us-west","dupB":"eu-secret"}}"#,
        ),
        (
            Rpc::CallTool,
            r#"{"name":"add","arguments":{"o":{"dupA":1,"b":2,"dupB":3}}}"#,
        ),
        (
            Rpc::CallTool,
            r#"{"name":"add","arguments":{"l":[{"dupA":1,"dupB":2}]}}"#,
        ),
        (
            Rpc::CallTool,
            r#"{"_meta":{"dupA":1,"dupB":2},"name":"add"}"#,
        ),
        (
            Rpc::GetPrompt,
            r#"{"name":"p","arguments":{"dupA":"1","dupB":"2"}}"#,
        ),
        (
            Rpc::Complete,
            r#"{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"},"context":{"arguments":{"dupA":"c","dupB":"d"}}}"#,
        ),
        (
            Rpc::ListTools,
            r#"{"inputResponses":{"dupA":{"action":"decline"},"dupB":{"action":"accept","content":{}}}}"#,
        ),
    ];
    for (rpc, params) in requests {
        let msg = req_proto(rpc, params).unwrap();
        assert!(req_json(rpc, &msg).is_ok(), "{params}");
        let msg = patched(&msg, "dupB", "dupA");
        assert_eq!(req_json(rpc, &msg), Err(repeated), "{params}");
        // The JSON with the key twice, as written or escaped, is refused
        // before it is encoded.
        for twice in ["dupA", "\\u0064upA"] {
            let params = params.replace("dupB", twice);
            assert_eq!(req_proto(rpc, &params), Err(repeated), "{params}");
        }
    }
    let results = [
        r#"{"content":[],"structuredContent":{"dupA":1,"dupB":2}}"#,
        r#"{"resultType":"input_required","inputRequests":{"dupA":{"method":"roots/list"},"dupB":{"method":"roots/list"}}}"#,
        r#"{"resultType":"input_required","inputRequests":{"f":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"properties":{"dupA":{"type":"string"},"dupB":{"type":"boolean"}}}}}}}"#,
    ];
    for result in results {
        let msg = res_proto(Rpc::CallTool, result).unwrap();
        assert!(res_json(Rpc::CallTool, &msg).is_ok(), "{result}");
        let msg = patched(&msg, "dupB", "dupA");
        assert_eq!(res_json(Rpc::CallTool, &msg), Err(repeated), "{result}");
        let twice = result.replace("dupB", "dupA");
        assert_eq!(res_proto(Rpc::CallTool, &twice), Err(repeated), "{twice}");
    }
    assert_eq!(
        res_proto(
            Rpc::CallTool,
            r#"{"content":[],"structuredContent":{"a":1,"a":2}}"#
        ),
        Err(repeated)
    );
    // Keys that differ, and one key in two maps, are not repeats.
    let fine =
        r#"{"name":"add","arguments":{"a":{"a":1},"b":{"a":2},"A":3,"":4,"\u00e9":5,"e":6}}"#;
    let msg = req_proto(Rpc::CallTool, fine).unwrap();
    assert_eq!(
        req_json(Rpc::CallTool, &msg).unwrap(),
        json(fine.as_bytes())
    );
}

/// Large maps are checked at O(m log m): every repeat of a map of up to
/// the table's size is found, whichever entries repeat; a larger map is
/// refused both ways as beyond the transcoder.
#[test]
fn large_maps_are_checked_whole() {
    let max = typed::MAP_KEYS;
    let call = |keys: &[String]| {
        let members: Vec<String> = keys.iter().map(|k| format!(r#""{k}":0"#)).collect();
        format!(r#"{{"name":"add","arguments":{{{}}}}}"#, members.join(","))
    };
    // Keys of one length, so that one can be patched into another.
    let keys: Vec<String> = (0..max).map(|i| format!("key{i:05}")).collect();
    let msg = req_proto(Rpc::CallTool, &call(&keys)).unwrap();
    assert!(req_json(Rpc::CallTool, &msg).is_ok());
    for (a, b) in [(0, 1), (0, max - 1), (max / 2, max / 3), (max - 2, max - 1)] {
        let repeated = patched(&msg, &keys[b], &keys[a]);
        assert_eq!(
            req_json(Rpc::CallTool, &repeated),
            Err(TypedError::Invalid("a map with a repeated key")),
            "{a} {b}"
        );
        let mut twice = keys.clone();
        twice[b] = keys[a].clone();
        assert_eq!(
            req_proto(Rpc::CallTool, &call(&twice)),
            Err(TypedError::Invalid("a map with a repeated key")),
            "{a} {b}"
        );
    }
    let mut more = keys.clone();
    more.push("one more".into());
    assert!(matches!(
        req_proto(Rpc::CallTool, &call(&more)),
        Err(TypedError::Unexpressible(_))
    ));
    // One entry past the table, as a protobuf peer may write it: a
    // prompt's arguments (field 3) with an entry added at the end.
    let args: Vec<String> = keys.iter().map(|k| format!(r#""{k}":"v""#)).collect();
    let prompt = format!(r#"{{"name":"p","arguments":{{{}}}}}"#, args.join(","));
    let mut msg = req_proto(Rpc::GetPrompt, &prompt).unwrap();
    assert!(req_json(Rpc::GetPrompt, &msg).is_ok());
    msg.extend_from_slice(&[0x1a, 8, 0x0a, 3, b'z', b'z', b'z', 0x12, 1, b'v']);
    assert!(matches!(
        req_json(Rpc::GetPrompt, &msg),
        Err(TypedError::Unexpressible(_))
    ));
}
