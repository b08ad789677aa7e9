"""Ranking rules shared by the services that rank: what is eligible and what is best (docs/quickstart.md)."""
