"""What the front ends share to run: settings read by more than one, and the read-your-own-write wait on the
ledger's position."""
