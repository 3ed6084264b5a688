// All jobs, newest first, filtered by workspace, task and status, a page at
// a time. Pages follow the list's cursor (next_cursor), so jobs arriving
// meanwhile never shift a page; the filters, the cursor and the cursors of
// the pages before (for "Newer") live in the URL so a page can be reloaded
// and shared. The list follows job events: new jobs appear at the top of
// the first page, and statuses change in place.
import { api } from '../api.js';
import { h, link, path } from '../dom.js';
import { jobsTable } from '../format.js';
import { jobFeed, liveJobs } from '../live.js';
import { statusSelect } from '../statusfilter.js';

const PAGE = 25;
export async function jobsPage(ctx) {
  document.title = 'Jobs · appliance';
  const { signal, query } = ctx;
  const workspace = query.get('workspace') || '';
  const task = workspace ? query.get('task_name') || '' : '';
  const statusFilter = query.get('status') || '';
  const cursor = query.get('cursor') || '';
  // trail: the cursors of the pages before this one, oldest first ('' is
  // the first page).
  const trail = cursor ? (query.get('trail') || '').split('.').filter((c, i) => c || i === 0) : [];
  const at = Math.max(0, parseInt(query.get('at') || '0', 10) || 0);

  const params = new URLSearchParams({ limit: PAGE });
  if (workspace) params.set('workspace', workspace);
  if (task) params.set('task_name', task);
  if (statusFilter) params.set('status', statusFilter);
  if (cursor) params.set('cursor', cursor);
  const feed = jobFeed(signal);
  await feed.ready;
  const [jobs, workspaces, tasks] = await Promise.all([
    api(`/api/jobs?${params}`, { signal }),
    api('/api/workspaces', { signal }),
    workspace ? api(path('api', 'workspaces', workspace, 'tasks'), { signal }).catch(() => []) : [],
  ]);

  const to = (changes) => {
    const q = new URLSearchParams({ workspace, task_name: task, status: statusFilter, ...changes });
    for (const [k, v] of [...q]) if (!v || v === '0') q.delete(k);
    const s = q.toString();
    return s ? `/jobs?${s}` : '/jobs';
  };
  const refilter = (changes) => ctx.navigate(to({ cursor: '', trail: '', at: 0, ...changes }));
  const wsSelect = h('select', { id: 'filter-ws', value: workspace, onchange: (e) => refilter({ workspace: e.target.value, task_name: '' }) },
    h('option', { value: '' }, 'All workspaces'),
    workspaces.map((w) => h('option', { value: w.name }, w.name)));
  const taskSelect = h('select', { id: 'filter-task', value: task, disabled: !workspace, onchange: (e) => refilter({ task_name: e.target.value }) },
    h('option', { value: '' }, workspace ? 'All tasks' : 'Choose a workspace first'),
    tasks.map((t) => h('option', { value: t.name }, t.name)));

  const first = jobs.items.length ? at + 1 : at;
  const last = at + jobs.items.length;
  const newer = cursor
    ? link(to({ cursor: trail[trail.length - 1] || '', trail: trail.slice(0, -1).join('.'), at: Math.max(0, at - PAGE) }), '← Newer')
    : h('span', { class: 'muted' }, '← Newer');
  const older = jobs.next_cursor
    ? link(to({ cursor: jobs.next_cursor, trail: [...trail, cursor].join('.'), at: last }), 'Older →')
    : h('span', { class: 'muted' }, 'Older →');
  const list = jobsTable(jobs.items, cursor ? 'No jobs on this page.' : 'No jobs match.');
  const count = h('span', { class: 'count' }, `${first}–${last} of ${jobs.total}`);
  let total = jobs.total;
  const wanted = new Set(statusFilter ? statusFilter.split(',') : []);
  liveJobs(feed, list, {
    atTop: !cursor,
    more: Boolean(jobs.next_cursor),
    matches: (j) => (!workspace || j.workspace === workspace) && (!task || j.task_name === task) &&
      (!wanted.size || wanted.has(j.status)),
    onAdd: (_, rows) => {
      total += 1;
      count.textContent = `${rows ? 1 : 0}–${rows} of ${total}`;
    },
    onResync: () => ctx.navigate(location.pathname + location.search, { replace: true }),
  });
  ctx.show(
    h('h1', {}, 'Jobs'),
    h('form', { class: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'field' }, h('label', { for: 'filter-ws' }, 'Workspace'), wsSelect),
      h('div', { class: 'field' }, h('label', { for: 'filter-task' }, 'Task'), taskSelect),
      h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Status'),
        statusSelect('filter-status', statusFilter, (v) => refilter({ status: v })))),
    list,
    h('nav', { class: 'pager', 'aria-label': 'Pages' }, newer, count, older),
  );
}
