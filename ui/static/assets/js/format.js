// Shared presentation of times, statuses and JSON values.
import { h, link, path } from './dom.js';

export const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'skipped']);

export function isLive(status) {
  return !TERMINAL.has(status);
}

export function time(ts) {
  if (!ts) return h('span', { class: 'muted' }, '—');
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  return h('time', { datetime: ts, title: ts }, d.toLocaleString());
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

export function json(v) {
  return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
}

export function shortId(id) {
  return String(id || '').slice(0, 8);
}

export function jobLink(id) {
  return link(path('jobs', id), h('code', { title: id }, shortId(id)));
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

export function jobsTable(jobs, empty = 'No jobs yet.') {
  return table(['Job', 'Workspace', 'Task', 'Status', 'Source', 'Created', 'Duration'],
    jobs.map((j) => h('tr', {},
      h('td', {}, jobLink(j.job_id)),
      h('td', {}, j.workspace),
      h('td', {}, taskLink(j.workspace, j.task_name)),
      h('td', {}, status(j.status)),
      h('td', {}, j.source_type, j.source_id ? h('span', { class: 'muted' }, ` ${j.source_id}`) : null),
      h('td', {}, time(j.created_at)),
      h('td', {}, duration(j.started_at, j.completed_at)))),
    empty);
}
