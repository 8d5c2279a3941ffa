// The official TypeScript MCP SDK (@modelcontextprotocol/client 2.4.0) as a
// stdio host of `mcpwire bridge`: one row of the bridge matrix
// (scripts/interop-bridge.sh), the same checks as host_py.py through the
// TypeScript API, the client pinned to 2026-07-28.
//
//     node host_ts.mjs ROW PHASE WRAPPER PROFILE-JSON
//     node host_ts.mjs ROW PHASE http PROFILE-JSON
//
// WRAPPER is the executable the SDK launches as its stdio server (it runs
// the bridge; its arguments --bad-token, --timeout, --fault choose a
// variant); with `http` the host is the SDK's Streamable HTTP client of a
// running `mcpwire bridge --listen` (the profile's url, timeout_url,
// token_file, bad_token_file, restart: host_py.py has them). PROFILE-JSON
// says what the server behind the bridge offers (host_py.py has the
// fields). PHASE "ordinary": discover, tools-list,
// read-call, malformed-args, cancel, timeout, unauthorized (when "auth"),
// restart. PHASE "faults": disconnect.
//
// Prints "PASS|FAIL|SKIP ROW CHECK detail" per check; exits 1 when one
// failed.

import { exec, execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';

import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const VERSION = '2026-07-28';
const CHECK_MS = 20_000;

class Failed extends Error {}

function expect(cond, why) {
    if (!cond) throw new Failed(why);
}

const execAsync = promisify(exec);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const texts = (result) => result.content.filter((b) => b.type === 'text').map((b) => b.text);
const show = (v) => JSON.stringify(v);

// within(ms, promise, what): the promise's value, or a Failed after ms.
function within(ms, promise, what) {
    let timer;
    const late = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Failed(`${what}: no end within ${ms / 1000} s`)), ms);
    });
    return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const [row, phase, wrapper, profileJson] = process.argv.slice(2);
if (!profileJson) {
    console.error('usage: node host_ts.mjs ROW PHASE WRAPPER PROFILE-JSON');
    process.exit(2);
}
const p = JSON.parse(profileJson);
const http = wrapper === 'http';
// The HTTP statuses the host got (an HTTP host).
const statuses = [];
let failed = 0;

function transportFor(variant) {
    if (!http) return new StdioClientTransport({ command: wrapper, args: variant, stderr: 'ignore' });
    const url = variant.includes('--timeout') ? p.timeout_url : p.url;
    const headers = {};
    if (!variant.includes('--no-token')) {
        const file = variant.includes('--bad-token') ? p.bad_token_file : p.token_file;
        headers.authorization = `Bearer ${readFileSync(file, 'utf8').trim()}`;
    }
    const recording = async (input, init) => {
        const response = await fetch(input, init);
        statuses.push(response.status);
        return response;
    };
    return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, fetch: recording });
}

function report(status, check, detail = '') {
    if (status === 'FAIL') failed += 1;
    console.log(`${status} ${row} ${check} ${detail}`.trimEnd());
}

// Runs body(client, wire) on a fresh launch of the wrapper; `wire` holds
// the JSON-RPC messages received after the connect.
async function withClient(variant, body) {
    const client = new Client({ name: 'mcpwire-bridge-matrix', version: '0.0.0' }, { versionNegotiation: { mode: { pin: VERSION } } });
    client.onerror = () => {};
    const transport = transportFor(variant);
    await client.connect(transport);
    const wire = [];
    const { onmessage } = transport;
    transport.onmessage = (message, extra) => {
        wire.push(message);
        onmessage?.call(transport, message, extra);
    };
    try {
        return await body(client, wire);
    } finally {
        await client.close();
    }
}

async function readCall(client) {
    const result = await client.callTool({ name: p.tool, arguments: p.args });
    expect(!result.isError, `${p.tool} failed: ${show(result)}`);
    expect(show(texts(result)) === show([p.text]), `${p.tool} returned ${show(texts(result))}`);
}

async function discover() {
    return withClient([], async (client) => {
        const version = client.getNegotiatedProtocolVersion();
        expect(version === VERSION, `negotiated ${show(version)}`);
        expect(client.getServerCapabilities()?.tools !== undefined, 'no tools capability');
        return `${VERSION}, server ${client.getServerVersion()?.name}`;
    });
}

async function toolsList() {
    return withClient([], async (client) => {
        const names = (await client.listTools()).tools.map((t) => t.name);
        for (const want of [p.tool, p.slow]) expect(names.includes(want), `${want} not in ${show(names)}`);
        return names.join(',');
    });
}

async function readCallCheck() {
    return withClient([], async (client) => {
        await readCall(client);
        return `${p.tool} -> ${show(p.text)}`;
    });
}

async function malformedArgs() {
    return withClient([], async (client) => {
        let seen;
        try {
            const result = await client.callTool({ name: p.bad_tool ?? p.tool, arguments: p.bad_args });
            expect(result.isError, `no error: ${show(result)}`);
            seen = 'isError result';
        } catch (e) {
            if (e instanceof Failed) throw e;
            expect(e instanceof ProtocolError, `not a protocol error: ${e}`);
            expect(e.code === -32602, `code ${e.code}: ${e.message}`);
            seen = `JSON-RPC error ${e.code}`;
        }
        await readCall(client);
        return seen;
    });
}

async function cancel() {
    return withClient([], async (client, wire) => {
        const abort = new AbortController();
        let started;
        const progressed = new Promise((resolve) => (started = resolve));
        const call = client
            .callTool({ name: p.slow, arguments: p.slow_args }, { signal: abort.signal, onprogress: () => started() })
            .then(
                (r) => ({ result: r }),
                (e) => ({ error: e }),
            );
        await within(10_000, progressed, 'the slow call sent no progress');
        const before = wire.filter((m) => m.id !== undefined).length;
        abort.abort('the host cancels');
        const outcome = await call;
        expect(outcome.error, `the slow call ended before the cancel: ${show(outcome.result)}`);
        await sleep(1500);
        const late = wire.filter((m) => m.id !== undefined).length - before;
        expect(late === 0, `${late} response(s) came after the cancel`);
        await readCall(client);
        return 'cancelled in flight, no late response, next call answered';
    });
}

async function timeout() {
    return withClient(['--timeout'], async (client) => {
        const start = Date.now();
        let seen;
        try {
            const result = await client.callTool({ name: p.slow, arguments: p.slow_args });
            throw new Failed(`a result, not a timeout: ${show(texts(result))}`);
        } catch (e) {
            if (e instanceof Failed) throw e;
            expect(e instanceof ProtocolError, `not a protocol error: ${e}`);
            seen = `JSON-RPC error ${e.code} after ${((Date.now() - start) / 1000).toFixed(1)} s`;
        }
        expect(Date.now() - start < 8000, `too late: ${seen}`);
        await readCall(client);
        return seen;
    });
}

async function unauthorizedHttp() {
    // No token, then a wrong one: the bridge's host side answers 401.
    const seen = [];
    for (const variant of ['--no-token', '--bad-token']) {
        statuses.length = 0;
        let answered = false;
        try {
            await withClient([variant], async (client) => {
                await client.listTools();
                answered = true;
            });
        } catch {
            // refused: what the statuses say is checked below
        }
        expect(!answered, `${variant}: tools/list answered`);
        expect(statuses.length > 0 && statuses.every((s) => s === 401), `${variant}: HTTP statuses ${show(statuses)}`);
        seen.push(`${variant.slice(2)}: 401`);
    }
    return seen.join(', ');
}

async function unauthorized() {
    if (http) return unauthorizedHttp();
    // The bridge is given a wrong token for the server: the host must see a
    // failure, never a result.
    let listed;
    try {
        listed = await withClient(['--bad-token'], async (client) => {
            try {
                await client.listTools();
            } catch (e) {
                return `tools/list refused: ${e.code ?? ''} ${e.message}`;
            }
            return null;
        });
    } catch (e) {
        return `connect refused: ${e.constructor.name}`;
    }
    expect(listed !== null, 'tools/list answered with a wrong token');
    return listed;
}

async function restart() {
    for (let i = 0; i < 3; i++) {
        // Asynchronously: the event loop must see the old bridge close its
        // connections (a blocked loop would reuse a dead one).
        if (http) await execAsync(p.restart, { shell: '/bin/bash' });
        await withClient([], readCall);
    }
    return http ? '3 restarts of the bridge' : '3 launches';
}

async function disconnect() {
    return withClient(['--fault'], async (client) => {
        let started;
        const progressed = new Promise((resolve) => (started = resolve));
        const call = client.callTool({ name: p.slow, arguments: p.slow_args }, { onprogress: () => started() }).then(
            (r) => ({ result: texts(r) }),
            (e) => ({ error: `${e.code ?? ''} ${e.message}` }),
        );
        await within(10_000, progressed, 'the slow call sent no progress');
        execSync(p.kill, { stdio: 'ignore' });
        const outcome = await within(10_000, call, 'the call in flight after the kill (10 s)');
        expect(outcome.error, `the call in flight got a result: ${show(outcome)}`);
        // The next call is answered (an error or a result), not left hanging.
        const after = await within(
            10_000,
            client.callTool({ name: p.tool, arguments: p.args }).then(
                () => 'next call: a result',
                (e) => `next call: error ${e.code ?? e.message}`,
            ),
            'the next call (10 s)',
        );
        return `in-flight error ${show(outcome.error.slice(0, 80))}; ${after}`;
    });
}

const checks =
    phase === 'ordinary'
        ? [
              ['discover', discover],
              ['tools-list', toolsList],
              ['read-call', readCallCheck],
              ['malformed-args', malformedArgs],
              ['cancel', cancel],
              ['timeout', timeout],
              ['unauthorized', p.auth ? unauthorized : null],
              ['restart', restart],
          ]
        : [['disconnect', disconnect]];

for (const [check, body] of checks) {
    if (!body) {
        report('SKIP', check, p.no_auth ?? 'no auth on this path');
        continue;
    }
    try {
        const detail = await within(CHECK_MS, body(), check);
        report('PASS', check, detail ?? '');
    } catch (e) {
        report('FAIL', check, e instanceof Failed ? e.message : `${e?.constructor?.name}: ${e?.message ?? e}`);
    }
}
process.exit(failed ? 1 : 0);
