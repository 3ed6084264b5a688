// Starts the UI: reads the server's config, routes paths to pages and
// keeps the header's session controls current.
import { api, onUnauthorized, scheduleRefresh, tokens } from './api.js';
import { h, replace } from './dom.js';
import { dashboard } from './pages/dashboard.js';
import { jobPage } from './pages/job.js';
import { jobsPage } from './pages/jobs.js';
import { loginCallback, loginPage } from './pages/login.js';
import { taskPage } from './pages/task.js';
import { workerPage, workersPage } from './pages/workers.js';

const routes = [
  [/^\/$/, dashboard],
  [/^\/login$/, loginPage],
  [/^\/login\/callback$/, loginCallback],
  [/^\/tasks\/([^/]+)\/([^/]+)$/, taskPage],
  [/^\/jobs$/, jobsPage],
  [/^\/jobs\/([^/]+)$/, jobPage],
  [/^\/workers$/, workersPage],
  [/^\/workers\/([^/]+)$/, workerPage],
];

let config = { auth_required: false, has_internal_auth: false, oidc_providers: [], version: '' };
let current = null;

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
  renderSession();
  if (needsLogin() && !pathname.startsWith('/login')) {
    navigate('/login', { replace: true });
    return;
  }
  const ctx = {
    main, signal, config, navigate,
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

function renderSession() {
  const el = document.getElementById('session');
  const version = config.version ? h('span', { class: 'muted' }, `v${config.version}`) : null;
  if (!config.auth_required || !tokens.access) {
    replace(el, version);
    return;
  }
  replace(el, version, h('button', { type: 'button', class: 'link', onclick: signOut }, 'Sign out'));
}

async function signOut() {
  const refreshToken = tokens.refresh;
  tokens.clear();
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
}

start();
