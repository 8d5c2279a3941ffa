#!/usr/bin/env node
// A real-peer MCP client on the gRPC tunnel binding, with @grpc/grpc-js.
//
//   node client.js ADDR SCENARIO
//
// ADDR is host:port. Prints one JSON line with what it observed and exits 0
// when the scenario's expectations hold, 1 otherwise ("reason" says why),
// 2 on a usage error. Scenarios: see SCENARIOS at the end.
//
// Every request carries the 2026-07-28 `_meta` (protocolVersion,
// clientCapabilities, clientInfo) and the mirrored metadata mcp-protocol-
// version, mcp-method, mcp-name (tools/call, prompts/get, resources/read) and
// mcp-param-* for the x-mcp-header annotated arguments of the tool's schema
// from tools/list. Every call has a deadline (10 s) except a listen.
//
// Environment:
//   MCPWIRE_TOKEN  sent as "authorization: Bearer <token>" on every call
//                  (auth-bad sends none and a wrong one); auth-ok needs it
//   MCPWIRE_CA     a CA file: every call uses TLS, server name "localhost",
//                  ALPN h2 (grpc-js's default); the tls scenario needs it
'use strict';

const fs = require('node:fs');
const tls = require('node:tls');
const grpc = require('@grpc/grpc-js');
const { PROTOCOL_VERSION, STATUS_NAME, McpClient, requests, rawCall, main } = require('./common');

const DEMO_TOOLS = ['echo', 'progress', 'sleep', 'lookup', 'confirm'];
const DEFAULT_DEADLINE_MS = 10000;
const CLIENT_INFO = { name: 'mcpwire-interop-grpc-js', version: '0.1.0' };

// ---------------------------------------------------------------------------
// Connection

function makeClient(addr) {
  const ca = process.env.MCPWIRE_CA;
  if (ca) {
    return new McpClient(addr, grpc.credentials.createSsl(fs.readFileSync(ca)), {
      'grpc.ssl_target_name_override': 'localhost',
      'grpc.default_authority': 'localhost',
    });
  }
  return new McpClient(addr, grpc.credentials.createInsecure());
}

function splitAddr(addr) {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(addr.slice(i + 1)) };
}

// ---------------------------------------------------------------------------
// Requests and their metadata

const request = requests(CLIENT_INFO);

// MCP §5.5.3: plain when printable ASCII without surrounding whitespace and
// not sentinel-looking, else =?base64?…?=.
function encodeValue(s) {
  const plain = s.length > 0 && /^[\x20-\x7e]*$/.test(s) && !/^[ \t]|[ \t]$/.test(s) &&
    !(s.startsWith('=?base64?') && s.endsWith('?='));
  return plain ? s : `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;
}

const TOKEN_RE = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;

// The x-mcp-header annotations of a schema (reachable through `properties`
// only), or an error string when the tool's annotations are invalid.
function annotationsOf(schema) {
  const out = [];
  const walk = (s, p) => {
    for (const [name, prop] of Object.entries((s && s.properties) || {})) {
      if (!prop || typeof prop !== 'object') continue;
      if ('x-mcp-header' in prop) out.push({ header: prop['x-mcp-header'], path: [...p, name], type: prop.type });
      if (prop.type === 'object') walk(prop, [...p, name]);
    }
  };
  walk(schema, []);
  const seen = new Set();
  for (const a of out) {
    if (typeof a.header !== 'string' || !TOKEN_RE.test(a.header)) return `invalid x-mcp-header ${JSON.stringify(a.header)}`;
    if (!['string', 'integer', 'boolean'].includes(a.type)) return `x-mcp-header ${a.header} on type ${JSON.stringify(a.type)}`;
    if (seen.has(a.header.toLowerCase())) return `duplicate x-mcp-header ${a.header}`;
    seen.add(a.header.toLowerCase());
  }
  return out;
}

function paramHeaders(schema, args) {
  const anns = annotationsOf(schema);
  if (typeof anns === 'string') throw new Error(anns);
  const out = {};
  for (const a of anns) {
    let v = args;
    for (const k of a.path) v = v && typeof v === 'object' ? v[k] : undefined;
    if (v === undefined || v === null) continue;
    let s;
    if (a.type === 'integer') {
      if (!Number.isSafeInteger(v)) throw new Error(`refusing to mirror ${a.header}: not a safe integer`);
      s = String(v);
    } else if (a.type === 'boolean') s = v ? 'true' : 'false';
    else s = String(v);
    out[`mcp-param-${a.header.toLowerCase()}`] = encodeValue(s);
  }
  return out;
}

// The metadata of a request. opts.omit drops keys; opts.set overrides them;
// opts.schema is the tool's inputSchema (for mcp-param-*); opts.auth is
// false (no authorization), a token, or undefined (MCPWIRE_TOKEN if set).
function metadataFor(msg, opts = {}) {
  const h = {
    'mcp-protocol-version': msg.params._meta['io.modelcontextprotocol/protocolVersion'],
    'mcp-method': msg.method,
  };
  const nameKey = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' }[msg.method];
  if (nameKey && typeof msg.params[nameKey] === 'string') h['mcp-name'] = encodeValue(msg.params[nameKey]);
  if (msg.method === 'tools/call' && opts.schema) Object.assign(h, paramHeaders(opts.schema, msg.params.arguments || {}));
  const token = opts.auth === undefined ? process.env.MCPWIRE_TOKEN : opts.auth;
  if (token) h.authorization = `Bearer ${token}`;
  for (const k of opts.omit || []) delete h[k];
  Object.assign(h, opts.set || {});
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(h)) md.set(k, v);
  return { md, headers: h };
}

// ---------------------------------------------------------------------------
// One call: resolves with the messages and the final status.

function call(client, msg, md, { deadlineMs = DEFAULT_DEADLINE_MS, onMessage, onStart, path: methodPath } = {}) {
  return new Promise((resolve) => {
    const started = Date.now();
    const options = deadlineMs === null ? {} : { deadline: Date.now() + deadlineMs };
    const arg = { jsonrpc: Buffer.from(JSON.stringify(msg), 'utf8') };
    const c = methodPath
      ? client.makeServerStreamRequest(methodPath, (m) => McpClient.service.Call.requestSerialize(m),
        (b) => McpClient.service.Call.responseDeserialize(b), arg, md, options)
      : client.Call(arg, md, options);
    const messages = [];
    const bad = [];
    if (onStart) onStart(c);
    c.on('data', (m) => {
      const text = Buffer.from(m.jsonrpc).toString('utf8');
      let obj;
      try { obj = JSON.parse(text); } catch { bad.push(text); return; }
      messages.push(obj);
      if (onMessage) onMessage(obj, c, messages);
    });
    c.on('error', () => {}); // the status event carries it
    c.on('status', (s) => {
      resolve({ messages, badMessages: bad, code: s.code, details: s.details, metadata: s.metadata,
        elapsedMs: Date.now() - started });
    });
  });
}

function redact(headers) {
  const out = { ...headers };
  if (out.authorization) out.authorization = 'Bearer <redacted>';
  return out;
}

function first(md, key) {
  const v = md ? md.get(key) : [];
  return v.length ? v[0] : undefined;
}

// The JSON-RPC error a call's trailers carry (typed binding §9.2).
function trailerError(r) {
  const codeText = first(r.metadata, 'mcp-error-code');
  const bin = first(r.metadata, 'mcp-error-bin');
  const out = { grpc_status: r.code, grpc_status_name: STATUS_NAME[r.code], grpc_message: r.details };
  if (codeText !== undefined) out.mcp_error_code = String(codeText);
  if (bin !== undefined) {
    const text = Buffer.isBuffer(bin) ? bin.toString('utf8') : String(bin);
    try { out.mcp_error_bin = JSON.parse(text); } catch { out.mcp_error_bin_raw = text; }
  }
  return out;
}

function statusOf(r) {
  return { code: r.code, name: STATUS_NAME[r.code], details: r.details, elapsed_ms: r.elapsedMs };
}

// ---------------------------------------------------------------------------
// Checks

// A call that should end with one response (after notifications) and OK.
// Returns the response or null.
function expectResponse(ck, r, msg, label) {
  const where = label ? `${label}: ` : '';
  if (!ck.expect(r.code === grpc.status.OK,
    `${where}status ${STATUS_NAME[r.code]} (${r.code}) "${r.details}" ${JSON.stringify(trailerError(r))}`)) return null;
  ck.expect(r.badMessages.length === 0, `${where}${r.badMessages.length} message(s) that are not JSON`);
  const responses = r.messages.filter((m) => 'result' in m || 'error' in m);
  if (!ck.expect(responses.length === 1, `${where}${responses.length} responses on the stream, want 1`)) return null;
  const res = responses[0];
  ck.expect(r.messages[r.messages.length - 1] === res, `${where}the response is not the last message`);
  ck.expect(res.jsonrpc === '2.0', `${where}response without jsonrpc "2.0"`);
  ck.expect(JSON.stringify(res.id) === JSON.stringify(msg.id), `${where}response id ${JSON.stringify(res.id)} != ${JSON.stringify(msg.id)}`);
  for (const m of r.messages) {
    if (m === res) continue;
    ck.expect(!('id' in m) && typeof m.method === 'string', `${where}a message before the response is not a notification: ${JSON.stringify(m)}`);
  }
  return res;
}

function expectResult(ck, res, label) {
  const where = label ? `${label}: ` : '';
  if (!res) return null;
  if (!ck.expect(res.result && typeof res.result === 'object', `${where}error response ${JSON.stringify(res.error)}`)) return null;
  ck.expect(typeof res.result.resultType === 'string', `${where}result without resultType`);
  return res.result;
}

// A call that should end with headers-only trailers carrying a JSON-RPC error.
function expectTrailerError(ck, r, msg, wantStatus, wantCode, label, { nullIdOk = false } = {}) {
  const te = trailerError(r);
  ck.expect(r.code === wantStatus, `${label}: status ${STATUS_NAME[r.code]} (${r.code}), want ${STATUS_NAME[wantStatus]} (${wantStatus})`);
  ck.expect(r.messages.length === 0, `${label}: ${r.messages.length} message(s) before the error status`);
  ck.expect(te.mcp_error_code === String(wantCode), `${label}: mcp-error-code ${JSON.stringify(te.mcp_error_code)}, want ${wantCode}`);
  const e = te.mcp_error_bin;
  if (ck.expect(e && typeof e === 'object', `${label}: no decodable mcp-error-bin trailer`)) {
    ck.expect(e.jsonrpc === '2.0', `${label}: mcp-error-bin without jsonrpc "2.0"`);
    ck.expect(e.error && e.error.code === wantCode, `${label}: mcp-error-bin code ${e.error && e.error.code}, want ${wantCode}`);
    ck.expect(e.error && typeof e.error.message === 'string', `${label}: mcp-error-bin without error.message`);
    const idOk = JSON.stringify(e.id) === JSON.stringify(msg.id) || (nullIdOk && (e.id === null || e.id === undefined));
    ck.expect(idOk, `${label}: mcp-error-bin id ${JSON.stringify(e.id)}, want ${JSON.stringify(msg.id)}${nullIdOk ? ' or null' : ''}`);
  }
  return te;
}

function textOf(result) {
  return Array.isArray(result && result.content)
    ? result.content.filter((c) => c && c.type === 'text').map((c) => c.text).join('') : undefined;
}

// A value that fits a JSON schema well enough for a demo tool.
function sample(schema) {
  if (!schema || typeof schema !== 'object') return 'interop';
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  if ('const' in schema) return schema.const;
  if ('default' in schema) return schema.default;
  switch (schema.type) {
    case 'boolean': return true;
    case 'integer': case 'number': return typeof schema.minimum === 'number' ? Math.max(schema.minimum, 1) : 1;
    case 'array': return [];
    case 'object': {
      const o = {};
      for (const k of schema.required || []) o[k] = sample((schema.properties || {})[k]);
      return o;
    }
    default: return 'interop';
  }
}

function sampleAll(schema) {
  const o = {};
  for (const [k, p] of Object.entries((schema && schema.properties) || {})) o[k] = sample(p);
  return o;
}

async function listTools(client, ck) {
  const tools = [];
  let cursor;
  for (let page = 0; page < 20; page++) {
    const msg = request('tools/list', cursor === undefined ? {} : { cursor });
    const r = await call(client, msg, metadataFor(msg).md);
    const result = expectResult(ck, expectResponse(ck, r, msg, 'tools/list'), 'tools/list');
    if (!result) return null;
    if (!ck.expect(Array.isArray(result.tools), 'tools/list: result.tools is not an array')) return null;
    if (page === 0) { ck.set('ttlMs', result.ttlMs); ck.set('cacheScope', result.cacheScope); }
    ck.expect(Number.isInteger(result.ttlMs) && result.ttlMs >= 0, `tools/list: ttlMs ${JSON.stringify(result.ttlMs)}`);
    ck.expect(['public', 'private'].includes(result.cacheScope), `tools/list: cacheScope ${JSON.stringify(result.cacheScope)}`);
    tools.push(...result.tools);
    if (typeof result.nextCursor !== 'string') break;
    cursor = result.nextCursor;
  }
  return tools;
}

async function toolSchema(client, ck, name) {
  const tools = await listTools(client, ck);
  if (!tools) return null;
  const tool = tools.find((t) => t && t.name === name);
  if (!ck.expect(tool, `tools/list has no tool ${name}`)) return null;
  return tool.inputSchema;
}

async function echoWorks(client, ck, label, text = 'still there') {
  const msg = request('tools/call', { name: 'echo', arguments: { text } });
  const r = await call(client, msg, metadataFor(msg).md, { deadlineMs: 5000 });
  const result = expectResult(ck, expectResponse(ck, r, msg, label), label);
  return !!result && textOf(result) === text;
}

// ---------------------------------------------------------------------------
// Scenarios

const SCENARIOS = {
  async discover(client, ck) {
    const msg = request('server/discover');
    const r = await call(client, msg, metadataFor(msg).md);
    ck.set('status', statusOf(r));
    const result = expectResult(ck, expectResponse(ck, r, msg), 'server/discover');
    if (!result) return;
    ck.set('supportedVersions', result.supportedVersions);
    ck.set('capabilities', result.capabilities);
    ck.set('ttlMs', result.ttlMs);
    ck.set('cacheScope', result.cacheScope);
    ck.set('serverInfo', result._meta && result._meta['io.modelcontextprotocol/serverInfo']);
    ck.expect(result.resultType === 'complete', `resultType ${JSON.stringify(result.resultType)}`);
    ck.expect(Array.isArray(result.supportedVersions) && result.supportedVersions.includes(PROTOCOL_VERSION),
      `supportedVersions ${JSON.stringify(result.supportedVersions)} lacks ${PROTOCOL_VERSION}`);
    ck.expect(result.capabilities && typeof result.capabilities === 'object' && !Array.isArray(result.capabilities),
      'capabilities is not an object');
    ck.expect(Number.isInteger(result.ttlMs) && result.ttlMs >= 0, `ttlMs ${JSON.stringify(result.ttlMs)}`);
    ck.expect(['public', 'private'].includes(result.cacheScope), `cacheScope ${JSON.stringify(result.cacheScope)}`);
  },

  async 'tools-list'(client, ck) {
    const tools = await listTools(client, ck);
    if (!tools) return;
    ck.set('tools', tools.map((t) => t && t.name));
    for (const name of DEMO_TOOLS) {
      const t = tools.find((x) => x && x.name === name);
      if (!ck.expect(t, `no tool ${name}`)) continue;
      ck.expect(t.inputSchema && t.inputSchema.type === 'object', `${name}: inputSchema.type is not "object"`);
      const anns = annotationsOf(t.inputSchema);
      ck.expect(typeof anns !== 'string', `${name}: ${anns} (a client drops this tool)`);
    }
    const lookup = tools.find((x) => x && x.name === 'lookup');
    if (lookup && lookup.inputSchema) {
      const anns = annotationsOf(lookup.inputSchema);
      const got = typeof anns === 'string' ? anns : anns.map((a) => `${a.path.join('.')}:${a.type}:${a.header}`).sort();
      ck.set('lookup_annotations', got);
      ck.expect(JSON.stringify(got) === JSON.stringify(['limit:integer:Limit', 'region:string:Region']),
        `lookup annotations ${JSON.stringify(got)}, want region (string, Region) and limit (integer, Limit)`);
    }
  },

  async echo(client, ck) {
    const text = 'hello over gRPC, ünïcödé ✓';
    const msg = request('tools/call', { name: 'echo', arguments: { text } });
    const { md, headers } = metadataFor(msg);
    ck.set('metadata', redact(headers));
    const r = await call(client, msg, md);
    ck.set('status', statusOf(r));
    const result = expectResult(ck, expectResponse(ck, r, msg), 'echo');
    if (!result) return;
    ck.set('content', result.content);
    ck.expect(result.resultType === 'complete', `resultType ${JSON.stringify(result.resultType)}`);
    ck.expect(result.isError !== true, 'isError: true');
    ck.expect(Array.isArray(result.content) && result.content.length >= 1 && result.content[0].type === 'text' &&
      result.content[0].text === text, `content ${JSON.stringify(result.content)} is not the text ${JSON.stringify(text)}`);
  },

  async progress(client, ck) {
    const steps = 4;
    const token = `p-js-${process.pid}`;
    const msg = request('tools/call', { name: 'progress', arguments: { steps, delay_ms: 50 } }, { progressToken: token });
    const r = await call(client, msg, metadataFor(msg).md);
    ck.set('status', statusOf(r));
    const res = expectResponse(ck, r, msg, 'progress');
    const notes = r.messages.filter((m) => m.method === 'notifications/progress');
    ck.set('progress', notes.map((m) => m.params && m.params.progress));
    ck.expect(notes.length === steps, `${notes.length} progress notifications, want ${steps}`);
    let last = -Infinity;
    for (const n of notes) {
      const p = n.params || {};
      ck.expect(p.progressToken === token, `progress notification with token ${JSON.stringify(p.progressToken)}`);
      ck.expect(typeof p.progress === 'number' && p.progress > last, `progress ${p.progress} does not increase`);
      last = p.progress;
    }
    const others = r.messages.filter((m) => m !== res && m.method !== 'notifications/progress');
    ck.expect(others.length === 0, `other messages on the stream: ${JSON.stringify(others)}`);
    const result = expectResult(ck, res, 'progress');
    if (result) ck.expect(result.isError !== true, 'isError: true');
  },

  async 'error-trailers'(client, ck) {
    // 1. A tools/call without mcp-method: -32020 in the trailers.
    const m1 = request('tools/call', { name: 'echo', arguments: { text: 'x' } });
    const r1 = await call(client, m1, metadataFor(m1, { omit: ['mcp-method'] }).md);
    ck.set('missing_mcp_method', { request_id: m1.id, ...trailerError(r1) });
    expectTrailerError(ck, r1, m1, grpc.status.INVALID_ARGUMENT, -32020, 'missing mcp-method');
    // 2. An unknown method: the binding ends a call in the trailers only for
    // -32700, -32600, -32020 and -32022, so this is an ordinary error
    // response with the request id, then status OK.
    const m2 = request('mcpwire/no-such-method', {});
    const r2 = await call(client, m2, metadataFor(m2).md);
    ck.set('unknown_method', { request_id: m2.id, grpc_status: r2.code, messages: r2.messages });
    ck.expect(r2.code === grpc.status.OK, `unknown method: status ${STATUS_NAME[r2.code]} (${r2.code}), want OK`);
    const e2 = r2.messages.length === 1 ? r2.messages[0] : null;
    ck.expect(
      e2 !== null && e2.id === m2.id && e2.error !== undefined && e2.error.code === -32601,
      `unknown method: want one error response -32601 with id ${m2.id}, got ${JSON.stringify(r2.messages)}`,
    );
    // 3. An unknown path: UNIMPLEMENTED.
    const m3 = request('tools/list');
    const r3 = await call(client, m3, metadataFor(m3).md, { path: '/mcp.zig.transport.v1.Mcp/NoSuchRpc' });
    ck.set('unknown_path', { grpc_status: r3.code, grpc_status_name: STATUS_NAME[r3.code], grpc_message: r3.details });
    ck.expect(r3.code === grpc.status.UNIMPLEMENTED, `unknown path: status ${STATUS_NAME[r3.code]} (${r3.code}), want UNIMPLEMENTED`);
  },

  async deadline(client, ck, addr) {
    const msg = request('tools/call', { name: 'sleep', arguments: { ms: 5000 } });
    const r = await call(client, msg, metadataFor(msg).md, { deadlineMs: 300 });
    ck.set('status', statusOf(r));
    ck.expect(r.code === grpc.status.DEADLINE_EXCEEDED, `status ${STATUS_NAME[r.code]} (${r.code}), want DEADLINE_EXCEEDED`);
    // At the 300 ms deadline, well before the 5 s sleep would end (the
    // margin is for a busy machine).
    ck.expect(r.elapsedMs < 3000, `ended after ${r.elapsedMs} ms, want < 3000`);
    ck.expect(r.messages.length === 0, `${r.messages.length} message(s) on the stream`);
    // The server's own part: grpc-timeout 300m and no timer in the client.
    const m2 = request('tools/call', { name: 'sleep', arguments: { ms: 5000 } });
    // Its time includes a fresh connection (TLS too, with MCPWIRE_CA).
    const raw = await rawCall(addr, m2, { ...metadataFor(m2).headers, 'grpc-timeout': '300m' },
      { ca: process.env.MCPWIRE_CA, giveUpMs: 4000 });
    ck.set('server_side', { grpc_status: raw.grpcStatus, grpc_message: raw.grpcMessage, http_status: raw.headers && raw.headers[':status'],
      rst_code: raw.rstCode, data_bytes: raw.dataBytes, elapsed_ms: raw.elapsedMs, error: raw.error });
    ck.expect(raw.grpcStatus === grpc.status.DEADLINE_EXCEEDED,
      `server side (grpc-timeout 300m, no client timer): grpc-status ${raw.grpcStatus}, want 4${raw.error ? ` (${raw.error})` : ''}`);
    ck.expect(raw.elapsedMs < 3000, `server side: ended after ${raw.elapsedMs} ms, want < 3000`);
    ck.set('server_answers_after', await echoWorks(client, ck, 'echo after the deadline'));
  },

  async cancel(client, ck) {
    const msg = request('tools/call', { name: 'sleep', arguments: { ms: 5000 } });
    const p = new Promise((resolve) => {
      const started = Date.now();
      const c = client.Call({ jsonrpc: Buffer.from(JSON.stringify(msg)) }, metadataFor(msg).md,
        { deadline: Date.now() + DEFAULT_DEADLINE_MS });
      const messages = [];
      c.on('data', (m) => messages.push(m));
      c.on('error', () => {});
      c.on('status', (s) => resolve({ code: s.code, details: s.details, elapsedMs: Date.now() - started, messages }));
      setTimeout(() => c.cancel(), 200);
    });
    const r = await p;
    ck.set('status', statusOf(r));
    // Whether the server stopped the handler cannot be seen from here.
    ck.set('server_reaction', 'not observable from the client');
    ck.expect(r.code === grpc.status.CANCELLED, `status ${STATUS_NAME[r.code]} (${r.code}), want CANCELLED`);
    ck.expect(r.elapsedMs < 2000, `ended after ${r.elapsedMs} ms`);
    ck.set('server_answers_after', await echoWorks(client, ck, 'echo after the cancel'));
  },

  async listen(client, ck) {
    const id = `listen-js-${process.pid}`;
    const filter = { toolsListChanged: true };
    const msg = request('subscriptions/listen', { notifications: filter }, { id });
    let cancelledByUs = false;
    let noAck = null;
    const r = await call(client, msg, metadataFor(msg).md, {
      deadlineMs: null, // a listen has no default timeout
      onMessage: (m, c, all) => {
        if (all.length === 1) {
          clearTimeout(noAck);
          // Keep it open a little to see events, then cancel (RST_STREAM CANCEL).
          setTimeout(() => { cancelledByUs = true; c.cancel(); }, 700);
        }
      },
      onStart: (c) => { noAck = setTimeout(() => { ck.expect(false, 'no acknowledgment within 5 s'); c.cancel(); }, 5000); },
    });
    clearTimeout(noAck);
    ck.set('status', statusOf(r));
    ck.set('messages', r.messages.map((m) => m.method || (m.result ? 'result' : 'error')));
    const ack = r.messages[0];
    if (ck.expect(ack, 'no message on the listen stream')) {
      ck.expect(ack.method === 'notifications/subscriptions/acknowledged', `first message is ${JSON.stringify(ack.method || ack)}`);
      const sid = ack.params && ack.params._meta && ack.params._meta['io.modelcontextprotocol/subscriptionId'];
      ck.set('ack', ack.params);
      ck.expect(JSON.stringify(sid) === JSON.stringify(id), `ack subscriptionId ${JSON.stringify(sid)}, want ${JSON.stringify(id)}`);
      ck.expect(ack.params && ack.params.notifications && typeof ack.params.notifications === 'object',
        'ack without params.notifications');
      const allowed = new Set(['notifications/tools/list_changed']);
      for (const ev of r.messages.slice(1)) {
        if ('id' in ev) { ck.expect(false, `the server ended the listen before the cancel: ${JSON.stringify(ev)}`); continue; }
        const esid = ev.params && ev.params._meta && ev.params._meta['io.modelcontextprotocol/subscriptionId'];
        ck.expect(JSON.stringify(esid) === JSON.stringify(id), `event ${ev.method} with subscriptionId ${JSON.stringify(esid)}`);
        ck.expect(allowed.has(ev.method), `event ${ev.method} that the filter did not ask for`);
      }
      ck.set('events', r.messages.length - 1);
    }
    ck.expect(cancelledByUs, 'the call ended before the client cancelled it');
    ck.expect(r.code === grpc.status.CANCELLED, `status ${STATUS_NAME[r.code]} (${r.code}), want CANCELLED`);
  },

  async 'input-required'(client, ck) {
    const schema = await toolSchema(client, ck, 'confirm');
    if (!schema) return;
    const args = sampleAll(schema);
    const capabilities = { elicitation: {} };
    const m1 = request('tools/call', { name: 'confirm', arguments: args }, { capabilities });
    const r1 = await call(client, m1, metadataFor(m1, { schema }).md);
    let result = expectResult(ck, expectResponse(ck, r1, m1, 'first call'), 'first call');
    if (!result) return;
    const rounds = [];
    let prev = m1;
    for (let round = 1; round <= 3 && result && result.resultType === 'input_required'; round++) {
      const reqs = result.inputRequests;
      rounds.push({ id: prev.id, inputRequests: reqs && Object.keys(reqs), hasState: 'requestState' in result });
      if (round === 1) {
        ck.expect(reqs && typeof reqs === 'object' && Object.values(reqs).some((x) => x && x.method === 'elicitation/create'),
          `first answer has no elicitation/create input request: ${JSON.stringify(reqs)}`);
        ck.expect(typeof result.requestState === 'string', 'first answer has no requestState');
      }
      const inputResponses = {};
      for (const [key, ir] of Object.entries(reqs || {})) {
        if (ir.method === 'elicitation/create') {
          inputResponses[key] = { action: 'accept', content: sample((ir.params || {}).requestedSchema || { type: 'object' }) };
        } else if (ir.method === 'roots/list') {
          inputResponses[key] = { roots: [] };
        } else if (ir.method === 'sampling/createMessage') {
          inputResponses[key] = { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'interop', stopReason: 'endTurn' };
        }
      }
      const params = { name: 'confirm', arguments: args, inputResponses };
      if ('requestState' in result) params.requestState = result.requestState;
      const m = request('tools/call', params, { capabilities }); // a new JSON-RPC id
      ck.expect(m.id !== prev.id, 'the retry reuses the id');
      const r = await call(client, m, metadataFor(m, { schema }).md);
      result = expectResult(ck, expectResponse(ck, r, m, `round ${round + 1}`), `round ${round + 1}`);
      prev = m;
    }
    ck.set('rounds', rounds);
    if (!result) return;
    ck.set('final', { resultType: result.resultType, content: result.content, structuredContent: result.structuredContent });
    ck.expect(rounds.length >= 1, `the first call did not answer input_required (resultType ${JSON.stringify(result.resultType)})`);
    ck.expect(result.resultType === 'complete', `final resultType ${JSON.stringify(result.resultType)}`);
    ck.expect(result.isError !== true, 'final result isError: true');
    ck.expect(Array.isArray(result.content), 'final result without content');
  },

  async lookup(client, ck) {
    const schema = await toolSchema(client, ck, 'lookup');
    if (!schema) return;
    const anns = annotationsOf(schema);
    if (!ck.expect(typeof anns !== 'string', `lookup: ${anns}`)) return;
    const cases = [
      { args: { region: 'eu-north1', limit: 5 }, label: 'plain' },
      { args: { region: 'Zürich ', limit: -7 }, label: 'base64 sentinel' },
    ];
    const seen = [];
    for (const { args, label } of cases) {
      const msg = request('tools/call', { name: 'lookup', arguments: args });
      const { md, headers } = metadataFor(msg, { schema });
      const r = await call(client, msg, md);
      seen.push({ label, metadata: Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith('mcp-param-'))), status: r.code });
      const result = expectResult(ck, expectResponse(ck, r, msg, label), label);
      if (result) {
        ck.expect(result.isError !== true, `${label}: isError: true`);
        seen[seen.length - 1].content = result.content;
      }
    }
    // A header that differs from the body: -32020.
    const msg = request('tools/call', { name: 'lookup', arguments: { region: 'eu-north1', limit: 5 } });
    const r = await call(client, msg, metadataFor(msg, { schema, set: { 'mcp-param-region': 'us-east1' } }).md);
    seen.push({ label: 'mismatch', ...trailerError(r) });
    expectTrailerError(ck, r, msg, grpc.status.INVALID_ARGUMENT, -32020, 'mcp-param-region differs');
    ck.set('calls', seen);
  },

  async 'auth-bad'(client, ck) {
    const seen = [];
    for (const [label, auth] of [['no token', false], ['wrong token', 'mcpwire-wrong-token']]) {
      const msg = request('tools/call', { name: 'echo', arguments: { text: 'x' } });
      const r = await call(client, msg, metadataFor(msg, { auth }).md);
      const wa = first(r.metadata, 'www-authenticate');
      seen.push({ label, code: r.code, name: STATUS_NAME[r.code], details: r.details, www_authenticate: wa });
      ck.expect([grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED].includes(r.code),
        `${label}: status ${STATUS_NAME[r.code]} (${r.code}), want UNAUTHENTICATED or PERMISSION_DENIED`);
      ck.expect(typeof wa === 'string' && /^bearer\b/i.test(wa), `${label}: www-authenticate trailer ${JSON.stringify(wa)}`);
      ck.expect(r.messages.length === 0, `${label}: ${r.messages.length} message(s) on the stream`);
    }
    ck.set('calls', seen);
  },

  async 'auth-ok'(client, ck) {
    if (!ck.expect(process.env.MCPWIRE_TOKEN, 'MCPWIRE_TOKEN is not set')) return;
    ck.set('echo', await echoWorks(client, ck, 'echo with the token', 'authorized'));
    ck.expect(ck.obs.echo, 'echo with the token did not answer its text');
  },

  async tls(client, ck, addr) {
    const ca = process.env.MCPWIRE_CA;
    if (!ck.expect(ca, 'MCPWIRE_CA is not set')) return;
    const { host, port } = splitAddr(addr);
    const handshake = (alpn) => new Promise((resolve) => {
      const s = tls.connect({ host, port, servername: 'localhost', ca: fs.readFileSync(ca), ALPNProtocols: alpn });
      const done = (v) => { s.destroy(); resolve(v); };
      s.setTimeout(3000, () => done({ error: 'timeout' }));
      s.on('secureConnect', () => done({ authorized: s.authorized, alpn: s.alpnProtocol, protocol: s.getProtocol() }));
      s.on('error', (e) => done({ error: e.code || e.message }));
    });
    const h2 = await handshake(['h2']);
    ck.set('handshake_h2', h2);
    ck.expect(h2.authorized === true, `TLS handshake: ${JSON.stringify(h2)}`);
    ck.expect(h2.alpn === 'h2', `ALPN ${JSON.stringify(h2.alpn)}, want "h2"`);
    // Only observed: the binding says a server refuses a client that
    // negotiated another protocol.
    ck.set('handshake_http11_only', await handshake(['http/1.1']));
    ck.set('echo', await echoWorks(client, ck, 'echo over TLS', 'over tls'));
    ck.expect(ck.obs.echo, 'echo over TLS did not answer its text');
  },
};

main('client.js', SCENARIOS, (addr, ck) => {
  ck.set('tls', !!process.env.MCPWIRE_CA);
  return makeClient(addr);
});
