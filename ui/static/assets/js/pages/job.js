// One job: status, input and output, its steps (for_each instances under
// their step, approvals with their buttons, child jobs linked), the live log
// a Cancel button while it runs, and Re-run buttons (the whole job, or,
// for a failed or cancelled one, only the steps that did not complete).
import { api } from '../api.js';
import { append, h, link, path, replace } from '../dom.js';
import { duration, isLive, json, jobLink, shortId, status, taskLink, time } from '../format.js';
import { follow, logView } from '../logview.js';

// POLL is how often a live job's record is fetched again: approvals and
// status changes carry no log line to notice them by.
const POLL = 1000;

// STEP_PAGE is how many steps of a big job (one whose detail leaves its
// for_each instances out: steps_omitted) a page of /steps shows.
const STEP_PAGE = 200;
const STEP_STATUSES = ['pending', 'ready', 'running', 'waiting', 'completed', 'failed', 'skipped', 'cancelled'];

export async function jobPage(ctx) {
  const [id] = ctx.params;
  const { signal } = ctx;
  let job = await api(path('api', 'jobs', id), { signal });
  document.title = `${job.task_name} ${shortId(id)} · appliance`;

  const head = h('div');
  const facts = h('div');
  const stepsBox = h('section', { 'aria-labelledby': 'steps-h' });
  const allSteps = bigSteps();
  const actionError = h('p', { class: 'error', role: 'alert' });
  const logs = logView();
  let painted = '';

  const refresh = async () => {
    try {
      job = await api(path('api', 'jobs', id), { signal });
      actionError.textContent = '';
      paint();
    } catch (err) {
      if (!signal.aborted) actionError.textContent = err.message;
    }
  };

  // act runs a button's request, then hands its answer to then (by
  // default: show the job as it now is).
  const act = (button, request, then = refresh) => async () => {
    button.disabled = true;
    actionError.textContent = '';
    try {
      await then(await request());
    } catch (err) {
      actionError.textContent = err.message;
      button.disabled = false;
    }
  };

  // rerunTo starts a new job of this one's task (fromFailed: reusing the
  // steps that completed) and goes to it.
  const rerunTo = (button, fromFailed) => act(button,
    () => api(path('api', 'jobs', id, 'rerun'), { method: 'POST', body: { from_failed: fromFailed } }),
    (r) => ctx.navigate(path('jobs', r.job_id)));

  function paint() {
    // Repainting only on change keeps focus and typing in the approval
    // fields while the job waits.
    const now = JSON.stringify(job);
    if (now === painted) return;
    painted = now;
    for (const s of job.steps) logs.addStep(s.step_name);
    const cancel = isLive(job.status) ? h('button', { type: 'button', class: 'danger' }, 'Cancel job') : null;
    cancel?.addEventListener('click', act(cancel, () => api(path('api', 'jobs', id, 'cancel'), { method: 'POST' })));
    // Hook jobs run again with the job that fires them: no re-run.
    const rerun = job.source_type !== 'hook' ? h('button', { type: 'button', id: 'rerun' }, 'Re-run') : null;
    rerun?.addEventListener('click', rerunTo(rerun, false));
    const rerunFailed = ['failed', 'cancelled'].includes(job.status) && rerun
      ? h('button', { type: 'button', id: 'rerun-failed' }, 'Re-run failed steps') : null;
    rerunFailed?.addEventListener('click', rerunTo(rerunFailed, true));
    replace(head,
      h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, link('/jobs', 'Jobs'), ' / ', job.workspace, ' / ', taskLink(job.workspace, job.task_name)),
      h('div', { class: 'title-row' },
        h('h1', {}, `${job.task_name} `, h('code', { class: 'muted', title: job.job_id }, shortId(job.job_id))),
        h('span', { id: 'job-status' }, status(job.status)),
        h('div', { class: 'actions' }, cancel, rerun, rerunFailed)),
      actionError);
    replace(facts,
      h('dl', { class: 'facts' },
        h('dt', {}, 'Source'), h('dd', {}, job.source_type,
          job.source_type === 'task' && job.source_id ? [' of ', jobLink(job.source_id)] : job.source_id ? ` ${job.source_id}` : ''),
        job.rerun_of ? [h('dt', {}, 'Re-run of'), h('dd', { id: 'rerun-of' }, jobLink(job.rerun_of))] : null,
        h('dt', {}, 'Created'), h('dd', {}, time(job.created_at)),
        h('dt', {}, 'Started'), h('dd', {}, time(job.started_at)),
        h('dt', {}, 'Completed'), h('dd', {}, time(job.completed_at), job.completed_at ? ` (${duration(job.started_at || job.created_at, job.completed_at)})` : ''),
        h('dt', {}, 'Revision'), h('dd', {}, h('code', {}, String(job.revision || '').slice(0, 12)))),
      h('div', { class: 'io' },
        h('section', { 'aria-labelledby': 'input-h' }, h('h2', { id: 'input-h' }, 'Input'), json(job.input)),
        h('section', { 'aria-labelledby': 'output-h' }, h('h2', { id: 'output-h' }, 'Output'),
          job.output ? json(job.output) : h('p', { class: 'muted' }, isLive(job.status) ? 'Not yet.' : 'None.'))));
    replace(stepsBox, h('h2', { id: 'steps-h' }, 'Steps'), summary(job.steps_summary), stepsTable(job.steps));
    allSteps.show(job.steps_omitted > 0);
  }

  // summary counts the job's steps per status.
  function summary(counts) {
    const parts = STEP_STATUSES.filter((st) => counts?.[st]).map((st) => [status(st), ` ${counts[st]} `]);
    return parts.length ? h('p', { id: 'steps-summary', class: 'summary' }, parts) : null;
  }

  // bigSteps pages every step of a big job, for_each instances included,
  // through /api/jobs/{id}/steps, filtered by status; "More" follows the
  // cursor. Nothing is fetched until the job turns out to be big.
  function bigSteps() {
    const el = h('section', { id: 'all-steps', 'aria-labelledby': 'all-steps-h', hidden: true });
    const body = h('tbody');
    const count = h('span', { class: 'count' });
    const more = h('button', { type: 'button', id: 'steps-more' }, 'More');
    const filter = h('select', { id: 'steps-status' },
      h('option', { value: '' }, 'All statuses'), STEP_STATUSES.map((st) => h('option', { value: st }, st)));
    let cursor = null;
    let shown = 0;
    let started = false;
    const load = async (reset) => {
      if (reset) { cursor = null; shown = 0; body.replaceChildren(); }
      const q = new URLSearchParams({ limit: STEP_PAGE });
      if (filter.value) q.set('status', filter.value);
      if (cursor) q.set('cursor', cursor);
      more.disabled = true;
      try {
        const page = await api(`${path('api', 'jobs', id, 'steps')}?${q}`, { signal });
        for (const st of page.items) body.append(stepRow(st, /\[\d+\]$/.test(st.step_name)));
        shown += page.items.length;
        cursor = page.next_cursor;
        count.textContent = `${shown} of ${page.total}`;
        more.hidden = !cursor;
      } catch (err) {
        if (!signal.aborted) actionError.textContent = err.message;
      }
      more.disabled = false;
    };
    more.addEventListener('click', () => load(false));
    filter.addEventListener('change', () => load(true));
    append(el, [
      h('h2', { id: 'all-steps-h' }, 'All steps'),
      h('form', { class: 'filters', onsubmit: (e) => e.preventDefault() },
        h('div', { class: 'field' }, h('label', { for: 'steps-status' }, 'Status'), filter)),
      h('table', { class: 'steps' },
        h('thead', {}, h('tr', {}, ['Step', 'Status', 'Worker', 'Started', 'Duration', 'Details'].map((x) => h('th', { scope: 'col' }, x)))),
        body),
      h('nav', { class: 'pager', 'aria-label': 'Steps pages' }, count, more)]);
    return {
      el,
      show(big) {
        el.hidden = !big;
        if (big && !started) { started = true; load(true); }
      },
    };
  }

  function stepsTable(steps) {
    // for_each instances `name[i]` go under their step's row.
    const instances = new Map();
    const top = [];
    const names = new Set(steps.map((s) => s.step_name));
    for (const s of steps) {
      const m = /^(.*)\[(\d+)\]$/.exec(s.step_name);
      if (m && names.has(m[1])) {
        if (!instances.has(m[1])) instances.set(m[1], []);
        instances.get(m[1]).push(s);
      } else {
        top.push(s);
      }
    }
    const rows = [];
    for (const s of top) {
      rows.push(stepRow(s, false));
      const kids = (instances.get(s.step_name) || []).sort((a, b) => index(a) - index(b));
      for (const k of kids) rows.push(stepRow(k, true));
    }
    return h('table', { class: 'steps' },
      h('thead', {}, h('tr', {}, ['Step', 'Status', 'Worker', 'Started', 'Duration', 'Details'].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows));
  }

  function stepRow(s, instance) {
    return h('tr', { class: instance ? 'instance' : null, 'data-step': s.step_name },
      h('th', { scope: 'row' }, h('code', {}, s.step_name),
        h('div', { class: 'muted small' }, [s.action_type, s.action_name && s.action_name !== s.step_name.replace(/\[\d+\]$/, '') ? s.action_name : ''].filter(Boolean).join(' · '))),
      h('td', {}, status(s.status),
        s.reused_from ? [' ', h('span', { class: 'reused', title: `Reused from job ${s.reused_from}: not run again` }, 'reused')] : null),
      h('td', {}, s.worker_id ? link(path('workers', s.worker_id), h('code', { title: s.worker_id }, shortId(s.worker_id))) : ''),
      h('td', {}, time(s.started_at)),
      h('td', {}, duration(s.started_at, s.completed_at)),
      h('td', { class: 'details' },
        s.error_message ? h('pre', { class: 'error-text' }, s.error_message) : null,
        s.child_job_id ? h('div', {}, 'Child job ', jobLink(s.child_job_id)) : null,
        s.reused_from ? h('div', {}, 'Output reused from job ', jobLink(s.reused_from)) : null,
        s.action_type === 'approval' && s.status === 'waiting' ? approval(s) : null,
        s.output ? h('details', {}, h('summary', {}, 'Output'), json(s.output)) : null,
        Object.keys(s.input || {}).length ? h('details', {}, h('summary', {}, 'Input'), json(s.input)) : null));
  }

  function approval(s) {
    const base = path('api', 'jobs', id, 'steps', s.step_name, 'approve');
    const reasonID = `reason-${s.step_name.replace(/[^\w-]/g, '_')}`;
    const reason = h('input', { id: reasonID, type: 'text', placeholder: 'optional' });
    const approve = h('button', { type: 'button' }, 'Approve');
    const reject = h('button', { type: 'button', class: 'danger' }, 'Reject');
    approve.addEventListener('click', act(approve, () => api(base, { method: 'POST', body: { approved: true } })));
    reject.addEventListener('click', act(reject, () => api(base, { method: 'POST', body: { approved: false, rejection_reason: reason.value } })));
    return h('div', { class: 'approval' },
      s.message ? h('blockquote', {}, s.message) : h('p', {}, 'This step waits for approval.'),
      h('div', { class: 'actions' }, approve, reject,
        h('label', { for: reasonID }, 'Reason'), reason));
  }

  paint();
  ctx.show(head, facts, stepsBox, allSteps.el, logs.el);

  const timer = setInterval(() => {
    if (isLive(job.status)) refresh();
    else clearInterval(timer);
  }, POLL);
  signal.addEventListener('abort', () => clearInterval(timer));
  follow(id, logs, signal, { isLive: () => isLive(job.status), onEnd: refresh });
}

function index(s) {
  return Number(/\[(\d+)\]$/.exec(s.step_name)?.[1] ?? 0);
}
