-- The hash chain (lib/chain.h, sql/sqlite/017_chain.sql): a digest per message,
-- covering the digest before it, its offset and its bytes, and the stream's digest
-- at its tail (the next append chains on from it, kept with the row the group
-- holds: no read more). The rows already there get theirs here, stream by stream in
-- order of id (a parent before its forks, whose chains start from its digest at
-- the fork point), each message's offset spelled as the server writes it.
ALTER TABLE streams ADD COLUMN digest bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000';
ALTER TABLE messages ADD COLUMN digest bytea;
DO $$
DECLARE
  s record;
  m record;
  d bytea;
  p bigint;
  up bigint;
  fs bigint;
  hops int;
BEGIN
  FOR s IN SELECT id, parent, fork_seq FROM streams ORDER BY id LOOP
    d := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    IF s.parent IS NOT NULL AND s.fork_seq > 0 THEN
      p := s.parent;
      hops := 0;
      LOOP
        SELECT x.parent, x.fork_seq INTO up, fs FROM streams x WHERE x.id = p;
        EXIT WHEN NOT FOUND OR s.fork_seq - 1 >= fs OR up IS NULL OR hops > 64;
        p := up;
        hops := hops + 1;
      END LOOP;
      d := coalesce((SELECT x.digest FROM messages x WHERE x.stream = p AND x.seq = s.fork_seq - 1), d);
    END IF;
    FOR m IN SELECT seq, pos, data FROM messages WHERE stream = s.id ORDER BY seq LOOP
      d := sha256(d || convert_to(lpad(m.seq::text, 16, '0') || '_' || lpad(m.pos::text, 16, '0'), 'UTF8')
                  || m.data);
      UPDATE messages SET digest = d WHERE stream = s.id AND seq = m.seq;
    END LOOP;
    UPDATE streams SET digest = d WHERE id = s.id;
  END LOOP;
END
$$;
