-- The hash chain (lib/chain.h): a digest per message, covering the digest before it,
-- its offset and its bytes, and the stream's digest at its tail (the next append
-- chains on from it without a read). A fork's chain starts from its parent's digest
-- at the fork point. The rows already there get theirs from lib/store/sqlite/sq_db.c
-- (chain_fill) in the transaction that applies this migration, stream by stream in
-- order of id (a parent before its forks): SQLite has no SHA-256 of its own.
ALTER TABLE streams ADD COLUMN digest BLOB NOT NULL DEFAULT x'0000000000000000000000000000000000000000000000000000000000000000';
ALTER TABLE messages ADD COLUMN digest BLOB;
