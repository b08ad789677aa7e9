"""Facts about this host: system information, NVML, ROCm devices (see runner/__init__.py)."""
