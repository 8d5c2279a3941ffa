#!/usr/bin/env python3
"""A grpcio client of the typed binding `model_context_protocol.Mcp`.

    python typed.py HOST:PORT SCENARIO

The stubs are generated at run time by grpc_tools.protoc from the Google
Cloud proto files vendored in proto/proto/gcp/, into a temporary directory
that is removed on exit. The server is `mcpwire serve`'s demo: its tools,
resource mem://readme and prompt greet.

Scenarios: the same names and expectations as typed.js (list-tools,
call-tool, unknown-tool, input-required, progress, list-resources,
read-resource, list-resource-templates, list-prompts, get-prompt, complete,
deadline, cancel). Prints one JSON line of observations; exits 0 when the
expectations hold, 1 otherwise ("reason" says why), 2 on a usage or setup
error.
"""

import importlib
import json
import os
import shutil
import sys
import tempfile
import time

import grpc

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "proto", "gcp")
TIMEOUT = 10.0


def generate(out_dir):
    """Generates mcp_pb2, mcp_messages_pb2 and mcp_pb2_grpc into out_dir and
    imports them; returns (pb, pb_grpc)."""
    from grpc_tools import protoc

    well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    args = ["protoc", f"-I{PROTO_DIR}", f"-I{well_known}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
            os.path.join(PROTO_DIR, "mcp_messages.proto"), os.path.join(PROTO_DIR, "mcp.proto")]
    if protoc.main(args) != 0:
        raise RuntimeError("grpc_tools.protoc failed")
    sys.path.insert(0, out_dir)
    pb = importlib.import_module("mcp_messages_pb2")
    importlib.import_module("mcp_pb2")
    return pb, importlib.import_module("mcp_pb2_grpc")


pb = None  # mcp_messages_pb2, set by main


def struct(d):
    from google.protobuf import struct_pb2

    s = struct_pb2.Struct()
    s.update(d)
    return s


def first_text(response):
    return response.content[0].text.text if response.content else None


def error_trailers(err, status, rpc_code):
    """The observations of an error's status and trailers, with "reason" when
    the status is not `status`, mcp-error-code not `rpc_code`, mcp-error-bin
    not the JSON-RPC error response (id null) or its message not the
    grpc-message."""
    trailers = dict(err.trailing_metadata() or ())
    code = trailers.get("mcp-error-code")
    obs = {"status": err.code().name, "details": err.details(), "mcpErrorCode": code}
    try:
        response = json.loads(bytes(trailers.get("mcp-error-bin", b"")).decode("utf-8"))
    except ValueError as e:
        return {"reason": f"mcp-error-bin is not JSON: {e}", **obs}
    obs["errorBin"] = response
    if err.code() != status:
        return {"reason": f"status is not {status.name}", **obs}
    if code != str(rpc_code):
        return {"reason": f"mcp-error-code is not {rpc_code}", **obs}
    if not isinstance(response, dict) or response.get("id", 0) is not None or response.get("jsonrpc") != "2.0" \
            or not isinstance(response.get("error"), dict) or response["error"].get("code") != rpc_code:
        return {"reason": f"mcp-error-bin is not a JSON-RPC error response with id null and {rpc_code}", **obs}
    if response["error"].get("message") != err.details():
        return {"reason": "grpc-message differs from the error message", **obs}
    return obs


def fail(reason, **obs):
    return {"ok": False, "reason": reason, **obs}


def status_fail(e):
    return fail(f"error {e.code().name}: {e.details()}")


def echo_after(stub):
    """The text of an echo call made after a deadline or a cancel, or its
    status name."""
    try:
        r = stub.CallTool(pb.CallToolRequest(request={"name": "echo", "arguments": struct({"text": "after"})}),
                          timeout=TIMEOUT)
        return first_text(r)
    except grpc.RpcError as e:
        return e.code().name


RESULT_COMPLETE = "RESULT_TYPE_COMPLETE"


def result_type(response):
    return pb.ResultType.Name(response.common.result_type)


def list_tools(stub):
    try:
        r = stub.ListTools(pb.ListToolsRequest(), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    echo = next((t for t in r.tools if t.name == "echo"), None)
    obs = {"names": [t.name for t in r.tools], "resultType": result_type(r),
           "echoSchemaType": echo.input_schema.fields["type"].string_value if echo else None}
    if echo is None:
        return fail("no echo tool", **obs)
    if obs["resultType"] != RESULT_COMPLETE:
        return fail("result_type not COMPLETE", **obs)
    if obs["echoSchemaType"] != "object":
        return fail('echo input_schema.type is not "object"', **obs)
    return {"ok": True, **obs}


def call_tool(stub):
    text = "h\u00e9llo from grpcio"
    req = pb.CallToolRequest(common={"metadata": struct({})},
                             request={"name": "echo", "arguments": struct({"text": text})})
    try:
        r = stub.CallTool(req, metadata=(("mcp_tool", "echo"),), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    obs = {"text": first_text(r), "isError": r.is_error}
    if obs["text"] != text:
        return fail("echoed text differs", **obs)
    if r.is_error:
        return fail("is_error set", **obs)
    return {"ok": True, **obs}


def unknown_tool(stub):
    try:
        stub.CallTool(pb.CallToolRequest(request={"name": "no_such_tool", "arguments": struct({})}), timeout=TIMEOUT)
        return fail("the call succeeded")
    except grpc.RpcError as e:
        obs = error_trailers(e, grpc.StatusCode.INVALID_ARGUMENT, -32602)
    return {"ok": "reason" not in obs, **obs}


def input_required(stub):
    """The demo's `confirm`: INPUT_REQUIRED with an elicitation and the
    sealed state, then the retry with the answer completes."""
    metadata = struct({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
    request = {"name": "confirm", "arguments": struct({})}
    try:
        first = stub.CallTool(pb.CallToolRequest(common={"metadata": metadata}, request=request), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return fail(f"first call: {e.code().name}: {e.details()}")
    asked = first.common.input_requests.get("confirm")
    obs = {"firstResultType": result_type(first),
           "elicitMessage": asked.elicit_request.message if asked is not None else None,
           "hasState": first.common.HasField("request_state") and first.common.request_state != ""}
    if obs["firstResultType"] != "RESULT_TYPE_INPUT_REQUIRED":
        return fail("first result is not INPUT_REQUIRED", **obs)
    if not obs["elicitMessage"] or not obs["hasState"]:
        return fail("no elicitation or no request_state", **obs)
    answer = pb.InputResponse(elicit_result={"type": pb.ElicitResult.TYPE_ACCEPT, "content": struct({"ok": True})})
    retry_req = pb.CallToolRequest(
        common={"metadata": metadata, "input_responses": {"confirm": answer},
                "request_state": first.common.request_state},
        request=request)
    try:
        retry = stub.CallTool(retry_req, timeout=TIMEOUT)
    except grpc.RpcError as e:
        return fail(f"retry: {e.code().name}: {e.details()}", **obs)
    obs["retryResultType"] = result_type(retry)
    obs["text"] = first_text(retry)
    if obs["retryResultType"] != RESULT_COMPLETE:
        return fail("retry is not COMPLETE", **obs)
    if obs["text"] != "confirmed":
        return fail('retry text is not "confirmed"', **obs)
    return {"ok": True, **obs}


def progress(stub):
    """Progress notifications are dropped; the one response arrives."""
    req = pb.CallToolRequest(common={"metadata": struct({"progressToken": "p1"})},
                             request={"name": "progress", "arguments": struct({"steps": 3, "delay_ms": 10})})
    try:
        r = stub.CallTool(req, timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    obs = {"text": first_text(r), "isError": r.is_error}
    if r.is_error:
        return fail("is_error set", **obs)
    if obs["text"] != "done after 3 steps":
        return fail("text is not the result", **obs)
    return {"ok": True, **obs}


def list_resources(stub):
    try:
        r = stub.ListResources(pb.ListResourcesRequest(), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    readme = next((x for x in r.resources if x.uri == "mem://readme"), None)
    obs = {"uris": [x.uri for x in r.resources], "resultType": result_type(r),
           "name": readme.name if readme else None, "mimeType": readme.mime_type if readme else None}
    if readme is None:
        return fail("no mem://readme", **obs)
    if obs["resultType"] != RESULT_COMPLETE:
        return fail("result_type not COMPLETE", **obs)
    if obs["name"] != "readme" or obs["mimeType"] != "text/plain":
        return fail("name or mime_type differs", **obs)
    return {"ok": True, **obs}


def read_resource(stub):
    uri = "mem://readme"
    try:
        r = stub.ReadResource(pb.ReadResourceRequest(uri=uri), metadata=(("mcp_resource", uri),), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    c = r.resource[0] if r.resource else pb.ResourceContents()
    obs = {"count": len(r.resource), "uri": c.uri, "mimeType": c.mime_type, "text": c.text}
    if obs["count"] != 1:
        return fail("not one content", **obs)
    if c.uri != uri or c.mime_type != "text/plain":
        return fail("uri or mime_type differs", **obs)
    if not c.text.startswith("mcpwire: "):
        return fail("text is not the readme", **obs)
    return {"ok": True, **obs}


def list_resource_templates(stub):
    """The demo has resources and no templates: an empty list, complete."""
    try:
        r = stub.ListResourceTemplates(pb.ListResourceTemplatesRequest(), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    obs = {"count": len(r.resource_templates), "resultType": result_type(r)}
    if obs["resultType"] != RESULT_COMPLETE:
        return fail("result_type not COMPLETE", **obs)
    if obs["count"] != 0:
        return fail("the demo has no templates", **obs)
    return {"ok": True, **obs}


def list_prompts(stub):
    try:
        r = stub.ListPrompts(pb.ListPromptsRequest(), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    greet = next((p for p in r.prompts if p.name == "greet"), None)
    args = list(greet.arguments) if greet else []
    obs = {"names": [p.name for p in r.prompts], "description": greet.description if greet else None,
           "arguments": [{"name": a.name, "required": a.required} for a in args]}
    if greet is None:
        return fail("no greet prompt", **obs)
    if obs["description"] != "Greets someone.":
        return fail("description differs", **obs)
    if obs["arguments"] != [{"name": "who", "required": True}]:
        return fail("arguments are not [who, required]", **obs)
    return {"ok": True, **obs}


def get_prompt(stub):
    try:
        r = stub.GetPrompt(pb.GetPromptRequest(name="greet", arguments={"who": "grpcio"}),
                           metadata=(("mcp_prompt", "greet"),), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return status_fail(e)
    m = r.messages[0] if r.messages else pb.PromptMessage()
    obs = {"count": len(r.messages), "role": pb.Role.Name(m.role), "text": m.text.text}
    if obs["count"] != 1:
        return fail("not one message", **obs)
    if obs["role"] != "ROLE_USER":
        return fail("role is not USER", **obs)
    if obs["text"] != "Say hello to grpcio.":
        return fail("text differs", **obs)
    return {"ok": True, **obs}


def complete(stub):
    """The demo answers no completions: UNIMPLEMENTED, -32601 in the
    trailers."""
    req = pb.CompletionRequest(prompt_reference={"name": "greet"}, argument={"name": "who", "value": "w"})
    try:
        r = stub.Complete(req, metadata=(("mcp_resource", "greet"),), timeout=TIMEOUT)
        return fail("the call succeeded", values=list(r.values))
    except grpc.RpcError as e:
        obs = error_trailers(e, grpc.StatusCode.UNIMPLEMENTED, -32601)
    return {"ok": "reason" not in obs, **obs}


def sleep_request():
    return pb.CallToolRequest(request={"name": "sleep", "arguments": struct({"ms": 5000})})


def deadline(stub):
    """`sleep` past a short deadline: DEADLINE_EXCEEDED at about the
    deadline, not when the sleep would end; then another call is answered."""
    started = time.monotonic()
    try:
        stub.CallTool(sleep_request(), metadata=(("mcp_tool", "sleep"),), timeout=0.3)
        return fail("the call succeeded")
    except grpc.RpcError as e:
        obs = {"status": e.code().name, "elapsedMs": int((time.monotonic() - started) * 1000)}
        if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
            return fail("status is not DEADLINE_EXCEEDED", **obs)
    if obs["elapsedMs"] > 3000:
        return fail("the deadline did not end the call", **obs)
    obs["after"] = echo_after(stub)
    if obs["after"] != "after":
        return fail("no answer after the deadline", **obs)
    return {"ok": True, **obs}


def cancel(stub):
    """A `sleep` cancelled by the client: CANCELLED, then the server answers
    another call on the same channel."""
    started = time.monotonic()
    future = stub.CallTool.future(sleep_request(), metadata=(("mcp_tool", "sleep"),), timeout=TIMEOUT)
    time.sleep(0.2)
    cancelled = future.cancel()
    obs = {"cancelled": cancelled, "status": future.code().name if future.done() else None,
           "elapsedMs": int((time.monotonic() - started) * 1000)}
    if not cancelled:
        return fail("the call was over before the cancel", **obs)
    if future.code() != grpc.StatusCode.CANCELLED:
        return fail("status is not CANCELLED", **obs)
    obs["after"] = echo_after(stub)
    if obs["after"] != "after":
        return fail("no answer after the cancel", **obs)
    return {"ok": True, **obs}


SCENARIOS = {
    "list-tools": list_tools,
    "call-tool": call_tool,
    "unknown-tool": unknown_tool,
    "input-required": input_required,
    "progress": progress,
    "list-resources": list_resources,
    "read-resource": read_resource,
    "list-resource-templates": list_resource_templates,
    "list-prompts": list_prompts,
    "get-prompt": get_prompt,
    "complete": complete,
    "deadline": deadline,
    "cancel": cancel,
}


def main():
    global pb
    if len(sys.argv) != 3 or sys.argv[2] not in SCENARIOS:
        print(f"usage: python typed.py HOST:PORT {{{','.join(SCENARIOS)}}}", file=sys.stderr)
        return 2
    addr, scenario = sys.argv[1:]
    out_dir = tempfile.mkdtemp(prefix="mcpwire-typed-")
    try:
        try:
            pb, pb_grpc = generate(out_dir)
        except Exception as e:  # noqa: BLE001 - any setup failure is exit 2
            print(f"stubs: {e}", file=sys.stderr)
            return 2
        with grpc.insecure_channel(addr) as channel:
            stub = pb_grpc.McpStub(channel)
            try:
                out = SCENARIOS[scenario](stub)
            except Exception as e:  # noqa: BLE001 - reported as the scenario's failure
                out = fail(f"exception: {type(e).__name__}: {e}")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    print(json.dumps({"client": "grpcio", "binding": "typed", "scenario": scenario, **out}, ensure_ascii=False))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
