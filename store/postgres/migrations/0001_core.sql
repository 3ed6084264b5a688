-- The engine's records: jobs, steps, workers, their indexes and counts,
-- trigger state and event marks.
--
-- Each record is kept as the JSON bbolt keeps (rec, the bytes of
-- json.Marshal; convert_from(rec, 'UTF8')::jsonb reads it in SQL), beside
-- the columns the indexes and filters need, so a field added to a record
-- later needs no schema change. Times the indexes order by are Unix
-- nanoseconds (bigint): a cursor carries nanoseconds, and a round trip is
-- exact. Text is compared in the "C" collation, byte by byte, as bbolt
-- orders its keys, whatever the database's default collation.

CREATE TABLE jobs (
    id          text COLLATE "C" PRIMARY KEY,
    workspace   text COLLATE "C" NOT NULL,
    task_name   text COLLATE "C" NOT NULL,
    access_path text COLLATE "C" NOT NULL,
    status      text COLLATE "C" NOT NULL,
    source_type text COLLATE "C" NOT NULL,
    created_ns  bigint NOT NULL,
    -- active: not terminal, or terminal with hooks pending (LoadActive).
    active      boolean NOT NULL,
    -- ended_ns: when a job no longer active ended (completed_at, else
    -- created_at); null while active. Retention goes by it.
    ended_ns    bigint,
    rec         bytea NOT NULL
);

-- Newest first from a (created_ns, id) cursor: one index per way a list
-- narrows, each ending in (created_ns, id) so a page is a range scan.
CREATE INDEX jobs_by_time ON jobs (created_ns, id);
CREATE INDEX jobs_by_workspace ON jobs (workspace, created_ns, id);
CREATE INDEX jobs_by_task ON jobs (workspace, task_name, created_ns, id);
CREATE INDEX jobs_by_status ON jobs (status, created_ns, id);
CREATE INDEX jobs_by_source ON jobs (source_type, created_ns, id);
-- What access control judges a job by: the visible groups' ranges.
CREATE INDEX jobs_by_access ON jobs (workspace, access_path, task_name, created_ns, id);
CREATE INDEX jobs_active ON jobs (id) WHERE active;

-- Jobs counted per combination of everything a list filters on: the
-- total of any filter, visibility included, sums a few rows. Statement
-- triggers keep it in step with jobs, in the writing transaction.
CREATE TABLE job_counts (
    workspace   text COLLATE "C" NOT NULL,
    task_name   text COLLATE "C" NOT NULL,
    access_path text COLLATE "C" NOT NULL,
    status      text COLLATE "C" NOT NULL,
    source_type text COLLATE "C" NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (workspace, task_name, access_path, status, source_type)
);

CREATE TABLE steps (
    job_id    text COLLATE "C" NOT NULL,
    seq       integer NOT NULL,
    name      text COLLATE "C" NOT NULL,
    status    text COLLATE "C" NOT NULL,
    -- worker_id and claim_ns (ready_at, else started_at) list a worker's
    -- claims newest first; null when no worker holds the step.
    worker_id text COLLATE "C",
    claim_ns  bigint,
    rec       bytea NOT NULL,
    -- Seq is fixed when the engine creates a step: the key sorts a job's
    -- steps for Steps and a page.
    PRIMARY KEY (job_id, seq, name)
);

CREATE INDEX steps_by_status ON steps (job_id, status, seq, name);
CREATE INDEX steps_by_worker ON steps (worker_id, claim_ns, job_id, name) WHERE worker_id IS NOT NULL;

CREATE TABLE step_counts (
    job_id text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (job_id, status)
);

CREATE TABLE worker_step_counts (
    worker_id text COLLATE "C" PRIMARY KEY,
    n         bigint NOT NULL
);

CREATE TABLE workers (
    id            text COLLATE "C" PRIMARY KEY,
    registered_ns bigint NOT NULL,
    rec           bytea NOT NULL
);

CREATE INDEX workers_by_registration ON workers (registered_ns, id);

-- A scheduler trigger's last fire, RFC 3339 with nanoseconds in UTC (as
-- bbolt keeps it): fire times are compared against cron slots.
CREATE TABLE trigger_fires (
    workspace text COLLATE "C" NOT NULL,
    trigger   text COLLATE "C" NOT NULL,
    fired_at  text NOT NULL,
    PRIMARY KEY (workspace, trigger)
);

-- Event sources' progress (engine.EventStore): the last line accepted
-- from a consumer step's run, and each source's events accepted in all.
CREATE TABLE event_marks (
    job_id text COLLATE "C" NOT NULL,
    step   text COLLATE "C" NOT NULL,
    run    text NOT NULL,
    seq    bigint NOT NULL,
    PRIMARY KEY (job_id, step)
);

CREATE TABLE event_counts (
    source   text COLLATE "C" PRIMARY KEY,
    consumed bigint NOT NULL
);

-- One row health checks overwrite (CheckWrite).
CREATE TABLE health_checks (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    checked_ns bigint NOT NULL
);

-- The counts follow every write of jobs and steps, whoever makes it (a
-- commit, the retention sweep, an import). Statement triggers see all the
-- statement's rows at once (transition tables), so a batch of 10,000
-- steps changes each count once. Counts are updated in key order, so two
-- transactions never wait on each other's counts in a cycle.

CREATE FUNCTION count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_counts AS c (workspace, task_name, access_path, status, source_type, n)
        SELECT workspace, task_name, access_path, status, source_type, count(*)
        FROM new_rows GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (workspace, task_name, access_path, status, source_type) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO job_counts AS c (workspace, task_name, access_path, status, source_type, n)
        SELECT workspace, task_name, access_path, status, source_type, sum(d) FROM (
            SELECT workspace, task_name, access_path, status, source_type, 1 AS d FROM new_rows
            UNION ALL
            SELECT workspace, task_name, access_path, status, source_type, -1 FROM old_rows
        ) x GROUP BY 1, 2, 3, 4, 5 HAVING sum(d) <> 0 ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (workspace, task_name, access_path, status, source_type) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        UPDATE job_counts AS c SET n = c.n - o.k FROM (
            SELECT workspace, task_name, access_path, status, source_type, count(*) AS k
            FROM old_rows GROUP BY 1, 2, 3, 4, 5
        ) o
        WHERE (c.workspace, c.task_name, c.access_path, c.status, c.source_type) =
              (o.workspace, o.task_name, o.access_path, o.status, o.source_type);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_counted_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
CREATE TRIGGER jobs_counted_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();
CREATE TRIGGER jobs_counted_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs();

-- Steps count per job and status (steps_summary), and per worker holding
-- them (a worker's claims). A count that falls to zero is deleted, so a
-- job's counts do not pile up rows for the statuses its steps left.
CREATE FUNCTION count_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO step_counts AS c (job_id, status, n)
        SELECT job_id, status, count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (job_id, status) DO UPDATE SET n = c.n + excluded.n;
        INSERT INTO worker_step_counts AS c (worker_id, n)
        SELECT worker_id, count(*) FROM new_rows WHERE worker_id IS NOT NULL GROUP BY 1 ORDER BY 1
        ON CONFLICT (worker_id) DO UPDATE SET n = c.n + excluded.n;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO step_counts AS c (job_id, status, n)
        SELECT job_id, status, sum(d) FROM (
            SELECT job_id, status, 1 AS d FROM new_rows
            UNION ALL
            SELECT job_id, status, -1 FROM old_rows
        ) x GROUP BY 1, 2 HAVING sum(d) <> 0 ORDER BY 1, 2
        ON CONFLICT (job_id, status) DO UPDATE SET n = c.n + excluded.n;
        INSERT INTO worker_step_counts AS c (worker_id, n)
        SELECT worker_id, sum(d) FROM (
            SELECT worker_id, 1 AS d FROM new_rows WHERE worker_id IS NOT NULL
            UNION ALL
            SELECT worker_id, -1 FROM old_rows WHERE worker_id IS NOT NULL
        ) x GROUP BY 1 HAVING sum(d) <> 0 ORDER BY 1
        ON CONFLICT (worker_id) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        UPDATE step_counts AS c SET n = c.n - o.k
        FROM (SELECT job_id, status, count(*) AS k FROM old_rows GROUP BY 1, 2) o
        WHERE (c.job_id, c.status) = (o.job_id, o.status);
        UPDATE worker_step_counts AS c SET n = c.n - o.k
        FROM (SELECT worker_id, count(*) AS k FROM old_rows WHERE worker_id IS NOT NULL GROUP BY 1) o
        WHERE c.worker_id = o.worker_id;
    END IF;
    DELETE FROM step_counts WHERE (job_id, status) IN (SELECT job_id, status FROM old_rows) AND n <= 0;
    DELETE FROM worker_step_counts WHERE worker_id IN (SELECT worker_id FROM old_rows) AND n <= 0;
    RETURN NULL;
END $$;

CREATE TRIGGER steps_counted_insert AFTER INSERT ON steps
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_steps();
CREATE TRIGGER steps_counted_update AFTER UPDATE ON steps
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_steps();
CREATE TRIGGER steps_counted_delete AFTER DELETE ON steps
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_steps();
