"""A stdio server nobody here wrote the SDK of: the Python `mcp` 2.3 package's MCPServer (both
protocol generations: a process serves whichever its first message speaks), with one tool.

    python mcp_stdio_server.py
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-mcp-stdio")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


if __name__ == "__main__":
    server.run()
