// Cursor paging of a job list whose state lives in the URL: `cursor` (the
// page shown), `trail` (the cursors of the pages before, for "Newer") and
// `at` (how many jobs come before this page).
import { h, link } from './dom.js';

// pageState reads the paging state from the query.
export function pageState(query) {
  const cursor = query.get('cursor') || '';
  const trail = cursor ? (query.get('trail') || '').split('.').filter((c, i) => c || i === 0) : [];
  const at = Math.max(0, parseInt(query.get('at') || '0', 10) || 0);
  return { cursor, trail, at };
}

// pager is the Newer/Older navigation of a page of jobs (the answer of GET
// /api/jobs) and its count; to(changes) builds the URL of other pages.
export function pager(state, jobs, size, to) {
  const { cursor, trail, at } = state;
  const last = at + jobs.items.length;
  const newer = cursor
    ? link(to({ cursor: trail[trail.length - 1] || '', trail: trail.slice(0, -1).join('.'), at: Math.max(0, at - size) }), '← Newer')
    : h('span', { class: 'muted' }, '← Newer');
  const older = jobs.next_cursor
    ? link(to({ cursor: jobs.next_cursor, trail: [...trail, cursor].join('.'), at: last }), 'Older →')
    : h('span', { class: 'muted' }, 'Older →');
  const count = h('span', { class: 'count' }, `${jobs.items.length ? at + 1 : at}–${last} of ${jobs.total}`);
  return { nav: h('nav', { class: 'pager', 'aria-label': 'Pages' }, newer, count, older), count };
}
