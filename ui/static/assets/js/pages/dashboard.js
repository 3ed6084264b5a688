// The dashboard: workspaces and their load errors, tasks by folder, and the
// most recent jobs (by status if asked), kept current by job events.
import { api } from '../api.js';
import { h, link, path, replace } from '../dom.js';
import { jobsTable, table } from '../format.js';
import { jobFeed, liveJobs } from '../live.js';
import { statusSelect } from '../statusfilter.js';

const RECENT = 10;

export async function dashboard(ctx) {
  document.title = 'Dashboard · appliance';
  const { signal } = ctx;
  const feed = jobFeed(signal);
  await feed.ready;
  const [workspaces, jobs] = await Promise.all([
    api('/api/workspaces', { signal }),
    api(`/api/jobs?limit=${RECENT}`, { signal }),
  ]);
  const tasks = await Promise.all(workspaces.map((w) =>
    api(`${path('api', 'workspaces', w.name, 'tasks')}`, { signal }).catch((err) => err)));

  const recent = h('div', { id: 'recent-jobs' });
  // Each choice of status draws the list again; the feed follows on.
  let drawing = 0;
  const draw = async (status, page) => {
    const mine = ++drawing;
    feed.hold();
    const q = new URLSearchParams({ limit: RECENT });
    if (status) q.set('status', status);
    page ??= await api(`/api/jobs?${q}`, { signal });
    if (mine !== drawing || signal.aborted) return;
    const wanted = new Set(status ? status.split(',') : []);
    const list = jobsTable(page.items, status ? 'No jobs with this status.' : 'No jobs yet.');
    const more = h('p', { hidden: page.total <= page.items.length },
      link(status ? `/jobs?${new URLSearchParams({ status })}` : '/jobs', `All ${page.total} jobs`));
    let total = page.total;
    liveJobs(feed, list, {
      limit: RECENT,
      matches: (j) => !wanted.size || wanted.has(j.status),
      onAdd: () => {
        total += 1;
        more.hidden = false;
        more.firstChild.textContent = `All ${total} jobs`;
      },
      onResync: () => draw(select.value).catch(() => {}),
    });
    replace(recent, list, more);
  };
  const select = statusSelect('recent-status', '', (v) => draw(v).catch(() => {}));
  await draw('', jobs);

  ctx.show(
    h('h1', {}, 'Dashboard'),
    h('section', { 'aria-labelledby': 'ws-h' }, h('h2', { id: 'ws-h' }, 'Workspaces'), workspacesTable(workspaces)),
    h('section', { 'aria-labelledby': 'tasks-h' }, h('h2', { id: 'tasks-h' }, 'Tasks'),
      workspaces.map((w, i) => taskTree(w.name, tasks[i], workspaces.length > 1))),
    h('section', { 'aria-labelledby': 'jobs-h' },
      h('div', { class: 'section-head' },
        h('h2', { id: 'jobs-h' }, 'Recent jobs'),
        h('div', { class: 'field inline' }, h('label', { for: 'recent-status' }, 'Status'), select)),
      recent),
  );
}

function workspacesTable(workspaces) {
  return table(['Workspace', 'Tasks', 'Actions', 'Triggers', 'Revision', 'Errors'],
    workspaces.map((w) => h('tr', { class: w.errors?.length ? 'has-errors' : null },
      h('th', { scope: 'row' }, w.name),
      h('td', { class: 'num' }, w.tasks_count),
      h('td', { class: 'num' }, w.actions_count),
      h('td', { class: 'num' }, w.triggers_count),
      h('td', {}, h('code', { title: w.revision }, String(w.revision || '').slice(0, 12))),
      h('td', {}, w.errors?.length
        ? h('ul', { class: 'errors' }, w.errors.map((e) => h('li', {}, h('code', {}, e))))
        : h('span', { class: 'muted' }, 'none')))),
    'No workspaces are configured.');
}

// taskTree nests a workspace's tasks by their folder, split on `/`.
function taskTree(workspace, tasks, titled) {
  const heading = titled ? h('h3', {}, workspace) : null;
  if (tasks instanceof Error) return h('div', {}, heading, h('p', { class: 'error' }, tasks.message));
  const root = { folders: new Map(), tasks: [] };
  for (const t of tasks) {
    let node = root;
    for (const part of (t.folder || '').split('/').filter(Boolean)) {
      if (!node.folders.has(part)) node.folders.set(part, { folders: new Map(), tasks: [] });
      node = node.folders.get(part);
    }
    node.tasks.push(t);
  }
  if (!tasks.length) return h('div', {}, heading, h('p', { class: 'muted' }, 'No tasks.'));
  return h('div', {}, heading, h('ul', { class: 'tree' }, folderItems(workspace, root)));
}

function folderItems(workspace, node) {
  const folders = [...node.folders.keys()].sort().map((name) =>
    h('li', { class: 'folder' },
      h('details', { open: true },
        h('summary', {}, name),
        h('ul', { class: 'tree' }, folderItems(workspace, node.folders.get(name))))));
  const tasks = node.tasks.map((t) =>
    h('li', { class: 'task' },
      link(path('tasks', workspace, t.name), t.display_name || t.name),
      t.display_name && t.display_name !== t.name ? h('code', { class: 'muted task-key' }, t.name) : null,
      t.has_triggers ? h('span', { class: 'tag', title: 'Started by a trigger too' }, 'triggered') : null,
      t.permission === 'view' ? h('span', { class: 'tag', title: 'You may see this task and its jobs but not run them' }, 'view only') : null,
      t.description ? h('p', { class: 'task-desc muted' }, t.description) : null));
  return [...folders, ...tasks];
}
