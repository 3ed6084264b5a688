-- Each open step run's mark: the run that pushed numbered lines last and
-- the number of its last line appended, written with the lines, so a push
-- repeated after a restart or a failover appends only the lines the log
-- lacks (store.LogHub.AppendRun).
ALTER TABLE job_log_runs
    ADD COLUMN run text   NOT NULL DEFAULT '',
    ADD COLUMN seq bigint NOT NULL DEFAULT 0;
