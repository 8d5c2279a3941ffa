// grpc-js client of the typed binding `model_context_protocol.Mcp` (the
// Google Cloud proto files v0.2.0 vendored in proto/proto/gcp/, loaded at
// run time with @grpc/proto-loader), against a server that serves the
// demo (`mcpwire serve`): its tools, resource mem://readme and prompt greet.
//
//   node typed.js HOST:PORT SCENARIO
//
// Scenarios: list-tools, call-tool, unknown-tool, input-required, progress,
// list-resources, read-resource, list-resource-templates, list-prompts,
// get-prompt, complete, deadline, cancel; against the device app
// (scripts/interop-embassy-host.sh): device-list-tools, device-read-sensor,
// device-progress, device-deadline, device-cancel, device-no-resources,
// and unknown-tool. The environment's DEVICE_TOKEN, when set, is sent with
// every call as a bearer token (the device app requires one unless it runs
// with --no-auth). Prints one JSON
// line of observations; exit 0 = the expectations hold, 1 = not (`reason`),
// 2 = usage.
'use strict';

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const PROTO_DIR = path.join(__dirname, '..', '..', 'proto', 'proto', 'gcp');
const STATUS_NAME = Object.fromEntries(Object.entries(grpc.status).map(([k, v]) => [v, k]));

const def = loader.loadSync(path.join(PROTO_DIR, 'mcp.proto'), {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
});
const Mcp = grpc.loadPackageDefinition(def).model_context_protocol.Mcp;

// A JSON value as a google.protobuf.Value (proto-loader keeps the message
// shape: no JSON mapping of the well-known types). protobufjs defines the
// well-known types itself, with camelCase field names whatever `keepCase`
// says.
function value(v) {
  if (v === null) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(value) } };
  return { structValue: struct(v) };
}

function struct(o) {
  return { fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) };
}

function unary(client, rpc, request, metadata = new grpc.Metadata(), timeoutMs = 10000) {
  return new Promise((resolve) => {
    client[rpc](request, metadata, { deadline: Date.now() + timeoutMs }, (err, response) => {
      resolve({ err, response });
    });
  });
}

// Metadata with one key.
function header(key, val) {
  const md = new grpc.Metadata();
  md.set(key, val);
  return md;
}

// Checks an error's status and trailers: mcp-error-code is the JSON-RPC
// code and mcp-error-bin the JSON-RPC error response (id null) whose
// message is the grpc-message. Returns the observations and, when they do
// not hold, `reason`.
function errorTrailers(err, status, rpcCode) {
  const code = err.metadata.get('mcp-error-code')[0];
  const bin = err.metadata.get('mcp-error-bin')[0];
  const obs = { status: STATUS_NAME[err.code], details: err.details, mcpErrorCode: code };
  let response = null;
  try {
    response = JSON.parse(Buffer.from(bin).toString('utf8'));
  } catch (e) {
    return { reason: `mcp-error-bin is not JSON: ${e.message}`, ...obs };
  }
  obs.errorBin = response;
  if (err.code !== status) return { reason: `status is not ${STATUS_NAME[status]}`, ...obs };
  if (code !== String(rpcCode)) return { reason: `mcp-error-code is not ${rpcCode}`, ...obs };
  if (response.id !== null || response.jsonrpc !== '2.0' || !response.error || response.error.code !== rpcCode) {
    return { reason: `mcp-error-bin is not a JSON-RPC error response with id null and ${rpcCode}`, ...obs };
  }
  if (response.error.message !== err.details) return { reason: 'grpc-message differs from the error message', ...obs };
  return obs;
}

// The text of a CallToolResponse's first content block.
function firstText(response) {
  const c = (response && response.content) || [];
  return c.length > 0 && c[0].text ? c[0].text.text : undefined;
}

const scenarios = {
  async 'list-tools'(client) {
    const { err, response } = await unary(client, 'ListTools', {});
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const names = (response.tools || []).map((t) => t.name);
    const echo = (response.tools || []).find((t) => t.name === 'echo');
    const schemaType = echo && echo.input_schema && echo.input_schema.fields && echo.input_schema.fields.type;
    const obs = {
      names,
      resultType: response.common && response.common.result_type,
      echoSchemaType: schemaType && schemaType.stringValue,
    };
    if (!names.includes('echo')) return { ok: false, reason: 'no echo tool', ...obs };
    if (obs.resultType !== 'RESULT_TYPE_COMPLETE') return { ok: false, reason: 'result_type not COMPLETE', ...obs };
    if (obs.echoSchemaType !== 'object') return { ok: false, reason: 'echo input_schema.type is not "object"', ...obs };
    return { ok: true, ...obs };
  },

  async 'call-tool'(client) {
    const text = 'h\u00e9llo from grpc-js';
    const md = new grpc.Metadata();
    md.set('mcp_tool', 'echo');
    const { err, response } = await unary(
      client,
      'CallTool',
      { common: { metadata: struct({}) }, request: { name: 'echo', arguments: struct({ text }) } },
      md,
    );
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const obs = { text: firstText(response), isError: response.is_error === true };
    if (obs.text !== text) return { ok: false, reason: 'echoed text differs', ...obs };
    if (obs.isError) return { ok: false, reason: 'is_error set', ...obs };
    return { ok: true, ...obs };
  },

  async 'unknown-tool'(client) {
    const { err } = await unary(client, 'CallTool', { request: { name: 'no_such_tool', arguments: struct({}) } });
    if (!err) return { ok: false, reason: 'the call succeeded' };
    const obs = errorTrailers(err, grpc.status.INVALID_ARGUMENT, -32602);
    return { ok: !obs.reason, ...obs };
  },

  // A multi round-trip call (the demo's `confirm`): INPUT_REQUIRED with an
  // elicitation and the sealed state, then the retry with the answer in
  // common.input_responses completes.
  async 'input-required'(client) {
    const metadata = struct({ 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } });
    const request = { name: 'confirm', arguments: struct({}) };
    const first = await unary(client, 'CallTool', { common: { metadata }, request });
    if (first.err) return { ok: false, reason: `first call: ${STATUS_NAME[first.err.code]}: ${first.err.details}` };
    const common = first.response.common || {};
    const asked = common.input_requests && common.input_requests.confirm;
    const obs = {
      firstResultType: common.result_type,
      elicitMessage: asked && asked.elicit_request && asked.elicit_request.message,
      hasState: typeof common.request_state === 'string' && common.request_state.length > 0,
    };
    if (obs.firstResultType !== 'RESULT_TYPE_INPUT_REQUIRED') return { ok: false, reason: 'first result is not INPUT_REQUIRED', ...obs };
    if (!obs.elicitMessage || !obs.hasState) return { ok: false, reason: 'no elicitation or no request_state', ...obs };
    const retry = await unary(client, 'CallTool', {
      common: {
        metadata,
        input_responses: { confirm: { elicit_result: { type: 'TYPE_ACCEPT', content: struct({ ok: true }) } } },
        request_state: common.request_state,
      },
      request,
    });
    if (retry.err) return { ok: false, reason: `retry: ${STATUS_NAME[retry.err.code]}: ${retry.err.details}`, ...obs };
    obs.retryResultType = retry.response.common && retry.response.common.result_type;
    obs.text = firstText(retry.response);
    if (obs.retryResultType !== 'RESULT_TYPE_COMPLETE') return { ok: false, reason: 'retry is not COMPLETE', ...obs };
    if (obs.text !== 'confirmed') return { ok: false, reason: 'retry text is not "confirmed"', ...obs };
    return { ok: true, ...obs };
  },

  // Progress notifications are dropped; the one response arrives.
  async progress(client) {
    const { err, response } = await unary(client, 'CallTool', {
      common: { metadata: struct({ progressToken: 'p1' }) },
      request: { name: 'progress', arguments: struct({ steps: 3, delay_ms: 10 }) },
    });
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const obs = { text: firstText(response), isError: response.is_error === true };
    if (obs.isError) return { ok: false, reason: 'is_error set', ...obs };
    if (obs.text !== 'done after 3 steps') return { ok: false, reason: 'text is not the result', ...obs };
    return { ok: true, ...obs };
  },

  async 'list-resources'(client) {
    const { err, response } = await unary(client, 'ListResources', {});
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const readme = (response.resources || []).find((r) => r.uri === 'mem://readme');
    const obs = {
      uris: (response.resources || []).map((r) => r.uri),
      resultType: response.common && response.common.result_type,
      name: readme && readme.name,
      mimeType: readme && readme.mime_type,
    };
    if (!readme) return { ok: false, reason: 'no mem://readme', ...obs };
    if (obs.resultType !== 'RESULT_TYPE_COMPLETE') return { ok: false, reason: 'result_type not COMPLETE', ...obs };
    if (obs.name !== 'readme' || obs.mimeType !== 'text/plain') return { ok: false, reason: 'name or mime_type differs', ...obs };
    return { ok: true, ...obs };
  },

  async 'read-resource'(client) {
    const uri = 'mem://readme';
    const { err, response } = await unary(client, 'ReadResource', { uri }, header('mcp_resource', uri));
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const c = (response.resource || [])[0] || {};
    const obs = { count: (response.resource || []).length, uri: c.uri, mimeType: c.mime_type, text: c.text };
    if (obs.count !== 1) return { ok: false, reason: 'not one content', ...obs };
    if (obs.uri !== uri || obs.mimeType !== 'text/plain') return { ok: false, reason: 'uri or mime_type differs', ...obs };
    if (typeof obs.text !== 'string' || !obs.text.startsWith('mcpwire: ')) return { ok: false, reason: 'text is not the readme', ...obs };
    return { ok: true, ...obs };
  },

  // The demo has resources and no templates: an empty list, complete.
  async 'list-resource-templates'(client) {
    const { err, response } = await unary(client, 'ListResourceTemplates', {});
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const obs = {
      count: (response.resource_templates || []).length,
      resultType: response.common && response.common.result_type,
    };
    if (obs.resultType !== 'RESULT_TYPE_COMPLETE') return { ok: false, reason: 'result_type not COMPLETE', ...obs };
    if (obs.count !== 0) return { ok: false, reason: 'the demo has no templates', ...obs };
    return { ok: true, ...obs };
  },

  async 'list-prompts'(client) {
    const { err, response } = await unary(client, 'ListPrompts', {});
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const greet = (response.prompts || []).find((p) => p.name === 'greet');
    const args = (greet && greet.arguments) || [];
    const obs = {
      names: (response.prompts || []).map((p) => p.name),
      description: greet && greet.description,
      arguments: args.map((a) => ({ name: a.name, required: a.required === true })),
    };
    if (!greet) return { ok: false, reason: 'no greet prompt', ...obs };
    if (obs.description !== 'Greets someone.') return { ok: false, reason: 'description differs', ...obs };
    if (args.length !== 1 || args[0].name !== 'who' || args[0].required !== true) {
      return { ok: false, reason: 'arguments are not [who, required]', ...obs };
    }
    return { ok: true, ...obs };
  },

  async 'get-prompt'(client) {
    const { err, response } = await unary(
      client,
      'GetPrompt',
      { name: 'greet', arguments: { who: 'grpc-js' } },
      header('mcp_prompt', 'greet'),
    );
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const m = (response.messages || [])[0] || {};
    const obs = { count: (response.messages || []).length, role: m.role, text: m.text && m.text.text };
    if (obs.count !== 1) return { ok: false, reason: 'not one message', ...obs };
    if (obs.role !== 'ROLE_USER') return { ok: false, reason: 'role is not USER', ...obs };
    if (obs.text !== 'Say hello to grpc-js.') return { ok: false, reason: 'text differs', ...obs };
    return { ok: true, ...obs };
  },

  // The demo answers no completions: UNIMPLEMENTED, -32601 in the trailers.
  async complete(client) {
    const { err, response } = await unary(
      client,
      'Complete',
      { prompt_reference: { name: 'greet' }, argument: { name: 'who', value: 'w' } },
      header('mcp_resource', 'greet'),
    );
    if (!err) return { ok: false, reason: 'the call succeeded', values: response.values };
    const obs = errorTrailers(err, grpc.status.UNIMPLEMENTED, -32601);
    return { ok: !obs.reason, ...obs };
  },

  // `sleep` past a short deadline: DEADLINE_EXCEEDED at about the deadline,
  // not when the sleep would end.
  async deadline(client) {
    const started = Date.now();
    const { err } = await unary(
      client,
      'CallTool',
      { request: { name: 'sleep', arguments: struct({ ms: 5000 }) } },
      header('mcp_tool', 'sleep'),
      300,
    );
    const obs = { status: err && STATUS_NAME[err.code], elapsedMs: Date.now() - started };
    if (!err) return { ok: false, reason: 'the call succeeded', ...obs };
    if (err.code !== grpc.status.DEADLINE_EXCEEDED) return { ok: false, reason: 'status is not DEADLINE_EXCEEDED', ...obs };
    if (obs.elapsedMs > 3000) return { ok: false, reason: 'the deadline did not end the call', ...obs };
    const after = await unary(client, 'CallTool', { request: { name: 'echo', arguments: struct({ text: 'after' }) } });
    obs.after = after.err ? STATUS_NAME[after.err.code] : firstText(after.response);
    if (obs.after !== 'after') return { ok: false, reason: 'no answer after the deadline', ...obs };
    return { ok: true, ...obs };
  },

  // A `sleep` cancelled by the client: CANCELLED, then the server answers
  // another call on the same channel.
  async cancel(client) {
    const started = Date.now();
    const err = await new Promise((resolve) => {
      const call = client.CallTool(
        { request: { name: 'sleep', arguments: struct({ ms: 5000 }) } },
        header('mcp_tool', 'sleep'),
        { deadline: Date.now() + 10000 },
        (e) => resolve(e),
      );
      setTimeout(() => call.cancel(), 200);
    });
    const obs = { status: err && STATUS_NAME[err.code], elapsedMs: Date.now() - started };
    if (!err) return { ok: false, reason: 'the call succeeded', ...obs };
    if (err.code !== grpc.status.CANCELLED) return { ok: false, reason: 'status is not CANCELLED', ...obs };
    const after = await unary(client, 'CallTool', { request: { name: 'echo', arguments: struct({ text: 'after' }) } });
    obs.after = after.err ? STATUS_NAME[after.err.code] : firstText(after.response);
    if (obs.after !== 'after') return { ok: false, reason: 'no answer after the cancel', ...obs };
    return { ok: true, ...obs };
  },

  // The device app (examples/device-tools, served by mcpwire-embassy with
  // feature `typed`): its three tools, no resources or prompts.
  async 'device-list-tools'(client) {
    const { err, response } = await unary(client, 'ListTools', {});
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const names = (response.tools || []).map((t) => t.name);
    const obs = { names, resultType: response.common && response.common.result_type };
    if (names.join() !== 'read_sensor,toggle_output,slow_task') return { ok: false, reason: 'not the device tools', ...obs };
    if (obs.resultType !== 'RESULT_TYPE_COMPLETE') return { ok: false, reason: 'result_type not COMPLETE', ...obs };
    return { ok: true, ...obs };
  },

  async 'device-read-sensor'(client) {
    const { err, response } = await unary(
      client,
      'CallTool',
      { request: { name: 'read_sensor', arguments: struct({}) } },
      header('mcp_tool', 'read_sensor'),
    );
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const fields = (response.structured_content && response.structured_content.fields) || {};
    const mc = fields.millicelsius && fields.millicelsius.numberValue;
    const obs = { text: firstText(response), millicelsius: mc };
    if (!/^temperature -?\d+\.\d{3} °C$/.test(obs.text || '')) return { ok: false, reason: 'text is not a temperature', ...obs };
    if (!Number.isInteger(mc)) return { ok: false, reason: 'structured_content has no integer millicelsius', ...obs };
    return { ok: true, ...obs };
  },

  // slow_task's progress is dropped; its one response arrives.
  async 'device-progress'(client) {
    const { err, response } = await unary(client, 'CallTool', {
      common: { metadata: struct({ progressToken: 'p1' }) },
      request: { name: 'slow_task', arguments: struct({ steps: 3, delay_ms: 10 }) },
    });
    if (err) return { ok: false, reason: `error ${STATUS_NAME[err.code]}: ${err.details}` };
    const obs = { text: firstText(response), isError: response.is_error === true };
    if (obs.isError || obs.text !== 'done after 3 steps') return { ok: false, reason: 'not the result', ...obs };
    return { ok: true, ...obs };
  },

  // More deadlines and cancels than the device has handler slots, then a
  // call that completes: every cancelled tool freed its slot.
  async 'device-deadline'(client) {
    const rounds = [];
    for (let i = 0; i < 4; i++) {
      const started = Date.now();
      const { err } = await unary(
        client,
        'CallTool',
        { request: { name: 'slow_task', arguments: struct({ steps: 50, delay_ms: 100 }) } },
        new grpc.Metadata(),
        300,
      );
      rounds.push({ status: err && STATUS_NAME[err.code], elapsedMs: Date.now() - started });
    }
    const obs = { rounds };
    if (rounds.some((r) => r.status !== 'DEADLINE_EXCEEDED' || r.elapsedMs > 2000)) {
      return { ok: false, reason: 'a call did not end with DEADLINE_EXCEEDED in time', ...obs };
    }
    return afterwards(client, obs);
  },

  async 'device-cancel'(client) {
    const rounds = [];
    for (let i = 0; i < 4; i++) {
      const started = Date.now();
      const err = await new Promise((resolve) => {
        const call = client.CallTool(
          { request: { name: 'slow_task', arguments: struct({ steps: 50, delay_ms: 100 }) } },
          new grpc.Metadata(),
          { deadline: Date.now() + 10000 },
          (e) => resolve(e),
        );
        setTimeout(() => call.cancel(), 200);
      });
      rounds.push({ status: err && STATUS_NAME[err.code], elapsedMs: Date.now() - started });
    }
    const obs = { rounds };
    if (rounds.some((r) => r.status !== 'CANCELLED' || r.elapsedMs > 2000)) {
      return { ok: false, reason: 'a call did not end CANCELLED in time', ...obs };
    }
    return afterwards(client, obs);
  },

  // No resources on the device: resources/list has no route, -32601.
  async 'device-no-resources'(client) {
    const { err, response } = await unary(client, 'ListResources', {});
    if (!err) return { ok: false, reason: 'the call succeeded', resources: response.resources };
    const obs = errorTrailers(err, grpc.status.UNIMPLEMENTED, -32601);
    return { ok: !obs.reason, ...obs };
  },
};

// The device's slow_task completes after the rounds of `obs`.
async function afterwards(client, obs) {
  const after = await unary(client, 'CallTool', {
    request: { name: 'slow_task', arguments: struct({ steps: 1, delay_ms: 0 }) },
  });
  obs.after = after.err ? STATUS_NAME[after.err.code] : firstText(after.response);
  if (obs.after !== 'done after 1 steps') return { ok: false, reason: 'no answer afterwards', ...obs };
  return { ok: true, ...obs };
}

async function main() {
  const [addr, scenario] = process.argv.slice(2);
  if (!addr || !scenarios[scenario]) {
    console.error(`usage: node typed.js HOST:PORT {${Object.keys(scenarios).join(',')}}`);
    process.exit(2);
  }
  // grpc-js sends no call credentials over an insecure channel: the token
  // goes in as metadata, added to every call by an interceptor.
  const token = process.env.DEVICE_TOKEN;
  const bearer = (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    start(metadata, listener, next) {
      metadata.set('authorization', `Bearer ${token}`);
      next(metadata, listener);
    },
  });
  const client = new Mcp(addr, grpc.credentials.createInsecure(), token ? { interceptors: [bearer] } : {});
  let out;
  try {
    out = await scenarios[scenario](client);
  } catch (e) {
    out = { ok: false, reason: `exception: ${e && e.stack ? e.stack : e}` };
  }
  client.close();
  console.log(JSON.stringify({ client: 'grpc-js', binding: 'typed', scenario, ...out }));
  process.exit(out.ok ? 0 : 1);
}

main();
