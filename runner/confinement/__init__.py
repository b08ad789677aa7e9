"""What confines the processes of a run: sandbox, bubblewrap, limits, seccomp, uids (see runner/__init__.py)."""
