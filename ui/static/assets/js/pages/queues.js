// Queues: each named queue of the server config and each task limit in
// use (per key), with its running jobs and its line: position, priority
// and how long each job has waited. Admins (anyone with auth off) may
// move a queued job. The page reloads itself on job events, so it shows
// the line as it moves.
import { api } from '../api.js';
import { h, path, replace } from '../dom.js';
import { jobId, ordinal, table, taskLink, time } from '../format.js';
import { followJobs } from '../live.js';

export async function queuesPage(ctx) {
  document.title = 'Queues · appliance';
  const { signal } = ctx;
  const body = h('div', { id: 'queues' });
  const canMove = !ctx.config.auth_required || Boolean(ctx.me?.is_admin);
  let timer = null;
  const load = async () => {
    const { queues } = await api('/api/queues', { signal });
    replace(body, queues.length
      ? queues.map((q) => queueSection(q, canMove, load))
      : h('p', { class: 'muted' }, 'No queue is configured and no task limit is in use.'));
  };
  // A change of any job may move a line: reload, at most every half second.
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(() => load().catch(() => {}), 500);
  };
  signal.addEventListener('abort', () => clearTimeout(timer));
  followJobs(signal, { onJob: later, onResync: later });
  await load();
  ctx.show(
    h('h1', {}, 'Queues'),
    h('p', { class: 'lead' }, 'Jobs over a concurrency limit wait here, pending, and start by priority, then in creation order, the moment a slot frees.'),
    body);
}

function queueSection(q, canMove, reload) {
  const title = q.name
    ? ['Queue ', h('code', {}, q.name)]
    : ['Task ', taskLink(q.workspace, q.task_name), q.key ? [' · key ', h('code', {}, q.key)] : ''];
  const limit = q.limit > 0 ? `${q.running.length} of ${q.limit} running` : `${q.running.length} running, no limit`;
  return h('section', { class: 'queue', 'data-queue': q.name || `${q.workspace}/${q.task_name}/${q.key}` },
    h('h2', {}, title, ' ', h('span', { class: 'muted small' }, `${limit}, ${q.queued.length} queued`)),
    q.running.length
      ? h('p', {}, 'Running: ', q.running.map((j, i) => [i ? ', ' : '', jobId(j.job_id), ' ', h('span', { class: 'muted' }, j.task_name)]))
      : null,
    table(['Place', 'Job', 'Task', 'Priority', 'Waiting since', canMove ? 'Move' : null].filter(Boolean),
      q.queued.map((j) => h('tr', { 'data-job-id': j.job_id },
        h('td', {}, ordinal(j.position)),
        h('td', {}, jobId(j.job_id)),
        h('td', {}, taskLink(j.workspace, j.task_name)),
        h('td', {}, String(j.priority)),
        h('td', {}, time(j.since)),
        canMove ? h('td', {}, priorityForm(j, reload)) : null)),
      'Nobody waits.'));
}

function priorityForm(j, reload) {
  const input = h('input', { type: 'number', min: -100, max: 100, step: 1, value: String(j.priority), 'aria-label': `Priority of job ${j.job_id}`, class: 'narrow' });
  const error = h('span', { class: 'error-text', role: 'alert' });
  const form = h('form', { class: 'inline' }, input, ' ', h('button', { type: 'submit' }, 'Set priority'), ' ', error);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    try {
      await api(path('api', 'jobs', j.job_id, 'priority'), { method: 'POST', body: { priority: Number(input.value) } });
      await reload();
    } catch (err) {
      error.textContent = err.message;
    }
  });
  return form;
}
