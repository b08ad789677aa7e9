-- The ledger's set-based statements read a step's archived events of one type (services/ledger/archive_sql.py):
-- a replay step of tens of thousands of events then reads each type's rows only.
CREATE INDEX event_archive_type_seq ON event_archive (event_type, stream_seq);
