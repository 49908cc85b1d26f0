"""The agent lifecycle shared by every sandbox: agents, memory, models, tools, errors."""
