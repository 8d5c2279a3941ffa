"""A stdio MCP server written with the official Python SDK, for mcpwire's
stdio client (scripts/interop-stdio.sh, the client block): the same
script runs on mcp 2.3.0 (MCPServer, MCP 2026-07-28) and on mcp 1.x
(FastMCP, the 2025-11-25 lifecycle).

Tools: echo(text), add(a, b), count(steps) (a progress notification per
step, then a result), fail() (a tool error).
"""
try:
    from mcp.server.mcpserver import Context, MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import Context, FastMCP as Server

server = Server("sdk-stdio-server")


@server.tool()
def echo(text: str) -> str:
    """Returns its text."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Reports `steps` progress notifications, then a result."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted {steps}"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


if __name__ == "__main__":
    server.run("stdio")
