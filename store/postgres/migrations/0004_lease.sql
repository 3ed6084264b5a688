-- The lease that makes one replica the leader (lease.go), and the fence
-- every write of a leader passes through.
--
-- One row. Its times are the database's (now()), never a replica's: two
-- machines whose clocks disagree still agree on who holds it. epoch grows
-- by one at each takeover, so a write carrying an older epoch is known to
-- come from a deposed leader.
CREATE TABLE leader_lease (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    holder        text NOT NULL,
    epoch         bigint NOT NULL,
    expires_at    timestamptz NOT NULL,
    advertise_url text NOT NULL
);

INSERT INTO leader_lease (id, holder, epoch, expires_at, advertise_url)
VALUES (true, '', 0, '-infinity', '');

-- appliance_fence runs first in each write transaction of a leader. It
-- locks the lease row FOR SHARE, so a takeover's UPDATE waits for the
-- transaction to end (a plain read would let the takeover commit between
-- the check and this commit, and FOR KEY SHARE does not conflict with an
-- UPDATE that leaves the key alone), then checks the writer still holds
-- the lease at its epoch. A refusal raises SQLSTATE AP001, which the store
-- reports as engine.ErrNotLeader, and aborts the whole transaction.
CREATE FUNCTION appliance_fence(want bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cur  bigint;
    live boolean;
BEGIN
    SELECT epoch, expires_at > now() INTO cur, live FROM leader_lease WHERE id FOR SHARE;
    IF cur IS DISTINCT FROM want OR NOT live THEN
        RAISE EXCEPTION 'not the leader: this replica led at epoch %, the lease is at epoch % (%)',
            want, cur, CASE WHEN live THEN 'held' ELSE 'expired' END
            USING ERRCODE = 'AP001';
    END IF;
END
$$;

-- The job each execute request's Idempotency-Key made (engine.KeyedJobs):
-- a submission retried after a failover answers the job it made. The
-- key goes with its job when retention removes it.
CREATE TABLE job_keys (
    key    text COLLATE "C" PRIMARY KEY,
    job_id text COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE
);
CREATE INDEX job_keys_by_job ON job_keys (job_id);
