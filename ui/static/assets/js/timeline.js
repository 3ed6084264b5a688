// A job's timeline (a Gantt chart): one row per flow step with its queue
// wait (ready → started) and its run (started → ended, or now while it
// runs), on one scale from the job's creation to its end, or to now.
import { duration } from './format.js';
import { splitSteps, statusText, svg } from './graph.js';

const LABEL = 180; // the step names' column
const CHART = 660; // the bars'
const TAIL = 90; // room for the run time after the longest bar
const ROW = 24;
const AXIS = 22;

const at = (ts) => (ts ? new Date(ts).getTime() : null);
// length says a span of milliseconds as format's durations do.
const length = (ms) => duration(new Date(0), new Date(ms));

export function timeline(job, now = Date.now()) {
  const { top } = splitSteps(job.steps);
  const t0 = at(job.created_at);
  let t1 = at(job.completed_at) ?? now;
  for (const s of top) {
    const end = at(s.completed_at) ?? (s.started_at || s.ready_at ? now : null);
    if (end) t1 = Math.max(t1, end);
  }
  const span = Math.max(t1 - t0, 1000);
  const x = (ms) => LABEL + (Math.min(Math.max(ms, t0), t1) - t0) / span * CHART;
  const width = LABEL + CHART + TAIL;
  const height = AXIS + top.length * ROW + 4;

  // Gridlines at a round step: 1, 2 or 5 times a power of ten, at most 6.
  let step = 10 ** Math.floor(Math.log10(span / 6));
  for (const k of [1, 2, 5, 10]) {
    if (span / (step * k) <= 6) {
      step *= k;
      break;
    }
  }
  const ticks = [];
  for (let ms = 0; ms <= span; ms += step) ticks.push(ms);
  const axis = ticks.map((ms, i) => {
    const gx = LABEL + (ms / span) * CHART;
    return svg('g', { class: 'tick' },
      svg('line', { x1: gx, x2: gx, y1: AXIS - 4, y2: height }),
      svg('text', { x: gx, y: 13, 'text-anchor': i === 0 ? 'start' : 'middle' }, i === 0 ? '0' : `+${length(ms)}`));
  });

  const rows = top.map((s, i) => {
    const y = AXIS + i * ROW;
    const ready = at(s.ready_at);
    const start = at(s.started_at);
    const end = at(s.completed_at) ?? (start ? now : null);
    const waitEnd = start ?? (ready && s.status === 'ready' ? now : null);
    const parts = [];
    if (ready && waitEnd) {
      parts.push(svg('rect', { class: 'wait', x: x(ready), y: y + 8, width: Math.max(1, x(waitEnd) - x(ready)), height: 6 }));
    }
    if (start) {
      const w = Math.max(2, x(end) - x(start));
      parts.push(svg('rect', { class: 'run', x: x(start), y: y + 4, width: w, height: 14, rx: 3 }));
      parts.push(svg('text', { class: 'dur', x: x(start) + w + 5, y: y + 15 }, duration(s.started_at, s.completed_at)));
    }
    const waited = ready && waitEnd ? duration(s.ready_at, s.started_at) : '';
    const ran = start ? duration(s.started_at, s.completed_at) : '';
    const said = [statusText(s), waited ? `waited ${waited}` : '', ran ? `ran ${ran}` : ''].filter(Boolean).join(', ');
    return svg('g', {
      class: `row status-${s.status}`, 'data-step': s.step_name, 'data-status': s.status,
      'data-wait-ms': ready && waitEnd ? waitEnd - ready : null,
      'data-run-ms': start ? end - start : null,
    },
    svg('title', {}, `${s.step_name}: ${said}`),
    svg('rect', { class: 'band', x: 0, y, width, height: ROW }),
    svg('text', { class: 'label', x: 4, y: y + 16 }, s.step_name.length > 24 ? `${s.step_name.slice(0, 23)}…` : s.step_name),
    parts);
  });

  return svg('svg', {
    class: 'gantt', viewBox: `0 0 ${width} ${height}`, width, height,
    role: 'img', 'aria-label': `Timeline of ${top.length} steps over ${length(span)}`,
  }, svg('g', { class: 'axis' }, axis), rows);
}
