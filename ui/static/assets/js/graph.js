// A job's steps as a graph: one node per flow step, coloured by its status,
// an edge for each `depends_on`, laid out left to right by dagre (the
// classic script vendor/dagre.min.js defines the global). A for_each step is
// one node counting its instances; choosing it lists them below the graph.
import { h } from './dom.js';
import { duration } from './format.js';

const NS = 'http://www.w3.org/2000/svg';

// CHAR is the width of one character of the node's monospace text at its
// font size: nodes are sized from their longest line.
const CHAR = 7.8;

// svg builds an SVG element; like h, every value is an attribute or text.
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// splitSteps separates the flow steps from the for_each instances
// (`name[i]` under a step `name`), which it returns by step, in index order.
export function splitSteps(steps) {
  const names = new Set(steps.map((s) => s.step_name));
  const top = [];
  const instances = new Map();
  for (const s of steps) {
    const m = /^(.*)\[(\d+)\]$/.exec(s.step_name);
    if (m && names.has(m[1])) {
      if (!instances.has(m[1])) instances.set(m[1], []);
      instances.get(m[1]).push(s);
    } else {
      top.push(s);
    }
  }
  for (const list of instances.values()) list.sort((a, b) => instanceIndex(a) - instanceIndex(b));
  return { top, instances };
}

export function instanceIndex(s) {
  return Number(/\[(\d+)\]$/.exec(s.step_name)?.[1] ?? 0);
}

// statusText is how a node or row names a status: an approval that waits
// waits for a person, it does not run.
export function statusText(s) {
  if (s.status === 'waiting' && s.action_type === 'approval') return 'waiting for approval';
  return s.status;
}

// ticking marks el to show the time from `from` to `to`, or to now while
// `to` is empty: tick() advances it every second without a fetch.
export function ticking(el, from, to) {
  if (!from) return el;
  el.setAttribute('data-tick-from', from);
  if (to) el.setAttribute('data-tick-to', to);
  el.textContent = duration(from, to);
  return el;
}

// tick brings every running duration under root up to now.
export function tick(root) {
  for (const el of root.querySelectorAll('[data-tick-from]:not([data-tick-to])')) {
    el.textContent = duration(el.getAttribute('data-tick-from'));
  }
}

// counts sums up a for_each step's instances.
export function counts(kids) {
  const c = { total: kids.length, done: 0, failed: 0, running: 0 };
  for (const k of kids) {
    if (k.status === 'completed') c.done++;
    else if (k.status === 'failed') c.failed++;
    else if (k.status === 'running' || k.status === 'ready') c.running++;
  }
  return c;
}

export function countsText(c) {
  if (!c.total) return 'no instances yet';
  return [`${c.done}/${c.total} done`, c.failed ? `${c.failed} failed` : '', c.running ? `${c.running} running` : '']
    .filter(Boolean).join(' · ');
}

// graph draws the flow steps. onToggle(name) runs when a for_each node is
// chosen; expanded says which are open.
export function graph(steps, { expanded = new Set(), onToggle = () => {} } = {}) {
  const dagre = globalThis.dagre;
  const { top, instances } = splitSteps(steps);
  if (!dagre) return h('p', { class: 'muted' }, 'The graph needs vendor/dagre.min.js, which did not load.');
  if (!top.length) return h('p', { class: 'muted' }, 'No steps.');
  const known = new Set(top.map((s) => s.step_name));
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 18, ranksep: 48, marginx: 6, marginy: 6 });
  g.setDefaultEdgeLabel(() => ({}));
  const nodes = new Map();
  for (const s of top) {
    // A for_each step shows as one once it has expanded into instances.
    const forEach = instances.has(s.step_name);
    const kids = instances.get(s.step_name) || [];
    const lines = [s.step_name, `${statusText(s)} · 00 min 00 s`];
    if (forEach) lines.push(`${countsText(counts(kids))} ▾`);
    const width = Math.max(130, Math.ceil(Math.max(...lines.map((l) => l.length)) * CHAR) + 24);
    const height = forEach ? 62 : 46;
    nodes.set(s.step_name, { s, kids, forEach });
    g.setNode(s.step_name, { width, height });
  }
  for (const s of top) {
    for (const dep of s.depends_on || []) if (known.has(dep)) g.setEdge(dep, s.step_name);
  }
  dagre.layout(g);

  const edges = g.edges().map((e) => {
    const pts = g.edge(e).points;
    const d = pts.map((p, i) => `${i ? 'L' : 'M'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ');
    return svg('path', { class: 'edge', d, 'data-from': e.v, 'data-to': e.w, 'marker-end': 'url(#arrow)' });
  });
  const drawn = [...nodes.values()].map(({ s, kids, forEach }) => {
    const n = g.node(s.step_name);
    const x = n.x - n.width / 2;
    const y = n.y - n.height / 2;
    const time = ticking(svg('tspan', { class: 'time' }), s.started_at, s.completed_at);
    const open = expanded.has(s.step_name);
    const c = counts(kids);
    const el = svg('g', {
      class: ['node', `status-${s.status}`, forEach ? 'foreach' : null].filter(Boolean).join(' '),
      transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
      'data-step': s.step_name,
      'data-status': s.status,
      ...(forEach ? {
        role: 'button', tabindex: '0', 'aria-expanded': String(open),
        'aria-label': `${s.step_name}: ${statusText(s)}, ${countsText(c)}; show instances`,
        'data-done': c.done, 'data-total': c.total, 'data-failed': c.failed,
      } : {}),
    },
    svg('title', {}, `${s.step_name}: ${statusText(s)}`),
    svg('rect', { class: 'box', width: n.width, height: n.height, rx: 6 }),
    svg('text', { class: 'name', x: 12, y: 19 }, s.step_name),
    svg('text', { class: 'meta', x: 12, y: 37 }, statusText(s), s.started_at ? [' · ', time] : null),
    forEach ? svg('text', { class: 'counts', x: 12, y: 54 }, `${countsText(c)} ${open ? '▴' : '▾'}`) : null);
    if (forEach) {
      el.addEventListener('click', () => onToggle(s.step_name));
      el.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          onToggle(s.step_name);
        }
      });
    }
    return el;
  });
  const { width, height } = g.graph();
  return svg('svg', {
    class: 'dag', width: Math.ceil(width), height: Math.ceil(height),
    viewBox: `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`, role: 'group', 'aria-label': 'Steps and their dependencies',
  },
  svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }))),
  svg('g', { class: 'edges' }, edges),
  svg('g', { class: 'nodes' }, drawn));
}
