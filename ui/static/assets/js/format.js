// Shared presentation of times, statuses and JSON values.
import { h, link, path } from './dom.js';

export const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'skipped']);

export function isLive(status) {
  return !TERMINAL.has(status);
}

// time shows a moment relative to now ("3 min ago", "in 2 h"), kept
// current while the page is open, with the absolute time on hover and in
// its datetime attribute.
export function time(ts) {
  if (!ts) return h('span', { class: 'muted' }, '—');
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  startTicking();
  return h('time', { datetime: ts, title: d.toLocaleString(), 'data-rel': true }, relative(d));
}

// relative words the distance from now to d.
export function relative(d, now = Date.now()) {
  const s = Math.round((d.getTime() - now) / 1000);
  const a = Math.abs(s);
  let words;
  if (a < 10) return 'just now';
  if (a < 60) words = `${a} s`;
  else if (a < 3600) words = `${Math.floor(a / 60)} min`;
  else if (a < 86400) words = `${Math.floor(a / 3600)} h`;
  else if (a < 30 * 86400) words = `${Math.floor(a / 86400)} d`;
  else return d.toLocaleDateString();
  return s < 0 ? `${words} ago` : `in ${words}`;
}

// One timer refreshes every relative time on the page.
let ticking = null;

function startTicking() {
  ticking ??= setInterval(() => {
    for (const el of document.querySelectorAll('time[data-rel]')) {
      const text = relative(new Date(el.getAttribute('datetime')));
      if (el.textContent !== text) el.textContent = text;
    }
  }, 15000);
}

export function duration(from, to) {
  if (!from) return '';
  const ms = (to ? new Date(to) : new Date()) - new Date(from);
  if (!(ms >= 0)) return '';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function status(s) {
  return h('span', { class: ['status', `status-${String(s).replace(/[^a-z_-]/gi, '')}`] }, s);
}

// ordinal writes 1 as 1st, 2 as 2nd, 11 as 11th, 23 as 23rd.
export function ordinal(n) {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' }[n % 10] || 'th');
  return `${n}${suffix}`;
}

// jobStatus is a job's status badge, and while it waits for a slot of a
// concurrency limit or queue, its place in line: "queued (3rd)".
export function jobStatus(j) {
  const s = status(j.status);
  if (!j.queue) return s;
  const where = [j.queue.name && `queue ${j.queue.name}`, j.queue.key && `key ${j.queue.key}`].filter(Boolean).join(', ');
  const place = j.queue.position > 0 ? ` (${ordinal(j.queue.position)})` : '';
  return [s, ' ', h('span', { class: ['status', 'status-queued'], title: `waiting for a slot${where ? ` of ${where}` : ''}, priority ${j.queue.priority}` },
    `queued${place}`)];
}

export function json(v) {
  return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
}

// shortId is the random tail of an id: a UUIDv7 starts with its time, so
// jobs created in the same millisecond share a prefix but not a tail.
export function shortId(id) {
  return String(id || '').replace(/-/g, '').slice(-8);
}

export function jobLink(id) {
  return link(path('jobs', id), h('code', { title: id }, shortId(id)));
}

// copyButton copies text (a full id) to the clipboard.
export function copyButton(text, what = 'id') {
  const label = `Copy ${what} ${text}`;
  const b = h('button', {
    type: 'button', class: 'copy-id', 'aria-label': label, title: `Copy the full ${what}`,
    onclick: async () => {
      let ok = true;
      try {
        await navigator.clipboard.writeText(text);
      } catch {
        ok = false;
      }
      b.textContent = ok ? 'Copied' : 'Copy failed';
      b.setAttribute('aria-label', ok ? `Copied ${what} ${text}` : `Could not copy ${what}`);
      setTimeout(() => {
        b.textContent = 'Copy';
        b.setAttribute('aria-label', label);
      }, 1500);
    },
  }, 'Copy');
  return b;
}

// jobId is a job's short id, linked, with its full id on hover and a copy
// button.
export function jobId(id) {
  return h('span', { class: 'job-id' }, jobLink(id), ' ', copyButton(id, 'job id'));
}

export function taskLink(workspace, task) {
  return link(path('tasks', workspace, task), task);
}

export function table(headers, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows));
}

// jobRow is one row of a jobs table; live lists find it by data-job-id.
export function jobRow(j) {
  return h('tr', { 'data-job-id': j.job_id, 'data-status': j.status },
    h('td', {}, jobId(j.job_id)),
    h('td', {}, j.workspace),
    h('td', {}, taskLink(j.workspace, j.task_name)),
    h('td', {}, jobStatus(j)),
    h('td', {}, j.source_type, j.source_id ? h('span', { class: 'muted' }, ` ${j.source_id}`) : null),
    h('td', {}, time(j.created_at)),
    h('td', {}, duration(j.started_at, j.completed_at)));
}

// jobsTable is the table of a page of jobs. The table is there even when
// empty (hidden, the empty message shown instead), so live updates can add
// the first row.
export function jobsTable(jobs, empty = 'No jobs yet.') {
  const headers = ['Job', 'Workspace', 'Task', 'Status', 'Source', 'Created', 'Duration'];
  return h('div', { class: 'jobs-list' },
    h('p', { class: 'muted jobs-empty', hidden: jobs.length > 0 }, empty),
    h('table', { class: 'jobs-table', hidden: jobs.length === 0 },
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, jobs.map(jobRow))));
}
