// Workers: the list with status and tags, and one worker's recent steps.
import { api } from '../api.js';
import { h, link, path } from '../dom.js';
import { duration, jobLink, shortId, status, table, taskLink, time } from '../format.js';

const PAGE = 50;

export async function workersPage(ctx) {
  document.title = 'Workers · appliance';
  const offset = Math.max(0, parseInt(ctx.query.get('offset') || '0', 10) || 0);
  const workers = await api(`/api/workers?limit=${PAGE}&offset=${offset}`, { signal: ctx.signal });
  ctx.show(
    h('h1', {}, 'Workers'),
    table(['Worker', 'Status', 'Tags', 'Last seen'], workers.items.map((w) => h('tr', {},
      h('th', { scope: 'row' }, link(path('workers', w.id), w.name || shortId(w.id))),
      h('td', {}, status(w.status)),
      h('td', {}, tags(w.tags)),
      h('td', {}, time(w.last_seen)))), 'No worker has registered yet.'),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      offset > 0 ? link(`/workers?offset=${Math.max(0, offset - PAGE)}`, '← Previous') : null,
      h('span', { class: 'count' }, `${workers.total} worker${workers.total === 1 ? '' : 's'}`),
      offset + workers.items.length < workers.total ? link(`/workers?offset=${offset + PAGE}`, 'Next →') : null),
  );
}

export async function workerPage(ctx) {
  const [id] = ctx.params;
  const w = await api(path('api', 'workers', id), { signal: ctx.signal });
  document.title = `${w.name || shortId(w.id)} · appliance`;
  ctx.show(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, link('/workers', 'Workers'), ' / ', w.name),
    h('h1', {}, w.name || shortId(w.id), ' ', status(w.status)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'ID'), h('dd', {}, h('code', {}, w.id)),
      h('dt', {}, 'Tags'), h('dd', {}, tags(w.tags)),
      h('dt', {}, 'Last seen'), h('dd', {}, time(w.last_seen))),
    h('section', { 'aria-labelledby': 'wsteps-h' },
      h('h2', { id: 'wsteps-h' }, `Recent steps (${w.steps.items.length} of ${w.steps.total})`),
      table(['Job', 'Task', 'Step', 'Status', 'Started', 'Duration', 'Error'], w.steps.items.map((s) => h('tr', {},
        h('td', {}, jobLink(s.job_id), ' ', status(s.job_status)),
        h('td', {}, taskLink(s.workspace, s.task_name)),
        h('td', {}, h('code', {}, s.step_name)),
        h('td', {}, status(s.status)),
        h('td', {}, time(s.started_at)),
        h('td', {}, duration(s.started_at, s.completed_at)),
        h('td', {}, s.error_message ? h('pre', { class: 'error-text' }, s.error_message) : ''))), 'No steps yet.')),
  );
}

function tags(list) {
  if (!list?.length) return h('span', { class: 'muted' }, 'none');
  return list.map((t) => h('span', { class: 'tag' }, t));
}
