// The official TypeScript MCP SDK (@modelcontextprotocol/client 2.4.0) as a
// client of `mcpwire serve`, over stdio (MCP 2026-07-28 section 6) or
// Streamable HTTP (section 5): the same scenarios as sdk_client.py,
// through the TypeScript API.
//
//     node ts_client.mjs /abs/path/to/mcpwire [scenario...]
//     node ts_client.mjs http://HOST:PORT/mcp [--fixtures URL] [scenario...]
//
// The client is pinned to 2026-07-28 (the SDK's default is the 2025
// `initialize` handshake; a pin makes the connect-time server/discover
// offer exactly that revision or fail). With a binary, every scenario
// launches the server as a child process through the SDK's
// StdioClientTransport: the demo, or for the scenarios named fixture-* the
// conformance fixture set (`serve --stdio --fixtures conformance`). With a
// URL, the scenarios call the running demo there (started with `--tick-ms
// 300`) and the fixture-* ones the server at the `--fixtures` URL, through
// the SDK's StreamableHTTPClientTransport, whose fetch is wrapped to
// record each POST (headers, body, status, media type, whether it was
// aborted): the scenarios also check what travelled. The multi round-trip
// tools are fulfilled through the SDK's elicitation, sampling and roots
// request handlers.
//
// Prints "ok NAME" or "FAILED NAME: why" per scenario, then
// "N passed, N failed"; exits 1 when one failed, 2 on a usage error.

import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const VERSION = '2026-07-28';
// The demo's listen source announces tools/list_changed this often.
const TICK_MS = 300;
// Bound of every scenario.
const SCENARIO_MS = 20_000;

class Failed extends Error {}

function expect(cond, why) {
    if (!cond) throw new Failed(why);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const texts = (result) => result.content.filter((b) => b.type === 'text').map((b) => b.text);
const show = (v) => JSON.stringify(v);

// The transport to the server: a fresh `mcpwire serve --stdio` process of
// `target.binary`, or the server at `target.url` (`target.fixturesUrl` for
// the fixture set) over Streamable HTTP, each POST recorded in `posts` as
// {headers, body, status, media, aborted}.
function transportTo(target, fixtures, posts) {
    if (target.binary) {
        return new StdioClientTransport({
            command: target.binary,
            args: fixtures ? ['serve', '--stdio', '--fixtures', 'conformance'] : ['serve', '--stdio', '--tick-ms', String(TICK_MS)],
            stderr: 'ignore',
        });
    }
    const url = fixtures ? target.fixturesUrl : target.url;
    expect(url, 'no --fixtures URL given');
    const recording = async (input, init = {}) => {
        if ((init.method ?? 'GET') !== 'POST') return fetch(input, init);
        let body;
        try {
            body = JSON.parse(init.body);
        } catch {
            body = undefined;
        }
        const post = { headers: Object.fromEntries(new Headers(init.headers).entries()), body, aborted: false };
        init.signal?.addEventListener('abort', () => (post.aborted = true));
        posts.push(post);
        const response = await fetch(input, init);
        post.status = response.status;
        post.media = (response.headers.get('content-type') ?? '').split(';')[0].trim();
        return response;
    };
    return new StreamableHTTPClientTransport(new URL(url), { fetch: recording });
}

// The last recorded POST of `method` (and tool `name`).
function postOf(posts, method, name) {
    const found = posts.findLast((p) => p.body?.method === method && (name === undefined || p.body?.params?.name === name));
    expect(found, `no POST of ${method} ${name ?? ''} recorded`);
    return found;
}

// Runs body(client, seen) on a fresh server process or HTTP transport.
// `seen.wire` holds the JSON-RPC messages the transport carried after the
// connect, as {dir: 'sent' | 'received', message}: what the SDK's API
// does not show (it drops a response to a call it abandoned without a
// word). `seen.errors` holds what the SDK reported through onerror;
// `seen.posts` the HTTP POSTs (empty over stdio), `seen.http` whether the
// transport is HTTP. A scenario's `options` choose the fixture set
// (`fixtures`), the client's capabilities and a `setup(client)` run
// before the connect.
async function withClient(target, body) {
    const options = body.options ?? {};
    const client = new Client(
        { name: 'mcpwire-ts-client', version: '0.0.0' },
        { versionNegotiation: { mode: { pin: VERSION } }, capabilities: options.capabilities ?? {} },
    );
    const posts = [];
    const transport = transportTo(target, options.fixtures ?? false, posts);
    const errors = [];
    client.onerror = (e) => errors.push(String(e?.message ?? e));
    options.setup?.(client);
    await client.connect(transport);
    const wire = [];
    const { onmessage } = transport;
    transport.onmessage = (message, extra) => {
        wire.push({ dir: 'received', message });
        onmessage?.call(transport, message, extra);
    };
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        wire.push({ dir: 'sent', message });
        return send(message, options);
    };
    try {
        await body(client, { wire, errors, posts, http: !target.binary });
    } finally {
        await client.close();
    }
}

async function discover(client) {
    const version = client.getNegotiatedProtocolVersion();
    expect(version === VERSION, `negotiated ${show(version)}`);
    const info = client.getServerVersion();
    expect(info?.name === 'mcpwire-demo', `server info ${show(info)}`);
    const caps = client.getServerCapabilities();
    expect(caps?.tools !== undefined, `no tools capability in ${show(caps)}`);
}

async function toolsList(client, { posts, http }) {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const want of ['echo', 'progress', 'sleep']) {
        expect(names.includes(want), `${want} not in ${show(names)}`);
    }
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi over stdio' } });
    expect(!result.isError, `echo failed: ${show(result)}`);
    expect(show(texts(result)) === show(['hi over stdio']), `echo returned ${show(texts(result))}`);
    if (http) {
        // The mirrored headers of section 5.4, and a JSON answer.
        const post = postOf(posts, 'tools/call', 'echo');
        expect(post.status === 200 && post.media === 'application/json', `echo: ${post.status} ${post.media}`);
        const got = ['mcp-protocol-version', 'mcp-method', 'mcp-name'].map((h) => post.headers[h]);
        expect(show(got) === show([VERSION, 'tools/call', 'echo']), `echo's headers ${show(got)}`);
    }
}

// The progress notifications on the wire for the call `call`, in order,
// and whether each came before the call's response.
function progressOnWire(wire, call) {
    const token = call.message.params?._meta?.progressToken;
    expect(token !== undefined, `no progressToken in ${show(call.message)}`);
    const answered = wire.findIndex((w) => w.dir === 'received' && w.message.id === call.message.id);
    return wire
        .map((w, i) => ({ ...w, i }))
        .filter((w) => w.dir === 'received' && w.message.method === 'notifications/progress')
        .filter((w) => w.message.params?.progressToken === token)
        .map((w) => ({ ...w.message.params, beforeResponse: answered === -1 || w.i < answered }));
}

async function progress(client, { wire, errors, posts, http }) {
    const seen = [];
    const result = await client.callTool(
        { name: 'progress', arguments: { steps: 3, delay_ms: 100 } },
        { onprogress: (p) => seen.push(p) },
    );
    expect(!result.isError, `progress failed: ${show(result)}`);
    expect(show(texts(result)) === show(['done after 3 steps']), `result ${show(texts(result))}`);
    // What the server sent: every step, before the response.
    const call = wire.find((w) => w.dir === 'sent' && w.message.method === 'tools/call');
    const sent = progressOnWire(wire, call);
    expect(show(sent.map((p) => p.progress)) === '[1,2,3]', `progress notifications on the wire ${show(sent)}`);
    expect(sent.every((p) => p.total === 3 && p.beforeResponse), `totals or order on the wire ${show(sent)}`);
    expect(sent.at(-1).message === 'step 3 of 3', `last message ${show(sent.at(-1).message)}`);
    // What the callback got. SDK 2.4.0 dispatches notifications a microtask
    // late but responses at once: a step that reaches it in the same read
    // as the response finds its handler gone, and the SDK reports it
    // through onerror instead ("unknown token", typescript-sdk issue 2580;
    // about every other run here). Only those last steps may be missing,
    // each with that report; the 100 ms between steps keeps the first.
    const values = seen.map((p) => p.progress);
    expect(values.length >= 1, `the callback got no progress; SDK errors ${show(errors)}`);
    expect(show(values) === show([1, 2, 3].slice(0, values.length)), `the callback got ${show(seen)}`);
    expect(seen.every((p, i) => p.total === 3 && p.message === `step ${i + 1} of 3`), `the callback got ${show(seen)}`);
    const dropped = errors.filter((e) => e.includes('progress notification for an unknown token'));
    expect(dropped.length === 3 - values.length, `the callback got ${show(values)}; SDK errors ${show(errors)}`);
    if (dropped.length) {
        const n = dropped.length;
        console.error(`note: progress: the SDK dropped ${n} step(s) that came with the response (typescript-sdk#2580)`);
    }
    if (http) {
        // A progress token makes the answer an event stream (section 5.2).
        const post = postOf(posts, 'tools/call', 'progress');
        expect(post.status === 200 && post.media === 'text/event-stream', `progress call: ${post.status} ${post.media}`);
    }
}

async function cancel(client, { wire, posts, http }) {
    // Aborting the call makes the SDK cancel it: over stdio with
    // notifications/cancelled, over HTTP by closing the request (section
    // 5.7; the SDK may post the notification too, answered 202). The
    // server must stop the handler and never answer it.
    const start = Date.now();
    const abort = new AbortController();
    setTimeout(() => abort.abort('the test cancels'), 300);
    let outcome;
    try {
        outcome = await client.callTool({ name: 'sleep', arguments: { ms: 800 } }, { signal: abort.signal });
    } catch (e) {
        outcome = e;
    }
    expect(outcome instanceof Error, `the sleep call ended before the cancel: ${show(outcome)}`);
    expect(Date.now() - start < 700, `the aborted call returned after ${Date.now() - start} ms`);
    const call = wire.find((w) => w.dir === 'sent' && w.message.method === 'tools/call');
    expect(call !== undefined, 'no tools/call on the wire');
    const id = call.message.id;
    if (http) {
        const post = postOf(posts, 'tools/call', 'sleep');
        expect(post.aborted, `the request was not closed: ${show(post)}`);
        // A notification the SDK posted as it aborted is answered on its
        // own time: wait (up to 10 s) for its status before reading it.
        const cancels = () => posts.filter((p) => p.body?.method === 'notifications/cancelled');
        for (let i = 0; i < 100 && cancels().some((p) => p.status === undefined); i++) await sleep(100);
        const notes = cancels();
        expect(notes.every((p) => p.status === 202), `notifications/cancelled answered ${show(notes.map((p) => p.status))}`);
    } else {
        const cancelled = wire.filter((w) => w.dir === 'sent' && w.message.method === 'notifications/cancelled');
        expect(
            cancelled.some((w) => w.message.params?.requestId === id),
            `no notifications/cancelled for id ${show(id)}: ${show(cancelled)}`,
        );
    }
    // Past the moment the handler would have answered.
    await sleep(1200);
    const late = wire.filter((w) => w.dir === 'received' && w.message.id === id);
    expect(late.length === 0, `a response came after the cancel: ${show(late)}`);
    const result = await client.callTool({ name: 'echo', arguments: { text: 'after' } });
    expect(!result.isError && texts(result)[0] === 'after', `echo after the cancel: ${show(result)}`);
    expect(Date.now() - start < 5000, 'too slow');
}

// A call that must fail: the JSON-RPC error the SDK throws, or an isError
// result (then `error` is undefined).
async function failing(client, params) {
    try {
        return { result: await client.callTool(params) };
    } catch (e) {
        return { error: e };
    }
}

async function toolError(client, { posts, http }) {
    // echo's handler refuses a text that is not a string: a JSON-RPC error
    // (invalid params) from the tool, not from the SDK (its message says so).
    const bad = await failing(client, { name: 'echo', arguments: { text: 5 } });
    if (bad.error) {
        expect(bad.error instanceof ProtocolError, `not a protocol error: ${bad.error}`);
        expect(bad.error.code === -32602, `code ${bad.error.code}: ${bad.error.message}`);
        expect(bad.error.message.includes('text must be a string'), `message ${bad.error.message}`);
    } else {
        expect(bad.result.isError, `no error: ${show(bad.result)}`);
    }
    // An unknown tool: the engine's own error.
    const unknown = await failing(client, { name: 'no-such-tool', arguments: {} });
    if (unknown.error) {
        const { code, message } = unknown.error;
        expect(unknown.error instanceof ProtocolError, `unknown tool: not a protocol error: ${unknown.error}`);
        expect([-32602, -32601].includes(code), `unknown tool: code ${code}: ${message}`);
    } else {
        expect(unknown.result.isError, `unknown tool answered: ${show(unknown.result)}`);
    }
    const result = await client.callTool({ name: 'echo', arguments: { text: 'still here' } });
    expect(!result.isError, 'echo after the errors failed');
    if (http) {
        // Errors of a dispatched call travel in-band: HTTP 200 (section 5.3).
        const post = postOf(posts, 'tools/call', 'no-such-tool');
        expect(post.status === 200, `unknown tool: HTTP ${post.status}`);
    }
}

async function listen(client, { posts, http }) {
    // subscriptions/listen delivers its events to the notification handlers.
    const events = [];
    let twoEvents;
    const gotTwo = new Promise((resolve) => (twoEvents = resolve));
    client.setNotificationHandler('notifications/tools/list_changed', (n) => {
        events.push(n);
        if (events.length === 2) twoEvents();
    });
    const sub = await client.listen({ toolsListChanged: true });
    expect(sub.honoredFilter.toolsListChanged === true, `honored ${show(sub.honoredFilter)}`);
    const bound = 5 * TICK_MS + 2000;
    const timer = sleep(bound).then(() => 'timeout');
    const got = await Promise.race([gotTwo.then(() => 'events'), timer]);
    expect(got === 'events', `${events.length} tools/list_changed events in ${bound} ms`);
    await sub.close();
    expect((await sub.closed) === 'local', 'the subscription did not end by its close');
    // The listen was cancelled; the channel goes on.
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names.includes('echo'), 'tools/list after the listen failed');
    if (http) {
        const post = postOf(posts, 'subscriptions/listen');
        expect(post.status === 200 && post.media === 'text/event-stream', `listen: ${post.status} ${post.media}`);
    }
}

// What the client's user and model answer, and what was asked: the
// handlers the SDK fulfils input_required results with.
const asked = [];
function answerInput(client) {
    asked.length = 0;
    const values = { name: 'Alice', color: 'blue', ok: true, context: 'tests' };
    client.setRequestHandler('elicitation/create', async (request) => {
        asked.push(['elicitation', request.params.message]);
        const fields = Object.keys(request.params.requestedSchema?.properties ?? {});
        return { action: 'accept', content: Object.fromEntries(fields.map((f) => [f, values[f] ?? 'x'])) };
    });
    client.setRequestHandler('sampling/createMessage', async (request) => {
        asked.push(['sampling', request.params.messages[0]?.content?.text]);
        return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model', stopReason: 'endTurn' };
    });
    client.setRequestHandler('roots/list', async () => {
        asked.push(['roots']);
        return { roots: [{ uri: 'file:///work/project', name: 'project' }] };
    });
}

async function fixtureMrtr(client, { wire }) {
    const result = await client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} });
    expect(show(texts(result)) === show(["Alice's favorite color is blue."]), `multi-round: ${show(result)}`);
    expect(
        show(asked) === show([['elicitation', 'Step 1: What is your name?'], ['elicitation', 'Step 2: What is your favorite color?']]),
        `asked ${show(asked)}`,
    );
    // Each round was a new request that echoed the state of the one before.
    const calls = wire.filter((w) => w.dir === 'sent' && w.message.method === 'tools/call');
    const states = calls.map((w) => w.message.params.requestState);
    expect(calls.length === 3 && states[0] === undefined && states[1] && states[2] && states[1] !== states[2], `rounds ${show(states)}`);
    expect(new Set(calls.map((w) => w.message.id)).size === 3, 'a round reused a request id');
    asked.length = 0;
    const multiple = await client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} });
    expect(!multiple.isError && texts(multiple)[0].includes('file:///work/project'), `multiple inputs: ${show(multiple)}`);
    expect(show(asked.map((a) => a[0]).sort()) === show(['elicitation', 'roots', 'sampling']), `asked ${show(asked)}`);
    const prompt = await client.getPrompt({ name: 'test_input_required_result_prompt' });
    expect(prompt.messages[0]?.content?.text === 'Use this context: tests', `prompt: ${show(prompt)}`);
}
fixtureMrtr.options = {
    fixtures: true,
    capabilities: { elicitation: {}, sampling: {}, roots: {} },
    setup: answerInput,
};

async function fixtureErrors(client, { posts, http }) {
    // The client declares no sampling: -32021 naming it, as an object.
    const missing = await failing(client, { name: 'test_missing_capability', arguments: {} });
    expect(missing.error instanceof ProtocolError, `test_missing_capability: ${show(missing.result ?? String(missing.error))}`);
    expect(missing.error.code === -32021, `code ${missing.error.code}: ${missing.error.message}`);
    expect(show(missing.error.data?.requiredCapabilities) === show({ sampling: {} }), `data ${show(missing.error.data)}`);
    // A tool's own failure: a result with isError.
    const failed = await client.callTool({ name: 'test_error_handling', arguments: {} });
    expect(failed.isError === true, `test_error_handling: ${show(failed)}`);
    let read;
    try {
        read = await client.readResource({ uri: 'test://nonexistent-resource-for-conformance-testing' });
    } catch (e) {
        read = e;
    }
    expect(read instanceof ProtocolError && read.code === -32602, `missing resource: ${show(read?.message ?? read)}`);
    if (http) {
        // -32021 is refused before dispatch: HTTP 400 (section 3.3).
        const post = postOf(posts, 'tools/call', 'test_missing_capability');
        expect(post.status === 400, `-32021: HTTP ${post.status}`);
    }
}
fixtureErrors.options = { fixtures: true };

async function fixtureListen(client) {
    let changed;
    const gotEvent = new Promise((resolve) => (changed = resolve));
    client.setNotificationHandler('notifications/tools/list_changed', (n) => changed(n));
    const sub = await client.listen({ toolsListChanged: true });
    expect(sub.honoredFilter.toolsListChanged === true, `honored ${show(sub.honoredFilter)}`);
    await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    const got = await Promise.race([gotEvent, sleep(5000).then(() => 'timeout')]);
    expect(got !== 'timeout', 'no tools/list_changed after test_trigger_tool_change');
    await sub.close();
}
fixtureListen.options = { fixtures: true };

const SCENARIOS = {
    discover,
    'tools-list': toolsList,
    progress,
    cancel,
    'tool-error': toolError,
    listen,
    'fixture-mrtr': fixtureMrtr,
    'fixture-errors': fixtureErrors,
    'fixture-listen': fixtureListen,
};

async function run(name, target) {
    let timer;
    const bound = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Failed(`no end within ${SCENARIO_MS} ms`)), SCENARIO_MS);
    });
    try {
        await Promise.race([withClient(target, SCENARIOS[name]), bound]);
    } finally {
        clearTimeout(timer);
    }
}

async function main() {
    let [first, ...args] = process.argv.slice(2);
    let target;
    if (first?.startsWith('/')) {
        target = { binary: first };
    } else if (/^https?:\/\//.test(first ?? '')) {
        target = { url: first };
        if (args[0] === '--fixtures' && args.length > 1) {
            target.fixturesUrl = args[1];
            args = args.slice(2);
        }
    } else {
        console.error('usage: node ts_client.mjs /abs/path/to/mcpwire | http://HOST:PORT/mcp [--fixtures URL] [scenario...]');
        process.exit(2);
    }
    const names = args.length ? args : Object.keys(SCENARIOS);
    const unknown = names.filter((n) => !(n in SCENARIOS));
    if (unknown.length) {
        console.error(`unknown scenario ${show(unknown)}; scenarios: ${Object.keys(SCENARIOS).join(' ')}`);
        process.exit(2);
    }
    let passed = 0;
    let failed = 0;
    for (const name of names) {
        try {
            await run(name, target);
            console.log(`ok ${name}`);
            passed += 1;
        } catch (e) {
            // Every failure is reported, the next scenario runs.
            const why = e instanceof Failed ? e.message : `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
            console.log(`FAILED ${name}: ${why}`);
            failed += 1;
        }
    }
    console.log(`${passed} passed, ${failed} failed`);
    // A server process a failed scenario left behind must not keep us alive.
    process.exit(failed ? 1 : 0);
}

await main();
