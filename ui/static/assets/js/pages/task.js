// A task: its description, steps, triggers and recent jobs, and the form
// that runs it.
import { api } from '../api.js';
import { h, link, path } from '../dom.js';
import { jobsTable, table, time } from '../format.js';
import { runForm } from '../form.js';
import { runOnly } from '../permission.js';

export async function taskPage(ctx) {
  const [ws, name] = ctx.params;
  const { signal } = ctx;
  document.title = `${name} · appliance`;
  const [task, jobs] = await Promise.all([
    api(path('api', 'workspaces', ws, 'tasks', name), { signal }),
    api(`/api/jobs?${new URLSearchParams({ workspace: ws, task_name: name, limit: 5 })}`, { signal }),
  ]);

  const form = runForm(task.input || {}, async (input) => {
    const r = await api(`${path('api', 'workspaces', ws, 'tasks', name, 'execute')}`, { method: 'POST', body: { input } });
    ctx.navigate(path('jobs', r.job_id));
  });

  ctx.show(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, link('/', 'Dashboard'), ' / ', ws,
      task.folder ? ` / ${task.folder}` : ''),
    h('h1', {}, name),
    task.description ? h('p', { class: 'lead' }, task.description) : null,
    h('section', { class: 'card', 'aria-labelledby': 'run-h' }, h('h2', { id: 'run-h' }, 'Run'), runOnly(task, form, 'run this task')),
    h('section', { 'aria-labelledby': 'steps-h' }, h('h2', { id: 'steps-h' }, 'Steps'), flowTable(task.flow || {})),
    h('section', { 'aria-labelledby': 'triggers-h' }, h('h2', { id: 'triggers-h' }, 'Triggers'), triggersTable(task.triggers || [])),
    h('section', { 'aria-labelledby': 'recent-h' },
      h('h2', { id: 'recent-h' }, 'Recent jobs'),
      jobsTable(jobs.items, 'This task has not run yet.'),
      jobs.total > jobs.items.length
        ? h('p', {}, link(`/jobs?${new URLSearchParams({ workspace: ws, task_name: name })}`, `All ${jobs.total} jobs of this task`))
        : null),
  );
}

function flowTable(flow) {
  return table(['Step', 'Runs', 'After', 'Notes'], Object.entries(flow).map(([name, s]) => h('tr', {},
    h('th', { scope: 'row' }, name),
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
