// The live log of a job: JSONL frames from the WebSocket stream, shown one
// line per entry and filtered by step.
import { api, logStreamURL } from './api.js';
import { h, replace } from './dom.js';

const ALL = '';

// TAIL is how many lines of a job's log the page loads first; a longer
// log offers to load the rest.
export const TAIL = 1000;

export function logView() {
  const lines = [];
  let filter = ALL;
  let partial = '';
  const steps = new Set();
  const out = h('div', { class: 'log', role: 'log', 'aria-label': 'Job log', tabindex: '0' });
  const state = h('span', { class: 'muted', 'aria-live': 'polite' }, 'connecting…');
  const select = h('select', {
    id: 'log-step',
    onchange() {
      filter = select.value;
      replace(out, lines.filter(shown).map(row));
    },
  }, h('option', { value: ALL }, 'All steps'));

  const shown = (l) => filter === ALL || l.step === filter;

  function addStep(name) {
    if (!name || steps.has(name)) return;
    steps.add(name);
    select.append(h('option', { value: name }, name));
  }

  function row(l) {
    return h('div', { class: ['line', l.stream === 'stderr' ? 'stderr' : null, l.step === '_server' ? 'server' : null] },
      h('span', { class: 'ts' }, l.ts ? new Date(l.ts).toLocaleTimeString() : ''),
      h('span', { class: 'step' }, l.step || ''),
      h('span', { class: 'text' }, l.line));
  }

  // add appends a chunk of JSONL; a chunk may end mid-line.
  function add(chunk) {
    const text = partial + chunk;
    const parts = text.split('\n');
    partial = parts.pop();
    const stick = out.scrollTop + out.clientHeight >= out.scrollHeight - 8;
    for (const raw of parts) {
      if (!raw.trim()) continue;
      let l;
      try {
        l = JSON.parse(raw);
      } catch {
        l = { line: raw, stream: 'stdout', step: '' };
      }
      lines.push(l);
      addStep(l.step);
      if (shown(l)) out.append(row(l));
    }
    if (stick) out.scrollTop = out.scrollHeight;
  }

  function reset() {
    lines.length = 0;
    partial = '';
    replace(out);
    cut.replaceChildren();
  }

  // cutAt says only the last n lines are shown and offers the rest.
  function cutAt(n, showAll) {
    cut.replaceChildren(`Showing the last ${n} lines. `,
      h('button', { type: 'button', class: 'link', onclick: showAll }, 'Show the whole log'));
  }

  const cut = h('p', { class: 'muted log-cut', 'aria-live': 'polite' });

  const el = h('section', { class: 'logs', 'aria-labelledby': 'log-h' },
    h('div', { class: 'log-head' },
      h('h2', { id: 'log-h' }, 'Log'),
      h('label', { for: 'log-step' }, 'Step'), select, state),
    cut, out);
  return { el, add, reset, addStep, cutAt, status: (s) => { state.textContent = s; } };
}

// follow streams a job's log into the view until the server closes the
// stream at the job's end or signal aborts. isLive says whether a dropped
// stream should be reopened; onEnd runs when it has closed for good.
export function follow(jobID, view, signal, { isLive, onEnd }) {
  let ws = null;
  let retries = 0;
  // The first view is the log's last TAIL lines; the whole log on request.
  let tail = TAIL;
  const open = () => {
    if (signal.aborted) return;
    // Every connection starts with the log so far (its tail at first).
    view.reset();
    const conn = new WebSocket(logStreamURL(jobID, tail));
    ws = conn;
    if (tail > 0) {
      // `next` of the last line is the log's length: say when the tail
      // leaves lines out.
      api(`/api/jobs/${encodeURIComponent(jobID)}/logs?tail=1`, { signal })
        .then(({ next }) => {
          if (ws !== conn || next <= tail) return;
          view.cutAt(tail, () => {
            tail = 0;
            conn.onclose = null;
            conn.close();
            open();
          });
        })
        .catch(() => {});
    }
    ws.onopen = () => view.status('live');
    ws.onmessage = (e) => {
      retries = 0;
      view.add(e.data);
    };
    ws.onclose = (e) => {
      if (signal.aborted) return;
      // 1013: this viewer fell behind; reconnecting gives a fresh backfill.
      if ((e.code === 1013 || (e.code !== 1000 && isLive())) && retries < 5) {
        retries++;
        view.status('reconnecting…');
        setTimeout(open, 500 * retries);
        return;
      }
      view.status(e.code === 1000 ? 'complete' : `stream closed (${e.code})`);
      onEnd();
    };
  };
  signal.addEventListener('abort', () => ws?.close());
  open();
}
