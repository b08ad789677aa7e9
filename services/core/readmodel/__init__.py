"""The read model's SQL, one module per aggregate: what the front ends and operator tools read from the ledger's
tables (and the export log). Each module holds its statements and the small functions that run them; nothing here
renders, decides or publishes."""
