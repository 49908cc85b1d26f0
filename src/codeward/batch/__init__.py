"""Batch jobs: many tasks, each in a sandbox of its own, with results that survive crashes."""
