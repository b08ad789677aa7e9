"""The ledger's position, as the ledger announces it and the front ends read it: the Postgres channel it is announced
on, once per applied batch, and the ledger's durable consumer, whose tracking rows hold it. Named here so that the
ledger (the writer) and services/core/infrastructure/position.py (the readers' wait) share them without the ledger
importing the front ends' core."""

POSITION_CHANNEL = "kb_ledger_position"
LEDGER_CONSUMER = "ledger-project"  # the ledger's durable consumer: its tracking rows are its position
