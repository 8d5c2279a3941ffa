// What client.js and device.js share: the grpc-js client class of the
// tunnel service, requests with the 2026-07-28 `_meta`, a raw node:http2
// call (no client timer), the observation record and the scenario runner.
'use strict';

const fs = require('node:fs');
const http2 = require('node:http2');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const PROTOCOL_VERSION = '2026-07-28';
const CALL_PATH = '/mcp.zig.transport.v1.Mcp/Call';
const STATUS_NAME = Object.fromEntries(Object.entries(grpc.status).map(([k, v]) => [v, k]));

const def = loader.loadSync(path.join(__dirname, 'mcp_zig_transport_v1.proto'), { keepCase: true });
const McpClient = grpc.loadPackageDefinition(def).mcp.zig.transport.v1.Mcp;

// `request(method, params, { capabilities, progressToken, id })`: a JSON-RPC
// request from `clientInfo`, with ids 1, 2, … unless `id` is given.
function requests(clientInfo) {
  let nextId = 1;
  return function request(method, params = {}, { capabilities = {}, progressToken, id } = {}) {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
      'io.modelcontextprotocol/clientCapabilities': capabilities,
      'io.modelcontextprotocol/clientInfo': clientInfo,
    };
    if (progressToken !== undefined) meta.progressToken = progressToken;
    return { jsonrpc: '2.0', id: id === undefined ? nextId++ : id, method, params: { ...params, _meta: meta } };
  };
}

// One call over plain node:http2, without a client-side timer: what the
// server does on its own (grpc-js enforces a deadline itself, so a
// DEADLINE_EXCEEDED seen through it does not show the server's part).
// `ca`: a CA file, for TLS with server name "localhost" and ALPN h2.
function rawCall(addr, msg, headers, { giveUpMs = 3000, ca } = {}) {
  return new Promise((resolve) => {
    const session = ca
      ? http2.connect(`https://${addr}`, { ca: fs.readFileSync(ca), servername: 'localhost', ALPNProtocols: ['h2'] })
      : http2.connect(`http://${addr}`);
    const json = Buffer.from(JSON.stringify(msg), 'utf8');
    const len = [];
    for (let n = json.length; ; n >>>= 7) { if (n > 0x7f) len.push((n & 0x7f) | 0x80); else { len.push(n); break; } }
    const body = Buffer.concat([Buffer.from([0x0a]), Buffer.from(len), json]);
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(body.length, 1);
    const started = Date.now();
    const out = { headers: null, trailers: null, rstCode: null, dataBytes: 0, error: null };
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      out.elapsedMs = Date.now() - started;
      const h = { ...(out.headers || {}), ...(out.trailers || {}) };
      out.grpcStatus = h['grpc-status'] === undefined ? null : Number(h['grpc-status']);
      out.grpcMessage = h['grpc-message'];
      session.close();
      resolve(out);
    };
    session.on('error', (e) => { out.error = e.code || e.message; done(); });
    const req = session.request({
      ':method': 'POST', ':path': CALL_PATH, 'content-type': 'application/grpc+proto', te: 'trailers', ...headers,
    });
    const timer = setTimeout(() => { out.error = `no end within ${giveUpMs} ms`; req.close(http2.constants.NGHTTP2_CANCEL); done(); }, giveUpMs);
    req.on('response', (h) => { out.headers = h; });
    req.on('trailers', (t) => { out.trailers = t; });
    req.on('data', (c) => { out.dataBytes += c.length; });
    req.on('error', (e) => { out.error = out.error || e.code || e.message; });
    req.on('close', () => { out.rstCode = req.rstCode; done(); });
    req.end(Buffer.concat([prefix, body]));
  });
}

class Check {
  constructor(scenario) { this.obs = { client: 'grpc-js', scenario }; this.failures = []; }
  expect(cond, reason) { if (!cond) this.failures.push(reason); return !!cond; }
  set(k, v) { this.obs[k] = v; }
}

// `node SCRIPT ADDR SCENARIO`: runs the scenario on the client that
// `makeClient(addr, ck)` returns (within 30 s), prints one JSON line with
// what it observed and exits 0 when its expectations hold, 1 otherwise, 2 on
// a usage error.
async function main(script, scenarios, makeClient) {
  const [addr, scenario] = process.argv.slice(2);
  if (!addr || !scenario || !(scenario in scenarios)) {
    process.stderr.write(`usage: node ${script} HOST:PORT SCENARIO\nscenarios: ${Object.keys(scenarios).join(' ')}\n`);
    process.exit(2);
  }
  const ck = new Check(scenario);
  const client = makeClient(addr, ck);
  const watchdog = setTimeout(() => {
    ck.failures.push('scenario did not finish within 30 s');
    finish(ck, client);
  }, 30000);
  try {
    await scenarios[scenario](client, ck, addr);
  } catch (e) {
    ck.failures.push(`exception: ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`);
  }
  clearTimeout(watchdog);
  finish(ck, client);
}

function finish(ck, client) {
  ck.obs.ok = ck.failures.length === 0;
  if (!ck.obs.ok) ck.obs.reason = ck.failures.join('; ');
  process.stdout.write(`${JSON.stringify(ck.obs)}\n`);
  try { client.close(); } catch { /* closing only */ }
  process.exit(ck.obs.ok ? 0 : 1);
}

module.exports = { PROTOCOL_VERSION, STATUS_NAME, McpClient, requests, rawCall, Check, main };
