// The log of a job: loaded in pieces (its last lines first, then the whole
// log read as it arrives, then the live WebSocket stream after it), kept
// in memory and drawn virtually: only the rows in sight are in the DOM, so
// a log of millions of lines scrolls like a short one. Filters by step and
// stream, a search that highlights its matches, downloads as text or JSONL,
// and a follow mode that pauses when the user scrolls up.
import { api, apiStream, logStreamURL } from './api.js';
import { h } from './dom.js';

const ALL = '';

// TAIL is how many of a log's last lines are fetched first, to show the
// end of a big log while the rest loads.
export const TAIL = 1000;

// Rows drawn above and below the visible ones.
const OVERSCAN = 20;
// Browsers cap an element's height (Chromium near 33.5 million px): a
// taller log maps its scroll position onto a sizer of this height.
const MAX_HEIGHT = 15e6;
// A loading loop yields to the page after this long (ms).
const SLICE = 12;

// ESC sequences: SGR colours, other CSI commands and OSC hyperlinks.
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?/g;

export function stripANSI(s) {
  return s.includes('\x1b') ? s.replace(ESCAPES, '') : s;
}

// entry decodes one JSONL line of the log; a line that is not JSON is shown
// as it is. Only a download keeps the line as written (raw).
function entry(raw, keep = false) {
  const l = decoded(raw);
  if (keep) l.raw = raw;
  return l;
}

function decoded(raw) {
  let l;
  try {
    l = JSON.parse(raw);
  } catch {
    l = null;
  }
  if (!l || typeof l !== 'object') return { ts: '', step: '', stream: 'stdout', line: raw, plain: stripANSI(raw) };
  const line = l.line === undefined || l.line === null ? '' : String(l.line);
  return { ts: l.ts || '', step: l.step || '', stream: l.stream || 'stdout', line, plain: stripANSI(line) };
}

const yieldToPage = () => new Promise((r) => setTimeout(r, 0));

// ansiNodes renders a line's ANSI colours with ansi_up, which escapes the
// text as HTML; its markup (spans with a class or style, links) is read
// back into DOM nodes rather than parsed as HTML, so the page's CSP (no
// inline styles in markup) holds and no line can make an element.
const MARKUP = /<span(?: style="([^"]*)")?(?: class="([^"]*)")?>([^<]*)<\/span>|<a href="([^"]*)">([^<]*)<\/a>|([^<]+)/g;
const ENTITIES = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#x27;': "'" };
const unescape = (s) => s.replace(/&(?:amp|lt|gt|quot|#x27);/g, (e) => ENTITIES[e]);
const STYLE_CLASS = { 'font-weight:bold': 'ansi-bold', 'font-style:italic': 'ansi-italic', 'text-decoration:underline': 'ansi-underline' };

function ansiNodes(line) {
  if (!line.includes('\x1b') || typeof window.AnsiUp !== 'function') return [line];
  // A fresh converter per line: a row drawn alone shows its own colours.
  const au = new window.AnsiUp();
  au.use_classes = true;
  const html = au.ansi_to_html(line);
  const nodes = [];
  for (const m of html.matchAll(MARKUP)) {
    if (m[6] !== undefined) {
      nodes.push(unescape(m[6]));
    } else if (m[4] !== undefined) {
      const text = unescape(m[5]);
      nodes.push(text ? h('a', { href: unescape(m[4]), rel: 'noopener noreferrer', target: '_blank' }, text) : '');
    } else {
      const span = h('span', { class: m[2] || null }, unescape(m[3]));
      for (const rule of (m[1] || '').split(';').filter(Boolean)) {
        const [prop, value] = rule.split(':');
        if (STYLE_CLASS[rule]) span.classList.add(STYLE_CLASS[rule]);
        // Truecolour: CSSOM, which the CSP allows (markup styles it does not).
        else if (prop === 'color') span.style.color = value;
        else if (prop === 'background-color') span.style.backgroundColor = value;
      }
      nodes.push(span);
    }
  }
  return nodes;
}

// mark wraps each occurrence of q (lower case) in el's text in a <mark>.
function mark(el, q) {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) texts.push(n);
  for (const t of texts) {
    const s = t.data;
    const low = s.toLowerCase();
    let i = low.indexOf(q);
    if (i < 0) continue;
    const parts = [];
    let from = 0;
    for (; i >= 0; i = low.indexOf(q, i + q.length)) {
      if (i > from) parts.push(s.slice(from, i));
      parts.push(h('mark', {}, s.slice(i, i + q.length)));
      from = i + q.length;
    }
    if (from < s.length) parts.push(s.slice(from));
    t.replaceWith(...parts);
  }
}

export function logView(jobID) {
  let lines = []; // every entry, in log order
  let shown = []; // indices into lines that pass the filters
  let hits = []; // positions in shown whose text holds the query
  let current = -1; // the hit last jumped to
  let query = '';
  let step = ALL;
  let stream = ALL;
  let following = true;
  let partial = '';
  let rowH = 21;
  let drawn = '';
  let scheduled = false;
  const steps = new Set();

  const rows = h('div', { class: 'log-rows' });
  const sizer = h('div', { class: 'log-sizer' }, rows);
  const out = h('div', { class: 'log', role: 'log', 'aria-label': 'Job log', tabindex: '0' }, sizer);
  const empty = h('p', { class: 'log-empty muted' }, 'No log lines yet.');
  const state = h('span', { class: 'muted log-state', 'aria-live': 'polite' }, 'connecting…');
  const count = h('span', { class: 'muted log-hits', 'aria-live': 'polite' });
  const resume = h('button', { type: 'button', class: 'secondary log-resume', hidden: true }, 'Resume following');
  const stepSelect = h('select', { id: 'log-step' }, h('option', { value: ALL }, 'All steps'));
  const streamSelect = h('select', { id: 'log-stream' },
    h('option', { value: ALL }, 'All streams'),
    h('option', { value: 'stdout' }, 'stdout'),
    h('option', { value: 'stderr' }, 'stderr'));
  const search = h('input', { id: 'log-search', type: 'search', placeholder: 'Search the log', autocomplete: 'off' });
  const prev = h('button', { type: 'button', class: 'secondary', 'aria-label': 'Previous match', title: 'Previous match' }, '↑');
  const next = h('button', { type: 'button', class: 'secondary', 'aria-label': 'Next match', title: 'Next match' }, '↓');
  const text = h('button', { type: 'button', class: 'secondary', id: 'log-download-text' }, 'Download text');
  const jsonl = h('button', { type: 'button', class: 'secondary', id: 'log-download-jsonl' }, 'Download JSONL');

  const passes = (l) => (step === ALL || l.step === step) && (stream === ALL || l.stream === stream);
  const holds = (l) => l.plain.toLowerCase().includes(query);

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(draw);
  }

  function refilter() {
    shown = [];
    for (let i = 0; i < lines.length; i++) if (passes(lines[i])) shown.push(i);
    research();
  }

  function research() {
    hits = [];
    current = -1;
    if (query) for (let p = 0; p < shown.length; p++) if (holds(lines[shown[p]])) hits.push(p);
    counted();
    drawn = '';
    schedule();
  }

  function counted() {
    if (!query) count.textContent = '';
    else if (!hits.length) count.textContent = 'no match';
    else if (current < 0) count.textContent = `${hits.length} matching line${hits.length === 1 ? '' : 's'}`;
    else count.textContent = `${current + 1} of ${hits.length}`;
  }

  function geometry() {
    const total = shown.length * rowH;
    const height = Math.min(total, MAX_HEIGHT);
    const view = out.clientHeight;
    const maxTop = Math.max(0, height - view);
    // The virtual offset of the top of the view.
    const scale = height < total && maxTop > 0 ? (total - view) / maxTop : 1;
    return { height, maxTop, scale, view };
  }

  function draw() {
    scheduled = false;
    empty.hidden = shown.length > 0;
    const g = geometry();
    sizer.style.height = `${g.height}px`;
    if (following && out.scrollTop < g.maxTop) out.scrollTop = g.maxTop;
    const top = Math.min(out.scrollTop, g.maxTop);
    const virtual = top * g.scale;
    const first = Math.max(0, Math.floor(virtual / rowH) - OVERSCAN);
    const last = Math.min(shown.length, Math.ceil((virtual + (g.view || 600)) / rowH) + OVERSCAN);
    rows.style.top = `${top - (virtual - first * rowH)}px`;
    const key = `${first}:${last}:${shown[first]}:${current}`;
    if (key === drawn) return;
    drawn = key;
    const hit = current >= 0 ? hits[current] : -1;
    const q = query;
    const els = [];
    for (let p = first; p < last; p++) {
      const l = lines[shown[p]];
      const body = h('span', { class: 'text' }, ansiNodes(l.line));
      if (q && l.plain.toLowerCase().includes(q)) mark(body, q);
      els.push(h('div', {
        class: ['line', l.stream === 'stderr' ? 'stderr' : null, l.step === '_server' ? 'server' : null, p === hit ? 'current' : null],
        'data-n': shown[p] + 1,
      },
      h('span', { class: 'ts' }, l.ts ? new Date(l.ts).toLocaleTimeString() : ''),
      h('span', { class: 'step' }, l.step),
      body));
    }
    rows.replaceChildren(...els);
    const measured = rows.firstChild?.getBoundingClientRect().height;
    if (measured && Math.abs(measured - rowH) > 0.5) {
      rowH = measured;
      drawn = '';
      schedule();
    }
  }

  // The user scrolling up pauses following; back at the end resumes it.
  // The end is the DOM's, which lines that came in since the last draw
  // have not moved yet.
  out.addEventListener('scroll', () => {
    following = out.scrollTop + out.clientHeight >= out.scrollHeight - rowH / 2;
    resume.hidden = following;
    schedule();
  });
  // A window turned or resized shows more or fewer rows.
  new ResizeObserver(() => {
    drawn = '';
    schedule();
  }).observe(out);
  resume.addEventListener('click', () => {
    following = true;
    resume.hidden = true;
    schedule();
    out.focus();
  });

  function jump(by) {
    if (!hits.length) return;
    current = (current + by + hits.length) % hits.length;
    // A match above the end pauses following (a log that fits has none).
    if (out.scrollHeight > out.clientHeight) {
      following = false;
      resume.hidden = false;
    }
    const g = geometry();
    const want = (hits[current] * rowH - g.view / 2 + rowH / 2) / g.scale;
    out.scrollTop = Math.max(0, Math.min(g.maxTop, want));
    counted();
    drawn = '';
    schedule();
  }
  prev.addEventListener('click', () => jump(-1));
  next.addEventListener('click', () => jump(1));

  let typing = null;
  search.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      query = search.value.toLowerCase();
      research();
    }, 150);
  });
  search.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter') return;
    e.preventDefault();
    clearTimeout(typing);
    const q = search.value.toLowerCase();
    if (q !== query) {
      query = q;
      research();
    }
    jump(e.shiftKey ? -1 : 1);
  });
  stepSelect.addEventListener('change', () => {
    step = stepSelect.value;
    refilter();
  });
  streamSelect.addEventListener('change', () => {
    stream = streamSelect.value;
    refilter();
  });

  function addStep(name) {
    if (!name || steps.has(name)) return;
    steps.add(name);
    stepSelect.append(h('option', { value: name }, name));
  }

  // push appends decoded entries.
  function push(entries) {
    for (const l of entries) {
      const i = lines.push(l) - 1;
      addStep(l.step);
      if (!passes(l)) continue;
      const p = shown.push(i) - 1;
      if (query && holds(l)) hits.push(p);
    }
    if (query) counted();
    schedule();
  }

  // set replaces every line (the whole log once loaded).
  function set(entries) {
    lines = [];
    shown = [];
    partial = '';
    push(entries);
    refilter();
  }

  // add appends a chunk of JSONL from the stream; it may end mid-line.
  function add(chunk) {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop();
    push(parts.filter((raw) => raw.trim()).map((raw) => entry(raw)));
  }

  // download saves the lines the filters select, fetched anew from the
  // API (one step's lines from its own endpoint), as a file.
  async function download(kind, button) {
    const base = `/api/jobs/${encodeURIComponent(jobID)}`;
    const url = step === ALL ? `${base}/logs` : `${base}/steps/${encodeURIComponent(step)}/logs`;
    button.disabled = true;
    const was = state.textContent;
    state.textContent = 'preparing the download…';
    try {
      const r = await api(url);
      const picked = String(r.logs || '').split('\n').filter((raw) => raw.trim()).map((raw) => entry(raw, true))
        .filter((l) => stream === ALL || l.stream === stream);
      const body = kind === 'jsonl'
        ? picked.map((l) => l.raw).join('\n')
        : picked.map((l) => (step === ALL && l.step ? `[${l.step}] ${l.plain}` : l.plain)).join('\n');
      const name = `job-${jobID}${step === ALL ? '' : `-${step}`}${stream === ALL ? '' : `-${stream}`}.${kind === 'jsonl' ? 'jsonl' : 'log'}`;
      const blob = new Blob([body ? `${body}\n` : ''], { type: kind === 'jsonl' ? 'application/x-ndjson' : 'text/plain' });
      const href = URL.createObjectURL(blob);
      const a = h('a', { href, download: name, hidden: true }, name);
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(href), 60000);
      state.textContent = was;
    } catch (err) {
      state.textContent = `download failed: ${err.message}`;
    } finally {
      button.disabled = false;
    }
  }
  text.addEventListener('click', () => download('text', text));
  jsonl.addEventListener('click', () => download('jsonl', jsonl));

  const el = h('section', { class: 'logs', 'aria-labelledby': 'log-h' },
    h('div', { class: 'log-head' }, h('h2', { id: 'log-h' }, 'Log'), state),
    h('div', { class: 'log-tools' },
      h('span', { class: 'log-field' }, h('label', { for: 'log-step' }, 'Step'), stepSelect),
      h('span', { class: 'log-field' }, h('label', { for: 'log-stream' }, 'Stream'), streamSelect),
      h('span', { class: 'log-field' }, h('label', { for: 'log-search' }, 'Search'), search, prev, next, count),
      h('span', { class: 'log-field' }, text, jsonl)),
    h('div', { class: 'log-frame' }, out, empty, resume));
  return {
    el, add, set, addStep,
    count: () => lines.length,
    status: (s) => { state.textContent = s; },
    resetPartial: () => { partial = ''; },
  };
}

// readLog fetches GET url (a job's log answer) and hands its lines to
// onLines in batches as the body arrives, yielding to the page between
// them; it returns the answer's `next`. The answer is {"logs":"<JSONL as
// a JSON string>","lines":n,"next":m}: the string is cut at each escaped
// newline without waiting for its end.
export async function readLog(url, signal, onLines) {
  const r = await apiStream(url, { signal });
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  const OPEN = '{"logs":"';
  let buf = '';
  let opened = false;
  let batch = [];
  let since = performance.now();
  const flush = async () => {
    if (batch.length) onLines(batch);
    batch = [];
    if (performance.now() - since > SLICE) {
      await yieldToPage();
      since = performance.now();
    }
  };
  const line = (seg) => batch.push(entry(JSON.parse(`"${seg}"`)));
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    if (!opened) {
      if (buf.length < OPEN.length) continue;
      if (!buf.startsWith(OPEN)) throw new Error('the log answer is not {"logs": ...}');
      buf = buf.slice(OPEN.length);
      opened = true;
    }
    let from = 0;
    for (let i = buf.indexOf('\\n'); i >= 0; i = buf.indexOf('\\n', i + 1)) {
      // An escaped backslash before it makes it a backslash and an "n".
      let k = 0;
      while (i - 1 - k >= from && buf[i - 1 - k] === '\\') k++;
      if (k % 2 === 1) continue;
      line(buf.slice(from, i));
      from = i + 2;
      i = from - 1;
      if (batch.length >= 2000) await flush();
    }
    buf = buf.slice(from);
    await flush();
  }
  // What is left: a last line without a newline (an old log file), then
  // the answer's closing fields.
  const end = buf.lastIndexOf('","lines":');
  if (end < 0) throw new Error('the log answer ended early');
  if (end > 0) line(buf.slice(0, end));
  await flush();
  return JSON.parse(`{${buf.slice(end + 2)}`).next;
}

// follow loads a job's log into the view, then streams its new lines until
// the server closes the stream at the job's end or signal aborts. isLive
// says whether a dropped stream should be reopened; onEnd runs when it has
// closed for good.
export async function follow(jobID, view, signal, { isLive, onEnd }) {
  const base = `/api/jobs/${encodeURIComponent(jobID)}/logs`;
  let next = 0;
  try {
    // The end first, so a big log shows at once...
    view.status('loading…');
    const t = await api(`${base}?tail=${TAIL}`, { signal });
    const tail = String(t.logs || '').split('\n').filter((raw) => raw.trim()).map((raw) => entry(raw));
    view.set(tail);
    next = t.next;
    if (t.next > tail.length) {
      // ...then all of it, read in pieces while the page stays usable.
      const all = [];
      view.status(`loading ${t.next.toLocaleString()} lines…`);
      next = await readLog(base, signal, (batch) => {
        all.push(...batch);
        view.status(`loading… ${Math.min(99, Math.floor((all.length / t.next) * 100))}%`);
      });
      view.set(all);
    }
    view.status(`${view.count().toLocaleString()} lines`);
  } catch (err) {
    if (signal.aborted) return;
    view.status(`could not load the log: ${err.message}`);
  }
  if (signal.aborted) return;
  let ws = null;
  let retries = 0;
  const open = () => {
    if (signal.aborted) return;
    // Each connection starts after the lines the view holds.
    view.resetPartial();
    const conn = new WebSocket(logStreamURL(jobID, Math.max(next, view.count())));
    ws = conn;
    ws.onopen = () => view.status('live');
    ws.onmessage = (e) => {
      retries = 0;
      view.add(e.data);
    };
    ws.onclose = (e) => {
      if (signal.aborted) return;
      // 1013: this viewer fell behind; reconnecting gives a fresh backfill.
      // 4401 and 4403 are for good: the login or key is gone, or the job is
      // no longer visible to you.
      const final = e.code === 1000 || e.code === 4401 || e.code === 4403;
      if ((e.code === 1013 || (!final && isLive())) && retries < 5) {
        retries++;
        view.status('reconnecting…');
        setTimeout(open, 500 * retries);
        return;
      }
      view.status(
        e.code === 1000
          ? `complete · ${view.count().toLocaleString()} lines`
          : `stream closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`,
      );
      onEnd();
    };
  };
  signal.addEventListener('abort', () => ws?.close());
  open();
}
