#!/usr/bin/env node
// grpc-js against the device application (mcpwire-device-tools served by
// mcpwire-embassy, e.g. its host run on a TAP device): the tunnel binding
// with the device's tools read_sensor, toggle_output and slow_task.
//
//   node device.js ADDR SCENARIO
//
// Prints one JSON line with what it observed; exit 0 when the scenario's
// expectations hold, 1 otherwise ("reason" says why), 2 on a usage error.
// Scenarios: discover, tools-list, read-sensor, toggle, progress, cancel,
// deadline, concurrent, listen-cancel; auth-missing, auth-wrong, auth-ok
// against a device that requires a bearer token. The environment's
// DEVICE_TOKEN, when set, is sent with every call as that token (the
// device app requires one unless it runs with --no-auth), but by
// auth-missing and auth-wrong.
//
// Every request carries the 2026-07-28 `_meta` and the mirrored metadata
// (mcp-protocol-version, mcp-method, mcp-name); every call has a deadline
// (10 s) unless the scenario sets its own.
'use strict';

const grpc = require('@grpc/grpc-js');
const { PROTOCOL_VERSION, STATUS_NAME, McpClient, requests, rawCall, main } = require('./common');

const DEVICE_TOOLS = ['read_sensor', 'toggle_output', 'slow_task'];
const CLIENT_INFO = { name: 'mcpwire-device-grpc-js', version: '0.1.0' };

const request = requests(CLIENT_INFO);

// The `authorization` sent with every call, when set.
let authorization = process.env.DEVICE_TOKEN ? `Bearer ${process.env.DEVICE_TOKEN}` : null;

function headersFor(msg) {
  const h = { 'mcp-protocol-version': PROTOCOL_VERSION, 'mcp-method': msg.method };
  if (msg.method === 'tools/call') h['mcp-name'] = msg.params.name;
  if (authorization !== null) h.authorization = authorization;
  return h;
}

function metadataFor(msg) {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(headersFor(msg))) md.set(k, v);
  return md;
}

function tool(name, args, opts) {
  return request('tools/call', { name, arguments: args }, opts);
}

// One call: resolves with its messages and final status. `onMessage(m, c)`
// sees each message as it arrives. `deadlineMs: null`: no deadline (a
// listen).
function call(client, msg, { deadlineMs = 10000, onMessage } = {}) {
  return new Promise((resolve) => {
    const started = Date.now();
    const c = client.Call({ jsonrpc: Buffer.from(JSON.stringify(msg), 'utf8') }, metadataFor(msg),
      deadlineMs === null ? {} : { deadline: Date.now() + deadlineMs });
    const messages = [];
    c.on('data', (m) => {
      let obj;
      try { obj = JSON.parse(Buffer.from(m.jsonrpc).toString('utf8')); } catch { obj = { unparsable: true }; }
      messages.push(obj);
      if (onMessage) onMessage(obj, c);
    });
    c.on('error', () => {}); // the status event carries it
    c.on('status', (s) => resolve({
      messages, code: s.code, details: s.details, elapsedMs: Date.now() - started,
      challenge: s.metadata ? s.metadata.get('www-authenticate')[0] : undefined,
    }));
  });
}

// The one response of a call that ended OK, after notifications only.
function responseOf(ck, r, msg, label) {
  if (!ck.expect(r.code === grpc.status.OK, `${label}: status ${STATUS_NAME[r.code]} "${r.details}"`)) return null;
  const responses = r.messages.filter((m) => 'result' in m || 'error' in m);
  if (!ck.expect(responses.length === 1, `${label}: ${responses.length} responses`)) return null;
  const res = responses[0];
  ck.expect(r.messages[r.messages.length - 1] === res, `${label}: the response is not the last message`);
  ck.expect(res.id === msg.id, `${label}: id ${JSON.stringify(res.id)} != ${msg.id}`);
  if (!ck.expect(res.result && typeof res.result === 'object', `${label}: ${JSON.stringify(res.error)}`)) return null;
  return res.result;
}

const textOf = (result) => (result && Array.isArray(result.content) && result.content[0] ? result.content[0].text : undefined);

async function slowTaskCompletes(client, ck, label) {
  const msg = tool('slow_task', { steps: 2, delay_ms: 10 });
  const result = responseOf(ck, await call(client, msg), msg, label);
  return ck.expect(textOf(result) === 'done after 2 steps', `${label}: ${JSON.stringify(result)}`);
}

const SCENARIOS = {
  async discover(client, ck) {
    const msg = request('server/discover');
    const result = responseOf(ck, await call(client, msg), msg, 'server/discover');
    if (!result) return;
    const info = result._meta && result._meta['io.modelcontextprotocol/serverInfo'];
    ck.set('serverInfo', info);
    ck.set('capabilities', result.capabilities);
    ck.expect(result.resultType === 'complete', `resultType ${result.resultType}`);
    ck.expect(Array.isArray(result.supportedVersions) && result.supportedVersions.includes(PROTOCOL_VERSION),
      `supportedVersions ${JSON.stringify(result.supportedVersions)}`);
    ck.expect(info && info.name === 'mcpwire-device', `serverInfo ${JSON.stringify(info)}`);
    ck.expect(result.capabilities && result.capabilities.tools, 'no tools capability');
  },

  async 'tools-list'(client, ck) {
    const msg = request('tools/list');
    const result = responseOf(ck, await call(client, msg), msg, 'tools/list');
    if (!result) return;
    const names = (result.tools || []).map((t) => t.name);
    ck.set('tools', names);
    ck.expect(JSON.stringify(names) === JSON.stringify(DEVICE_TOOLS), `tools ${JSON.stringify(names)}`);
    for (const t of result.tools || []) {
      ck.expect(t.inputSchema && t.inputSchema.type === 'object', `${t.name}: inputSchema.type`);
      ck.expect(typeof t.description === 'string' && t.description.length > 0, `${t.name}: description`);
    }
  },

  async 'read-sensor'(client, ck) {
    const msg = tool('read_sensor', {});
    const result = responseOf(ck, await call(client, msg), msg, 'read_sensor');
    if (!result) return;
    ck.set('text', textOf(result));
    ck.set('structuredContent', result.structuredContent);
    ck.expect(/^temperature -?\d+\.\d{3} °C$/.test(textOf(result) || ''), `text ${JSON.stringify(textOf(result))}`);
    ck.expect(result.structuredContent && Number.isInteger(result.structuredContent.millicelsius),
      `structuredContent ${JSON.stringify(result.structuredContent)}`);
  },

  async toggle(client, ck) {
    const m1 = tool('toggle_output', { on: true });
    const r1 = responseOf(ck, await call(client, m1), m1, 'on');
    const m2 = tool('toggle_output', {});
    const r2 = responseOf(ck, await call(client, m2), m2, 'toggle');
    const m3 = tool('toggle_output', { on: 'yes' });
    const r3 = await call(client, m3);
    ck.set('states', [r1 && r1.structuredContent, r2 && r2.structuredContent]);
    ck.expect(r1 && r1.structuredContent && r1.structuredContent.on === true, `on: ${JSON.stringify(r1)}`);
    ck.expect(r2 && r2.structuredContent && r2.structuredContent.on === false, `toggle: ${JSON.stringify(r2)}`);
    const e3 = r3.messages.length === 1 ? r3.messages[0].error : undefined;
    ck.set('bad_argument', e3);
    ck.expect(r3.code === grpc.status.OK && e3 && e3.code === -32602,
      `on: "yes" should be -32602 in band: ${STATUS_NAME[r3.code]} ${JSON.stringify(r3.messages)}`);
  },

  async progress(client, ck) {
    const steps = 4;
    const token = `dev-js-${process.pid}`;
    const msg = tool('slow_task', { steps, delay_ms: 50 }, { progressToken: token });
    const r = await call(client, msg);
    const result = responseOf(ck, r, msg, 'slow_task');
    const notes = r.messages.filter((m) => m.method === 'notifications/progress');
    ck.set('progress', notes.map((n) => [n.params.progress, n.params.total, n.params.message]));
    ck.set('elapsed_ms', r.elapsedMs);
    ck.expect(notes.length === steps, `${notes.length} progress notifications, want ${steps}`);
    notes.forEach((n, i) => {
      ck.expect(n.params.progressToken === token, `token ${JSON.stringify(n.params.progressToken)}`);
      ck.expect(n.params.progress === i + 1 && n.params.total === steps, `progress ${n.params.progress}/${n.params.total}`);
    });
    ck.expect(textOf(result) === `done after ${steps} steps`, `result ${JSON.stringify(result)}`);
  },

  async cancel(client, ck) {
    // More cancelled calls than the device has handlers: a handler that did
    // not stop would keep its slot, and the last call would be refused.
    const rounds = [];
    for (let i = 0; i < 4; i++) {
      const msg = tool('slow_task', { steps: 100, delay_ms: 100 }, { progressToken: `c${i}` });
      const r = await call(client, msg, { onMessage: (m, c) => { if (m.method === 'notifications/progress') c.cancel(); } });
      rounds.push({ status: STATUS_NAME[r.code], elapsed_ms: r.elapsedMs, messages: r.messages.length });
      ck.expect(r.code === grpc.status.CANCELLED, `round ${i}: status ${STATUS_NAME[r.code]}`);
      ck.expect(r.elapsedMs < 2000, `round ${i}: ended after ${r.elapsedMs} ms`);
    }
    ck.set('rounds', rounds);
    ck.set('then_completes', await slowTaskCompletes(client, ck, 'after the cancels'));
  },

  async deadline(client, ck, addr) {
    const msg = tool('slow_task', { steps: 20, delay_ms: 100 });
    const r = await call(client, msg, { deadlineMs: 300 });
    ck.set('client_deadline', { status: STATUS_NAME[r.code], elapsed_ms: r.elapsedMs });
    ck.expect(r.code === grpc.status.DEADLINE_EXCEEDED, `status ${STATUS_NAME[r.code]}`);
    // The device's own part: grpc-timeout 300m and no client timer, more
    // times than it has handlers.
    const server = [];
    for (let i = 0; i < 4; i++) {
      const m = tool('slow_task', { steps: 20, delay_ms: 100 });
      const raw = await rawCall(addr, m, { ...headersFor(m), 'grpc-timeout': '300m' });
      server.push({ grpc_status: raw.grpcStatus, elapsed_ms: raw.elapsedMs, data_bytes: raw.dataBytes, error: raw.error });
      ck.expect(raw.grpcStatus === grpc.status.DEADLINE_EXCEEDED,
        `server side ${i}: grpc-status ${raw.grpcStatus}${raw.error ? ` (${raw.error})` : ''}`);
      ck.expect(raw.elapsedMs < 1500, `server side ${i}: ended after ${raw.elapsedMs} ms`);
    }
    ck.set('server_side', server);
    ck.set('then_completes', await slowTaskCompletes(client, ck, 'after the deadlines'));
  },

  async concurrent(client, ck) {
    // Three slow tasks at once on one connection, with progress each.
    const calls = [0, 1, 2].map((i) => {
      const msg = tool('slow_task', { steps: 3, delay_ms: 100 }, { progressToken: `k${i}` });
      return call(client, msg).then((r) => ({ msg, r }));
    });
    const started = Date.now();
    const done = await Promise.all(calls);
    const elapsed = Date.now() - started;
    ck.set('elapsed_ms', elapsed);
    for (const { msg, r } of done) {
      const result = responseOf(ck, r, msg, `call ${msg.id}`);
      const notes = r.messages.filter((m) => m.method === 'notifications/progress');
      ck.expect(notes.length === 3 && notes.every((n) => n.params.progressToken === msg.params._meta.progressToken),
        `call ${msg.id}: progress ${JSON.stringify(notes)}`);
      ck.expect(textOf(result) === 'done after 3 steps', `call ${msg.id}: ${JSON.stringify(result)}`);
    }
    ck.expect(elapsed < 900, `three 300 ms tasks took ${elapsed} ms: not concurrent`);
  },
};

// A refused call: UNAUTHENTICATED, the core's message and RFC 6750
// challenge, no message.
function refused(ck, r, details, challenge) {
  ck.set('refusal', { status: STATUS_NAME[r.code], details: r.details, challenge: r.challenge });
  ck.expect(r.code === grpc.status.UNAUTHENTICATED, `status ${STATUS_NAME[r.code]} "${r.details}"`);
  ck.expect(r.details === details, `grpc-message "${r.details}", want "${details}"`);
  ck.expect(r.challenge === challenge, `www-authenticate ${JSON.stringify(r.challenge)}, want ${JSON.stringify(challenge)}`);
  ck.expect(r.messages.length === 0, `messages on a refused call: ${JSON.stringify(r.messages)}`);
}

function deviceToken(ck) {
  const token = process.env.DEVICE_TOKEN;
  ck.expect(!!token, 'DEVICE_TOKEN is not set');
  return token || '';
}

Object.assign(SCENARIOS, {
  async 'listen-cancel'(client, ck) {
    // More listen streams, one after the other, each cancelled once
    // acknowledged, than one connection has calls: a cancelled stream that
    // kept its call would leave none for the last.
    const rounds = [];
    for (let i = 0; i < 6; i++) {
      const msg = request('subscriptions/listen', { notifications: { toolsListChanged: true } }, { id: `listen-${i}` });
      const r = await call(client, msg, {
        deadlineMs: null,
        onMessage: (m, c) => { if (m.method === 'notifications/subscriptions/acknowledged') c.cancel(); },
      });
      const ack = r.messages[0];
      rounds.push({ status: STATUS_NAME[r.code], messages: r.messages.length });
      ck.expect(r.code === grpc.status.CANCELLED, `round ${i}: status ${STATUS_NAME[r.code]} "${r.details}"`);
      ck.expect(ack && ack.params && ack.params._meta
        && ack.params._meta['io.modelcontextprotocol/subscriptionId'] === `listen-${i}`,
      `round ${i}: no acknowledgement: ${JSON.stringify(r.messages)}`);
    }
    ck.set('rounds', rounds);
    ck.set('then_completes', await slowTaskCompletes(client, ck, 'after the listens'));
  },

  async 'auth-missing'(client, ck) {
    deviceToken(ck);
    authorization = null;
    const r = await call(client, request('tools/list'));
    refused(ck, r, 'missing bearer token', 'Bearer realm="mcpwire"');
  },

  async 'auth-wrong'(client, ck) {
    authorization = `Bearer not-${deviceToken(ck)}`;
    const r = await call(client, request('tools/list'));
    refused(ck, r, 'invalid bearer token', 'Bearer realm="mcpwire", error="invalid_token"');
  },

  async 'auth-ok'(client, ck) {
    authorization = `Bearer ${deviceToken(ck)}`;
    const msg = request('tools/list');
    const result = responseOf(ck, await call(client, msg), msg, 'tools/list with the token');
    ck.expect(result && Array.isArray(result.tools) && result.tools.length === DEVICE_TOOLS.length,
      `tools ${JSON.stringify(result)}`);
  },
});

main('device.js', SCENARIOS, (addr) => new McpClient(addr, grpc.credentials.createInsecure()));
