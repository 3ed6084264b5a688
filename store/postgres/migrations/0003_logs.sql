-- Job logs, appended in chunks (logs.go). The lines are the JSONL the
-- file backend writes, so an archive or an export reads the same bytes.

-- One row per job that has a log: how many lines it holds, the bytes of
-- their JSONL, and when it was last written (log retention looks here).
CREATE TABLE job_logs (
    job_id     text        PRIMARY KEY,
    lines      bigint      NOT NULL,
    bytes      bigint      NOT NULL,
    written_at timestamptz NOT NULL
);
CREATE INDEX job_logs_written_at ON job_logs (written_at);

-- The lines: one row per run of consecutive lines of one step in one
-- append. line_end is the job's line count after the row and step_end the
-- step's, so `?after=N` (of the job, or of one step) starts at the first
-- row ending past N: a range scan of the key or of the step index.
CREATE TABLE job_log_chunks (
    job_id   text    NOT NULL,
    line_end bigint  NOT NULL,
    step     text    NOT NULL,
    step_end bigint  NOT NULL,
    lines    integer NOT NULL,
    data     bytea   NOT NULL,
    PRIMARY KEY (job_id, line_end)
);
CREATE INDEX job_log_chunks_step ON job_log_chunks (job_id, step, step_end);

-- The open step runs' counts for the step_log limit, written with the
-- lines they count, so the limit holds across a restart or a failover.
CREATE TABLE job_log_runs (
    job_id        text    NOT NULL,
    step          text    NOT NULL,
    bytes         bigint  NOT NULL,
    capped        boolean NOT NULL,
    dropped_bytes bigint  NOT NULL,
    dropped_lines bigint  NOT NULL,
    PRIMARY KEY (job_id, step)
);
