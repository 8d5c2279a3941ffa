// The official TypeScript MCP SDK server (@modelcontextprotocol/server
// 2.4.0) over Streamable HTTP, as a peer of mcpwire's HTTP client
// (scripts/interop-http-client.sh):
//
//   node ts_server.mjs PORT        # 0: a free port
//
// It serves `POST /mcp` on 127.0.0.1 with the SDK's `createMcpHandler`
// (2026-07-28 per request; 2025-era requests through the SDK's stateless
// legacy leg, its default), mounted on `node:http` by the small adapter
// below: the SDK's own Node adapter is a separate package on Hono, and a
// peer should carry no more than the SDK itself. Once it accepts
// connections it prints "listening on ADDR" on stderr; it serves until
// SIGTERM or SIGINT.
//
// The surface is the one of `mcpwire serve`'s demo, with the same arguments
// and results, so one set of client checks fits every peer: tools `echo`
// (text), `add` (a, b), `progress` (`steps` progress notifications,
// `delay_ms` apart, when the call carries a progress token; then a
// result), the resource `mem://readme` and the prompt `greet` (who).

import http from 'node:http';
import { Readable } from 'node:stream';

import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server';

const README = 'mcpwire: MCP over gRPC, from a microcontroller to a server.\n';

const text = (t) => ({ content: [{ type: 'text', text: t }] });

/** A fresh server per request (the handler's factory), as the SDK wants. */
function makeServer() {
    const server = new McpServer({ name: 'typescript-sdk-server', version: '2.4.0' });
    server.registerTool(
        'echo',
        {
            description: 'Returns its text.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { text: { type: 'string' } },
                required: ['text'],
            }),
        },
        async ({ text: t }) => text(t),
    );
    server.registerTool(
        'add',
        {
            description: 'Adds two integers.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { a: { type: 'integer' }, b: { type: 'integer' } },
                required: ['a', 'b'],
            }),
        },
        async ({ a, b }) => text(String(a + b)),
    );
    server.registerTool(
        'progress',
        {
            description: 'Sends `steps` progress notifications, `delay_ms` apart, then a result.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: {
                    steps: { type: 'integer', minimum: 0 },
                    delay_ms: { type: 'integer', minimum: 0 },
                },
            }),
        },
        async ({ steps = 3, delay_ms = 100 }, ctx) => {
            // Progress goes only to a call that asked for it.
            const token = ctx.mcpReq._meta?.progressToken;
            for (let i = 1; i <= steps; i++) {
                if (delay_ms > 0) await new Promise((r) => setTimeout(r, delay_ms));
                if (token !== undefined) {
                    const message = `step ${i} of ${steps}`;
                    await ctx.mcpReq.notify({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: i, total: steps, message },
                    });
                }
            }
            return text(`done after ${steps} steps`);
        },
    );
    server.registerResource('readme', 'mem://readme', { mimeType: 'text/plain' }, async (uri) => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: README }],
    }));
    server.registerPrompt(
        'greet',
        {
            description: 'Greets someone.',
            argsSchema: fromJsonSchema({
                type: 'object',
                properties: { who: { type: 'string' } },
                required: ['who'],
            }),
        },
        ({ who }) => ({
            messages: [{ role: 'user', content: { type: 'text', text: `Say hello to ${who}.` } }],
        }),
    );
    return server;
}

const handler = createMcpHandler(makeServer, {
    onerror: (e) => console.error(`ts_server: ${e.message}`),
});

/** One `node:http` exchange through the handler's fetch face. */
async function serve(req, res) {
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
    if (url.pathname !== '/mcp') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
    }
    // A client that goes away cancels its exchange.
    const gone = new AbortController();
    res.on('close', () => {
        if (!res.writableFinished) gone.abort();
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
        for (const v of Array.isArray(value) ? value : [value]) if (v !== undefined) headers.append(name, v);
    }
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Readable.toWeb(req);
    const response = await handler.fetch(
        new Request(url, { method: req.method, headers, body, duplex: 'half', signal: gone.signal }),
    );
    res.writeHead(response.status, [...response.headers].flat());
    // The head goes out at once: an SSE client waits for it before any event.
    res.flushHeaders();
    if (response.body) {
        for await (const chunk of response.body) {
            if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
        }
    }
    res.end();
}

const port = Number(process.argv[2] ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error('usage: node ts_server.mjs PORT');
    process.exit(2);
}
const server = http.createServer((req, res) => {
    serve(req, res).catch((e) => {
        console.error(`ts_server: ${e.message}`);
        if (!res.headersSent) res.writeHead(500);
        res.destroy();
    });
});
server.listen(port, '127.0.0.1', () => {
    const { address, port: bound } = server.address();
    console.error(`listening on ${address}:${bound}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
        handler.close().finally(() => process.exit(0));
        // Open SSE streams need not hold the exit up.
        server.closeAllConnections();
    });
}
