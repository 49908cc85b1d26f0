"""codeward: agents that act by writing Python, run in the sandbox of your choice."""

__version__ = "0.1.0"
