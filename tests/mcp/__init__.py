"""Tests of tools from MCP servers."""
