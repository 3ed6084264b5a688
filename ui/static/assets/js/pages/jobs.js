// All jobs, newest first, filtered by workspace and task, a page at a time.
// The filters live in the URL so a filtered list can be reloaded and shared.
import { api } from '../api.js';
import { h, link, path } from '../dom.js';
import { jobsTable } from '../format.js';

const PAGE = 25;

export async function jobsPage(ctx) {
  document.title = 'Jobs · appliance';
  const { signal, query } = ctx;
  const workspace = query.get('workspace') || '';
  const task = workspace ? query.get('task_name') || '' : '';
  const offset = Math.max(0, parseInt(query.get('offset') || '0', 10) || 0);

  const params = new URLSearchParams({ limit: PAGE, offset });
  if (workspace) params.set('workspace', workspace);
  if (task) params.set('task_name', task);
  const [jobs, workspaces, tasks] = await Promise.all([
    api(`/api/jobs?${params}`, { signal }),
    api('/api/workspaces', { signal }),
    workspace ? api(path('api', 'workspaces', workspace, 'tasks'), { signal }).catch(() => []) : [],
  ]);

  const to = (changes) => {
    const q = new URLSearchParams({ workspace, task_name: task, offset, ...changes });
    for (const [k, v] of [...q]) if (!v || v === '0') q.delete(k);
    const s = q.toString();
    return s ? `/jobs?${s}` : '/jobs';
  };
  const wsSelect = h('select', { id: 'filter-ws', value: workspace, onchange: (e) => ctx.navigate(to({ workspace: e.target.value, task_name: '', offset: 0 })) },
    h('option', { value: '' }, 'All workspaces'),
    workspaces.map((w) => h('option', { value: w.name }, w.name)));
  const taskSelect = h('select', { id: 'filter-task', value: task, disabled: !workspace, onchange: (e) => ctx.navigate(to({ task_name: e.target.value, offset: 0 })) },
    h('option', { value: '' }, workspace ? 'All tasks' : 'Choose a workspace first'),
    tasks.map((t) => h('option', { value: t.name }, t.name)));

  const first = jobs.total ? offset + 1 : 0;
  const last = offset + jobs.items.length;
  ctx.show(
    h('h1', {}, 'Jobs'),
    h('form', { class: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'field' }, h('label', { for: 'filter-ws' }, 'Workspace'), wsSelect),
      h('div', { class: 'field' }, h('label', { for: 'filter-task' }, 'Task'), taskSelect)),
    jobsTable(jobs.items, offset ? 'No jobs on this page.' : 'No jobs match.'),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      offset > 0 ? link(to({ offset: Math.max(0, offset - PAGE) }), '← Newer') : h('span', { class: 'muted' }, '← Newer'),
      h('span', { class: 'count' }, `${first}–${last} of ${jobs.total}`),
      last < jobs.total ? link(to({ offset: offset + PAGE }), 'Older →') : h('span', { class: 'muted' }, 'Older →')),
  );
}
