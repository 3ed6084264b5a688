// One job: a panel naming its failed steps (their errors and last log
// lines), the approvals that wait with their buttons, status, input and
// output, the graph of its steps (coloured by status, for_each steps
// counting their instances), a timeline of their waits and runs, the steps
// table (child jobs linked), the live log, a Cancel button while it runs,
// and Re-run buttons (the whole job, or, for a failed or cancelled one, only
// the steps that did not complete). Running durations tick every second.
// A live job is followed through its events (GET /api/events?job_id=):
// each job or step change fetches the job again, not a poll.
import { api } from '../api.js';
import { append, h, link, path, replace } from '../dom.js';
import { copyButton, duration, isLive, jobLink, jobStatus, json, shortId, status, taskLink, time } from '../format.js';
import { counts, countsText, graph, splitSteps, tick, ticking } from '../graph.js';
import { followJobs } from '../live.js';
import { follow, logView } from '../logview.js';
import { runOnly } from '../permission.js';
import { timeline } from '../timeline.js';

// REFETCH_GAP is the least time between two fetches of the job that its
// events ask for: a for_each of thousands of instances sends thousands.
const REFETCH_GAP = 250;

// SAFETY is how often a live job is fetched even without events: should a
// proxy hold the event stream's frames back while passing its pings (the
// stream looks open, but is silent), the page still catches up.
const SAFETY = 30000;

// FAILED_LINES is how much of a failed step's log its panel shows.
const FAILED_LINES = 20;

// INSTANCES is how many for_each instances a page of the list shows.
const INSTANCES = 10;

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
  const failures = h('section', { id: 'failures', class: 'panel failures', 'aria-labelledby': 'failures-h', hidden: true });
  const approvals = h('section', { id: 'approvals', class: 'panel approvals', 'aria-labelledby': 'approvals-h', hidden: true });
  const graphBox = h('div', { class: 'graph' });
  const instancesBox = h('div', { class: 'instances-box' });
  const timelineBox = h('div', { class: 'timeline' });
  const graphSection = h('section', { 'aria-labelledby': 'graph-h' }, h('h2', { id: 'graph-h' }, 'Graph'), graphBox, instancesBox);
  const timelineSection = h('section', { 'aria-labelledby': 'timeline-h' },
    h('h2', { id: 'timeline-h' }, 'Timeline'),
    h('p', { class: 'legend muted small' }, h('span', { class: 'key wait' }), ' waiting for a worker ', h('span', { class: 'key run' }), ' running'),
    timelineBox);
  // Open for_each steps and the page of instances each shows.
  const expanded = new Set();
  const pages = new Map();
  // The last lines of each failed step's log, by step: fetched once the
  // step has failed, and again when the job ends (late lines).
  const tails = new Map();
  const actionError = h('p', { class: 'error', role: 'alert' });
  const logs = logView(id);
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
        h('h1', {}, `${job.task_name} `, h('code', { class: 'muted', title: job.job_id }, shortId(job.job_id)), ' ', copyButton(job.job_id, 'job id')),
        h('span', { id: 'job-status' }, jobStatus(job)),
        runOnly(job, h('div', { class: 'actions' }, cancel, rerun, rerunFailed), 'cancel or re-run this job')),
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
    paintFailures();
    paintApprovals();
    paintGraph();
    replace(timelineBox, timeline(job));
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
    // A new filter starts a new list: the pages still on their way for
    // the old one (their generation) are dropped, not appended to it.
    let generation = 0;
    const load = async (reset) => {
      if (reset) { generation++; cursor = null; shown = 0; body.replaceChildren(); }
      const mine = generation;
      const q = new URLSearchParams({ limit: STEP_PAGE });
      if (filter.value) q.set('status', filter.value);
      if (cursor) q.set('cursor', cursor);
      more.disabled = true;
      try {
        const page = await api(`${path('api', 'jobs', id, 'steps')}?${q}`, { signal });
        if (mine !== generation) return;
        for (const st of page.items) body.append(stepRow(st, /\[\d+\]$/.test(st.step_name)));
        shown += page.items.length;
        cursor = page.next_cursor;
        count.textContent = `${shown} of ${page.total}`;
        more.hidden = !cursor;
      } catch (err) {
        if (!signal.aborted && mine === generation) actionError.textContent = err.message;
      }
      if (mine === generation) more.disabled = false;
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

  function paintGraph() {
    const toggle = (name) => {
      if (expanded.has(name)) expanded.delete(name);
      else expanded.add(name);
      paintGraph();
      graphBox.querySelector(`.node.foreach[data-step="${CSS.escape(name)}"]`)?.focus();
    };
    replace(graphBox, graph(job.steps, { expanded, onToggle: toggle }));
    const { top, instances } = splitSteps(job.steps);
    replace(instancesBox, top.filter((s) => expanded.has(s.step_name) && instances.has(s.step_name))
      .map((s) => instanceList(s, instances.get(s.step_name))));
  }

  // instanceList is a page of a for_each step's instances.
  function instanceList(parent, kids) {
    const name = parent.step_name;
    const pageCount = Math.max(1, Math.ceil(kids.length / INSTANCES));
    const pg = Math.min(pages.get(name) || 0, pageCount - 1);
    const shown = kids.slice(pg * INSTANCES, (pg + 1) * INSTANCES);
    const go = (to) => () => {
      pages.set(name, to);
      paintGraph();
    };
    const prev = h('button', { type: 'button', class: 'secondary prev', disabled: pg === 0, onclick: go(pg - 1) }, 'Previous');
    const next = h('button', { type: 'button', class: 'secondary next', disabled: pg >= pageCount - 1, onclick: go(pg + 1) }, 'Next');
    const headID = `instances-h-${name.replace(/[^\w-]/g, '_')}`;
    return h('section', { class: 'instances', 'data-step': name, 'aria-labelledby': headID },
      h('h3', { id: headID }, h('code', {}, name), ` — ${countsText(counts(kids))}`),
      h('table', {},
        h('thead', {}, h('tr', {}, ['Instance', 'Status', 'Duration', 'Error'].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {}, shown.map((k) => h('tr', { 'data-step': k.step_name },
          h('th', { scope: 'row' }, h('code', {}, k.step_name)),
          h('td', {}, status(k.status)),
          h('td', {}, ticking(h('span'), k.started_at, k.completed_at)),
          h('td', {}, k.error_message ? h('pre', { class: 'error-text' }, k.error_message) : ''))))),
      h('div', { class: 'pager' }, prev,
        h('span', { class: 'range' }, `${pg * INSTANCES + 1}–${pg * INSTANCES + shown.length} of ${kids.length}`), next));
  }

  // paintFailures names the failed steps with their errors and last log
  // lines, fetching the lines it does not have yet.
  function paintFailures() {
    // A for_each step's own record logs nothing: its failed instances
    // have the lines, and come first.
    const { instances } = splitSteps(job.steps);
    const failed = job.steps.filter((s) => s.status === 'failed')
      .sort((a, b) => instances.has(a.step_name) - instances.has(b.step_name));
    failures.hidden = failed.length === 0;
    if (!failed.length) return;
    for (const s of failed) {
      if (instances.has(s.step_name)) continue;
      const key = `${s.step_name}\u0000${isLive(job.status)}`;
      if (tails.get(s.step_name)?.key === key) continue;
      tails.set(s.step_name, { key, lines: tails.get(s.step_name)?.lines ?? null });
      api(`${path('api', 'jobs', id, 'steps', s.step_name, 'logs')}?tail=${FAILED_LINES}`, { signal })
        .then((r) => {
          const lines = String(r.logs || '').split('\n').filter((l) => l.trim()).map((l) => {
            try {
              return JSON.parse(l).line;
            } catch {
              return l;
            }
          });
          tails.set(s.step_name, { key, lines });
          paintFailures();
        })
        .catch((err) => {
          if (!signal.aborted) tails.set(s.step_name, { key, lines: [`(could not load the log: ${err.message})`] });
        });
    }
    replace(failures,
      h('h2', { id: 'failures-h' }, failed.length === 1 ? '1 step failed' : `${failed.length} steps failed`),
      failed.map((s) => {
        const lines = tails.get(s.step_name)?.lines;
        let log;
        if (instances.has(s.step_name)) log = null;
        else if (!lines) log = h('p', { class: 'muted small' }, 'Loading its log…');
        else if (!lines.length) log = h('p', { class: 'muted small' }, 'It wrote no log lines.');
        else log = [h('p', { class: 'muted small' }, lines.length === 1 ? 'Its last log line:' : `Its last ${lines.length} log lines:`), h('pre', { class: 'log-tail' }, lines.join('\n'))];
        return h('div', { class: 'failure', 'data-step': s.step_name },
          h('h3', {}, h('code', {}, s.step_name)),
          s.error_message ? h('pre', { class: 'error-text' }, s.error_message) : h('p', { class: 'muted' }, 'No error message.'),
          log);
      }));
    // The last lines matter most: show the end of each tail.
    for (const pre of failures.querySelectorAll('pre.log-tail')) pre.scrollTop = pre.scrollHeight;
  }

  function paintApprovals() {
    const waiting = job.steps.filter((s) => s.action_type === 'approval' && s.status === 'waiting');
    approvals.hidden = waiting.length === 0;
    replace(approvals, waiting.length ? h('h2', { id: 'approvals-h' }, 'Waiting for approval') : null, waiting.map(approval));
  }

  function stepsTable(steps) {
    // for_each instances `name[i]` go under their step's row.
    const { top, instances } = splitSteps(steps);
    const rows = [];
    for (const s of top) {
      rows.push(stepRow(s, false));
      for (const k of instances.get(s.step_name) || []) rows.push(stepRow(k, true));
    }
    return h('table', { class: 'steps' },
      h('thead', {}, h('tr', {}, ['Step', 'Status', 'Worker', 'Started', 'Duration', 'Details'].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows));
  }

  function stepRow(s, instance) {
    return h('tr', { class: instance ? 'instance' : null, 'data-step': s.step_name },
      h('th', { scope: 'row' }, h('code', {}, s.step_name),
        h('div', { class: 'muted small' }, [s.action_type, s.action_name && s.action_name !== s.step_name.replace(/\[\d+\]$/, '') ? s.action_name : ''].filter(Boolean).join(' · '))),
      h('td', {}, status(s.status), s.status === 'waiting' && s.action_type === 'approval' ? h('div', { class: 'muted small' }, 'for approval, above') : null,
        s.reused_from ? [' ', h('span', { class: 'reused', title: `Reused from job ${s.reused_from}: not run again` }, 'reused')] : null,
        s.attempt > 1 ? [' ', h('span', { class: 'attempt', title: 'This step was retried after a failed attempt' }, `attempt ${s.attempt}`)] : null,
        s.retry_at ? h('div', { class: 'muted small retry-at' }, 'retry at ', time(s.retry_at)) : null),
      h('td', {}, s.worker_id ? link(path('workers', s.worker_id), h('code', { title: s.worker_id }, shortId(s.worker_id))) : ''),
      h('td', {}, time(s.started_at)),
      h('td', {}, ticking(h('span'), s.started_at, s.completed_at)),
      h('td', { class: 'details' },
        s.error_message ? h('pre', { class: 'error-text' }, s.error_message) : null,
        s.child_job_id ? h('div', {}, 'Child job ', jobLink(s.child_job_id)) : null,
        s.reused_from ? h('div', {}, 'Output reused from job ', jobLink(s.reused_from)) : null,
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
    return h('div', { class: 'approval', 'data-step': s.step_name },
      h('h3', {}, h('code', {}, s.step_name), ' ', status('waiting'), ' ', h('span', { class: 'muted small' }, 'for ', ticking(h('span'), s.started_at))),
      s.message ? h('blockquote', {}, s.message) : h('p', {}, 'This step waits for approval.'),
      runOnly(job, h('div', { class: 'actions' }, approve, reject,
        h('label', { for: reasonID }, 'Reason'), reason), 'approve or reject this step'));
  }

  paint();
  ctx.show(head, failures, approvals, graphSection, timelineSection, facts, stepsBox, allSteps.el, logs.el);

  // Each event of the job or its steps asks for the job again: at most one
  // fetch at a time, REFETCH_GAP apart; events that come meanwhile make
  // one more. A stream that was lost and is back (resync) may have missed
  // events: the same.
  const live = new AbortController();
  signal.addEventListener('abort', () => live.abort());
  let pending = null;
  let fetching = false;
  let again = false;
  let last = 0;
  const fetchAgain = async () => {
    pending = null;
    fetching = true;
    last = Date.now();
    await refresh();
    fetching = false;
    if (!isLive(job.status)) live.abort();
    else if (again) soon();
  };
  const soon = () => {
    if (fetching) {
      again = true;
      return;
    }
    again = false;
    if (pending === null) pending = setTimeout(fetchAgain, Math.max(0, last + REFETCH_GAP - Date.now()));
  };
  if (isLive(job.status)) {
    // ready: what changed between the first fetch and the subscription.
    let subscribed = false;
    followJobs(live.signal, {
      jobID: id,
      onJob: soon,
      onStep: soon,
      onResync: soon,
      onReady: () => {
        if (!subscribed) soon();
        subscribed = true;
      },
    });
  }
  const timer = setInterval(() => {
    if (isLive(job.status)) refresh();
    else clearInterval(timer);
  }, SAFETY);
  // Running durations and the timeline's bars advance every second
  // between fetches, from the times already known.
  const clock = setInterval(() => {
    if (!isLive(job.status)) return;
    tick(document.getElementById('main'));
    replace(timelineBox, timeline(job));
  }, 1000);
  signal.addEventListener('abort', () => {
    clearInterval(timer);
    clearInterval(clock);
    clearTimeout(pending);
  });
  follow(id, logs, signal, { isLive: () => isLive(job.status), onEnd: refresh });
}
