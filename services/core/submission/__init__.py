"""The submit use case both front ends translate into: the preliminary admission and the event that records it."""
