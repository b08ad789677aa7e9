"""Starting the processes of a run: one process, the chain, warm or cold starts (see runner/__init__.py)."""
