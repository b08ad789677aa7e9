"""The admission rules every front end and the dispatcher judge a submission by (http-api.md §6)."""
