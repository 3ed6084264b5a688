// A task: its name and description, steps, triggers and jobs (by status,
// a page at a time, kept current by job events), and the form that runs it.
import { api } from '../api.js';
import { h, link, path } from '../dom.js';
import { jobsTable, table, time } from '../format.js';
import { runForm } from '../form.js';
import { jobFeed, liveJobs } from '../live.js';
import { pageState, pager } from '../pager.js';
import { runOnly } from '../permission.js';
import { statusSelect } from '../statusfilter.js';

const PAGE = 10;

export async function taskPage(ctx) {
  const [ws, name] = ctx.params;
  const { signal } = ctx;
  document.title = `${name} · appliance`;
  const statusFilter = ctx.query.get('status') || '';
  const state = pageState(ctx.query);
  const params = new URLSearchParams({ workspace: ws, task_name: name, limit: PAGE });
  if (statusFilter) params.set('status', statusFilter);
  if (state.cursor) params.set('cursor', state.cursor);
  const feed = jobFeed(signal);
  await feed.ready;
  const [task, jobs] = await Promise.all([
    api(path('api', 'workspaces', ws, 'tasks', name), { signal }),
    api(`/api/jobs?${params}`, { signal }),
  ]);
  if (task.display_name) document.title = `${task.display_name} · appliance`;

  const form = runForm(task.input || {}, async (input) => {
    const r = await api(`${path('api', 'workspaces', ws, 'tasks', name, 'execute')}`, { method: 'POST', body: { input } });
    ctx.navigate(path('jobs', r.job_id));
  });

  const here = path('tasks', ws, name);
  const to = (changes) => {
    const q = new URLSearchParams({ status: statusFilter, ...changes });
    for (const [k, v] of [...q]) if (!v || v === '0') q.delete(k);
    const qs = q.toString();
    return qs ? `${here}?${qs}` : here;
  };
  const { nav, count } = pager(state, jobs, PAGE, to);
  const list = jobsTable(jobs.items, statusFilter ? 'No jobs of this task with this status.' : 'This task has not run yet.');
  const wanted = new Set(statusFilter ? statusFilter.split(',') : []);
  let total = jobs.total;
  liveJobs(feed, list, {
    atTop: !state.cursor,
    more: Boolean(jobs.next_cursor),
    matches: (j) => j.workspace === ws && j.task_name === name && (!wanted.size || wanted.has(j.status)),
    onAdd: (_, rows) => {
      total += 1;
      count.textContent = `1–${rows} of ${total}`;
    },
    onResync: () => ctx.navigate(location.pathname + location.search, { replace: true }),
  });

  ctx.show(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, link('/', 'Dashboard'), ' / ', ws,
      task.folder ? ` / ${task.folder}` : ''),
    h('h1', {}, task.display_name || name,
      task.display_name && task.display_name !== name ? [' ', h('code', { class: 'muted task-key' }, name)] : null),
    task.description ? h('p', { class: 'lead' }, task.description) : null,
    h('section', { class: 'card', 'aria-labelledby': 'run-h' }, h('h2', { id: 'run-h' }, 'Run'), runOnly(task, form, 'run this task')),
    h('section', { 'aria-labelledby': 'steps-h' }, h('h2', { id: 'steps-h' }, 'Steps'), flowTable(task.flow || {})),
    h('section', { 'aria-labelledby': 'triggers-h' }, h('h2', { id: 'triggers-h' }, 'Triggers'), triggersTable(task.triggers || [])),
    h('section', { 'aria-labelledby': 'recent-h' },
      h('div', { class: 'section-head' },
        h('h2', { id: 'recent-h' }, 'Jobs'),
        h('div', { class: 'field inline' }, h('label', { for: 'task-status' }, 'Status'),
          statusSelect('task-status', statusFilter, (v) => ctx.navigate(to({ status: v, cursor: '', trail: '', at: 0 }))))),
      list,
      nav),
  );
}

function flowTable(flow) {
  return table(['Step', 'Runs', 'After', 'Notes'], Object.entries(flow).map(([name, s]) => h('tr', {},
    h('th', { scope: 'row' }, s.name || name,
      s.name && s.name !== name ? [' ', h('code', { class: 'muted' }, name)] : null,
      s.description ? h('div', { class: 'step-desc muted' }, s.description) : null),
    h('td', {}, s.action ? h('code', {}, s.action) : h('span', { class: 'muted' }, `inline ${s.type || ''}`)),
    h('td', {}, (s.depends_on || []).join(', ')),
    h('td', {}, [
      s.when ? h('div', {}, 'when ', h('code', {}, s.when)) : null,
      s.for_each ? h('div', {}, 'for each ', h('code', {}, typeof s.for_each === 'string' ? s.for_each : JSON.stringify(s.for_each))) : null,
      s.continue_on_failure ? h('div', {}, 'continues on failure') : null,
    ]))), 'No steps.');
}

function triggersTable(triggers) {
  return table(['Trigger', 'Type', 'Enabled', 'When', 'Next runs / consumer'], triggers.map((t) => h('tr', {},
    h('th', { scope: 'row' }, t.name),
    h('td', {}, t.type),
    h('td', {}, t.enabled ? 'yes' : 'no'),
    h('td', {}, t.type === 'scheduler' ? [h('code', {}, t.cron), t.timezone ? ` (${t.timezone})` : '']
      : t.type === 'webhook' ? h('code', {}, `/hooks/${t.webhook_name || t.name}`)
        : t.type === 'event_source' ? eventSourceWhen(t) : ''),
    h('td', {}, t.type === 'event_source' ? consumerCell(t)
      : t.next_runs?.length
        ? h('ul', { class: 'plain' }, t.next_runs.map((r) => h('li', {}, time(r))))
        : h('span', { class: 'muted' }, '—')))), 'No trigger starts this task.');
}

// An event source: its consumer task's events start jobs of target_task.
function eventSourceWhen(t) {
  return [
    'events of ', h('code', {}, t.task), ' start ', h('code', {}, t.target_task),
    t.max_in_flight ? ` (at most ${t.max_in_flight} in flight)` : '',
  ];
}

// An event source's consumer: its state, restarts and job.
function consumerCell(t) {
  return h('ul', { class: 'plain' },
    h('li', {}, h('span', { class: `status status-${t.state}` }, t.state || 'stopped'),
      ` · restart ${t.restart_policy || 'always'} · ${t.restarts || 0} restart${t.restarts === 1 ? '' : 's'}`),
    h('li', {}, t.consumer_job_id
      ? link(path('jobs', t.consumer_job_id), 'consumer job')
      : h('span', { class: 'muted' }, 'no consumer job yet')));
}
