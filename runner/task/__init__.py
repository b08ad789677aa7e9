"""What a run is: task files, payloads, the harness protocol, toolchain manifests (see runner/__init__.py)."""
