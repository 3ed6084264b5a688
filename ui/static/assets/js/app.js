// Starts the UI: reads the server's config, routes paths to pages and
// keeps the header's session controls current.
import { api, onUnauthorized, scheduleRefresh, tokenSubject, tokens } from './api.js';
import { h, replace } from './dom.js';
import { apiKeysPage, passwordPage } from './pages/account.js';
import { userPage, usersPage } from './pages/admin.js';
import { auditPage } from './pages/audit.js';
import { dashboard } from './pages/dashboard.js';
import { jobPage } from './pages/job.js';
import { jobsPage } from './pages/jobs.js';
import { loginCallback, loginPage } from './pages/login.js';
import { queuesPage } from './pages/queues.js';
import { taskPage } from './pages/task.js';
import { workerPage, workersPage } from './pages/workers.js';
import { userMenu } from './usermenu.js';

const routes = [
  [/^\/$/, dashboard],
  [/^\/login$/, loginPage],
  [/^\/login\/callback$/, loginCallback],
  [/^\/tasks\/([^/]+)\/([^/]+)$/, taskPage],
  [/^\/jobs$/, jobsPage],
  [/^\/jobs\/([^/]+)$/, jobPage],
  [/^\/queues$/, queuesPage],
  [/^\/workers$/, workersPage],
  [/^\/workers\/([^/]+)$/, workerPage],
  [/^\/admin$/, usersPage],
  [/^\/admin\/users\/([^/]+)$/, userPage],
  [/^\/audit$/, auditPage],
  [/^\/account\/password$/, passwordPage],
  [/^\/account\/api-keys$/, apiKeysPage],
];

let config = { auth_required: false, has_internal_auth: false, oidc_providers: [], version: '' };
let current = null;
// me is the signed-in user (GET /api/auth/me), null when auth is off or
// nobody is signed in; fetched again when the token's user changes.
let me = null;

async function loadMe() {
  if (!config.auth_required || !tokens.access) {
    me = null;
    return;
  }
  if (me && me.user_id === tokenSubject()) return;
  try {
    me = await api('/api/auth/me');
  } catch {
    me = null;
  }
}

export function navigate(to, { replace: replaceState = false } = {}) {
  history[replaceState ? 'replaceState' : 'pushState'](null, '', to);
  render();
}

function needsLogin() {
  return config.auth_required && !tokens.access;
}

async function render() {
  current?.abort();
  current = new AbortController();
  const { signal } = current;
  const main = document.getElementById('main');
  const { pathname } = location;
  if (needsLogin() && !pathname.startsWith('/login')) {
    renderSession();
    navigate('/login', { replace: true });
    return;
  }
  if (!pathname.startsWith('/login')) await loadMe();
  if (signal.aborted) return;
  renderSession();
  const ctx = {
    main, signal, config, navigate, me,
    query: new URLSearchParams(location.search),
    // show replaces the page, unless the user has moved on meanwhile.
    show(...nodes) {
      if (!signal.aborted) replace(main, ...nodes);
    },
  };
  for (const [re, page] of routes) {
    const m = pathname.match(re);
    if (!m) continue;
    try {
      ctx.params = m.slice(1).map(decodeURIComponent);
      await page(ctx);
    } catch (err) {
      if (!signal.aborted && err.name !== 'AbortError') {
        document.title = 'Error · appliance';
        ctx.show(h('h1', {}, 'Something went wrong'), h('p', { class: 'error', role: 'alert' }, err.message));
      }
    }
    return;
  }
  document.title = 'Not found · appliance';
  ctx.show(h('h1', {}, 'Not found'), h('p', {}, 'No page here. ', h('a', { href: '/', 'data-route': true }, 'Back to the dashboard.')));
}

// hostOf shortens a replica's advertise_url to its host for the header.
function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

// replicaBadge says, for a pair of replicas (/api/config's ha), which one
// answers this page and who leads; null for a single server.
function replicaBadge(ha) {
  if (!ha) return null;
  let role;
  if (ha.unreachable) role = 'not answering';
  else if (ha.leading) role = 'leader';
  else if (ha.leader) role = `follower of ${hostOf(ha.leader)}`;
  else role = 'no leader (failover in progress)';
  return h('span', { class: 'muted replica', id: 'replica', title: `replica ${ha.replica}; leader ${ha.leader || 'none'}` },
    `replica ${hostOf(ha.replica)} · ${role}`);
}

function renderSession() {
  const el = document.getElementById('session');
  const version = config.version ? h('span', { class: 'muted' }, `v${config.version}`) : null;
  const replica = replicaBadge(config.ha);
  // The admin pages are linked for admins only (the server refuses the
  // others anyway).
  document.getElementById('nav-admin').hidden = !me?.is_admin;
  document.getElementById('nav-audit').hidden = config.auth_required && !me?.is_admin;
  if (!config.auth_required || !tokens.access) {
    replace(el, replica, version);
    return;
  }
  replace(el, replica, version, userMenu(me, signOut));
}

async function signOut() {
  const refreshToken = tokens.refresh;
  tokens.clear();
  me = null;
  if (refreshToken) {
    // The session ends here either way; revoking is a courtesy.
    await api('/api/auth/logout', { method: 'POST', body: { refresh_token: refreshToken }, auth: false }).catch(() => {});
  }
  navigate('/login');
}

// In-app links change the page without reloading it.
document.addEventListener('click', (e) => {
  const a = e.target.closest('a[data-route]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', render);
onUnauthorized(() => navigate('/login', { replace: true }));

async function start() {
  try {
    config = await api('/api/config', { auth: false });
  } catch (err) {
    replace(document.getElementById('main'), h('h1', {}, 'The server is not answering'), h('p', { class: 'error', role: 'alert' }, err.message));
    return;
  }
  if (config.auth_required) scheduleRefresh();
  render();
  if (config.ha) setInterval(refreshReplica, replicaRefresh);
}

// A failover changes who leads while the page stays open: the header
// reads /api/config again every few seconds (each replica answers it
// itself, it is not forwarded).
const replicaRefresh = 3000;

async function refreshReplica() {
  try {
    const fresh = await api('/api/config', { auth: false });
    if (JSON.stringify(fresh.ha) === JSON.stringify(config.ha)) return;
    config.ha = fresh.ha;
  } catch {
    // The replica this page came from is down: say so rather than show a
    // role it no longer has.
    if (config.ha.unreachable) return;
    config.ha = { ...config.ha, leading: false, unreachable: true };
  }
  renderSession();
}

start();
