// Audit: the trail of who did what (admins), oldest first, filtered by
// actor, action and target, a page at a time by cursor.
import { api } from '../api.js';
import { h, link } from '../dom.js';
import { table, time } from '../format.js';

const PAGE = 100;
const FILTERS = ['actor', 'action', 'target'];

export async function auditPage(ctx) {
  document.title = 'Audit · appliance';
  const q = new URLSearchParams();
  for (const f of [...FILTERS, 'cursor']) {
    const v = ctx.query.get(f);
    if (v) q.set(f, v);
  }
  q.set('limit', String(PAGE));
  const page = await api(`/api/audit?${q}`, { signal: ctx.signal });
  const to = (changes) => {
    const next = new URLSearchParams(ctx.query);
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v); else next.delete(k);
    }
    return `/audit?${next}`;
  };
  const form = h('form', { class: 'filters', role: 'search' },
    ...FILTERS.map((f) => h('label', {}, `${f[0].toUpperCase()}${f.slice(1)} `,
      h('input', { name: f, value: ctx.query.get(f) || '', placeholder: placeholder(f) }))),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const data = new FormData(form);
    const changes = { cursor: '' };
    for (const f of FILTERS) changes[f] = String(data.get(f) || '').trim();
    ctx.navigate(to(changes));
  });
  ctx.show(
    h('h1', {}, 'Audit'),
    h('p', { class: 'muted' }, `Chain head: entry ${page.head.seq}`,
      page.anchor.seq ? ` (entries up to ${page.anchor.seq} dropped by retention)` : '',
      '. Verify it with ', h('code', {}, 'appliance audit verify'), '.'),
    form,
    table(['#', 'When', 'Actor', 'Source', 'Action', 'Target', 'Outcome', 'From'], page.entries.map((e) => h('tr', {},
      h('td', {}, String(e.seq)),
      h('td', {}, time(e.at)),
      h('td', {}, actor(e.actor)),
      h('td', {}, e.source),
      h('td', {}, h('code', {}, e.action)),
      h('td', {}, e.target ? h('code', {}, e.target) : ''),
      h('td', {}, h('span', { class: `status status-${e.outcome === 'ok' ? 'completed' : 'failed'}` }, e.outcome),
        e.reason ? h('span', { class: 'muted' }, ` ${e.reason}`) : '',
        e.dropped ? h('span', { class: 'error' }, ` (${e.dropped} dropped before)`) : ''),
      h('td', {}, e.client_address || ''))), 'No entries.'),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      ctx.query.get('cursor') ? link(to({ cursor: '' }), '← First') : h('span', { class: 'muted' }, '← First'),
      h('span', { class: 'count' }, `${page.entries.length} entr${page.entries.length === 1 ? 'y' : 'ies'}`),
      page.next != null ? link(to({ cursor: String(page.next) }), 'Next →') : h('span', { class: 'muted' }, 'Next →')),
  );
}

function actor(a) {
  const who = a.email || a.id || 'anonymous';
  return a.key ? `${who} (key ${a.key})` : who;
}

function placeholder(f) {
  return { actor: 'email, user id or key name', action: 'job. or auth.sign_in', target: 'job/ID, user/ID' }[f];
}
