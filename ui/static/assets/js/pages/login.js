// Sign-in: the email/password form and one button per OIDC provider, and
// the page the OIDC callback redirects to with the tokens in its fragment.
import { api, tokens } from '../api.js';
import { h, path } from '../dom.js';

export async function loginPage(ctx) {
  document.title = 'Sign in · appliance';
  const { config } = ctx;
  if (!config.auth_required) {
    ctx.navigate('/', { replace: true });
    return;
  }
  const error = h('p', { class: 'error', role: 'alert' });
  const note = sessionStorage.getItem('appliance.login_error');
  if (note) {
    sessionStorage.removeItem('appliance.login_error');
    error.textContent = note;
  }
  const email = h('input', { id: 'login-email', type: 'email', name: 'email', autocomplete: 'username', required: true });
  const password = h('input', { id: 'login-password', type: 'password', name: 'password', autocomplete: 'current-password', required: true });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = config.has_internal_auth ? h('form', {
    class: 'stack',
    async onsubmit(e) {
      e.preventDefault();
      submit.disabled = true;
      error.textContent = '';
      try {
        const r = await api('/api/auth/login', { method: 'POST', body: { email: email.value, password: password.value }, auth: false });
        tokens.set(r.access_token, r.refresh_token);
        ctx.navigate('/', { replace: true });
      } catch (err) {
        error.textContent = err.status === 401 ? 'Wrong email or password.' : err.message;
      } finally {
        submit.disabled = false;
      }
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'login-email' }, 'Email'), email),
  h('div', { class: 'field' }, h('label', { for: 'login-password' }, 'Password'), password),
  submit) : null;

  const providers = (config.oidc_providers || []).map((p) =>
    // A full page load: the server redirects to the identity provider.
    h('a', { class: 'button secondary', href: path('api', 'auth', 'oidc', p.id) }, `Sign in with ${p.display_name || p.id}`));

  ctx.show(h('section', { class: 'card narrow' },
    h('h1', {}, 'Sign in'),
    error,
    form,
    providers.length ? h('div', { class: 'stack' }, form ? h('p', { class: 'muted' }, 'or') : null, providers) : null,
    !form && !providers.length ? h('p', {}, 'This server offers no way to sign in from the browser.') : null));
}

// loginCallback reads `#access_token=..&refresh_token=..` or `#error=..`.
export async function loginCallback(ctx) {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const access = fragment.get('access_token');
  if (access) {
    tokens.set(access, fragment.get('refresh_token'));
    ctx.navigate('/', { replace: true });
    return;
  }
  sessionStorage.setItem('appliance.login_error', fragment.get('error') || 'Sign-in did not complete.');
  ctx.navigate('/login', { replace: true });
}
