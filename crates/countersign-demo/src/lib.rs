//! The built-in demo/test MCP Tasks server (work in progress).
