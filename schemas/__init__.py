"""The platform's shared vocabulary: events, streams and the task/run contracts. Pydantic only, no I/O."""
