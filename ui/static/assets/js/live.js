// Follows GET /api/events (Server-Sent Events: jobs created and changing
// status; with ?job_id=, one job and its steps) and keeps job tables
// current in place, instead of polling.
import { tokens } from './api.js';
import { jobRow } from './format.js';

// eventsURL carries the token in the query: an EventSource cannot set
// headers. jobID follows that job only.
function eventsURL(jobID) {
  const q = new URLSearchParams();
  if (jobID) q.set('job_id', jobID);
  if (tokens.access) q.set('token', tokens.access);
  const query = q.toString();
  return `/api/events${query ? `?${query}` : ''}`;
}

// followJobs calls onJob with each job event until signal aborts, and
// onResync when events may have been missed (the server dropped this
// client for reading too slowly, or the connection was lost and is back):
// the caller then reloads its list. A lost connection is reopened with
// the current token, after a growing pause. With jobID it follows that
// job only, and onStep gets each of its step events.
export function followJobs(signal, { onJob, onStep = () => {}, onResync, onReady = () => {}, jobID = '' }) {
  let source = null;
  let timer = null;
  let pause = 1000;
  let dropped = false;
  const open = () => {
    if (signal.aborted) return;
    source = new EventSource(eventsURL(jobID));
    source.addEventListener('ready', () => {
      onReady();
      pause = 1000;
      if (dropped) {
        dropped = false;
        onResync();
      }
    });
    source.addEventListener('job', (e) => {
      try {
        onJob(JSON.parse(e.data));
      } catch {
        onResync();
      }
    });
    source.addEventListener('step', (e) => {
      try {
        onStep(JSON.parse(e.data));
      } catch {
        onResync();
      }
    });
    source.addEventListener('resync', () => onResync());
    // The server ended the stream for good: the login or key is gone (the
    // next request signs in again), or the followed job is no longer
    // visible to you. Reopening would only be refused.
    source.addEventListener('revoked', () => {
      clearTimeout(timer);
      source.close();
    });
    source.addEventListener('error', () => {
      // The browser retries by itself, with the old token; a retry of
      // ours takes the renewed one.
      dropped = true;
      source.close();
      clearTimeout(timer);
      timer = setTimeout(open, pause);
      pause = Math.min(pause * 2, 30000);
    });
  };
  open();
  // A page left for another keeps its connections until the browser
  // drops it (the back-forward cache): close the stream, so streams of
  // pages gone do not use up the browser's few connections to the server;
  // a page shown again from that cache reopens it and catches up.
  const hide = () => {
    clearTimeout(timer);
    source?.close();
    dropped = true;
  };
  const show = (e) => {
    if (e.persisted && !signal.aborted) open();
  };
  addEventListener('pagehide', hide);
  addEventListener('pageshow', show);
  signal.addEventListener('abort', () => {
    removeEventListener('pagehide', hide);
    removeEventListener('pageshow', show);
    clearTimeout(timer);
    source?.close();
  });
}

// jobFeed follows job events for a page until signal aborts. Open it
// before loading a list and wait for ready (the server has subscribed, or
// the stream is not answering): then no job created meanwhile is missed.
// Events that come before the list is drawn wait for attach, which
// replays them (applying an event twice changes nothing).
export function jobFeed(signal) {
  let handlers = null;
  const queue = [];
  let markReady;
  const ready = new Promise((resolve) => {
    markReady = resolve;
  });
  setTimeout(markReady, 3000);
  followJobs(signal, {
    onReady: () => markReady(),
    onJob: (job) => (handlers ? handlers.onJob(job) : queue.push(job)),
    onResync: () => handlers?.onResync(),
  });
  return {
    ready,
    // hold queues the events again, until the next attach (a list being
    // loaded anew).
    hold() {
      handlers = null;
    },
    attach(onJob, onResync) {
      handlers = { onJob, onResync };
      for (const job of queue.splice(0)) onJob(job);
    },
  };
}

// liveJobs keeps a jobsTable (see format.js) current from a jobFeed: a
// row whose job changes is redrawn in place; a new job matching the
// list's filter (matches) goes in its place (newest first) when the list
// shows the newest jobs (atTop). Rows are added, never pushed off, so
// paging by the cursor skips no job; past the last row only when no older
// page exists (more). A list of the latest few (limit) keeps that many.
// onAdd is told how many rows the table now has; onResync is called when
// events were missed (reload the list).
export function liveJobs(feed, list, { matches = () => true, atTop = true, more = false, limit = 0, onResync, onAdd = () => {} }) {
  const table = list.querySelector('table');
  const body = table.querySelector('tbody');
  const empty = list.querySelector('.jobs-empty');
  feed.attach((job) => {
    const row = body.querySelector(`tr[data-job-id="${CSS.escape(job.job_id)}"]`);
    if (row) {
      row.replaceWith(jobRow(job));
      return;
    }
    if (!atTop || !matches(job)) return;
    // Newest first: job ids (UUIDv7) sort by creation time.
    const after = [...body.rows].find((r) => r.dataset.jobId < job.job_id);
    if (!after && more) return;
    body.insertBefore(jobRow(job), after || null);
    while (limit && body.rows.length > limit) body.lastElementChild.remove();
    table.hidden = false;
    if (empty) empty.hidden = true;
    onAdd(job, body.rows.length);
  }, onResync);
}
