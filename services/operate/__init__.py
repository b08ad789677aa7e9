"""Operators' tools: reading and rebuilding from the event log, rejudging, dead letters, exports."""
