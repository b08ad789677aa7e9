"""The admission rules every front end and the dispatcher judge a submission by (docs/http-api.md "Submitting")."""
