// The signed-in user's own account: changing their password, and their
// API keys (created, listed and revoked; a new key is shown once).
import { api } from '../api.js';
import { confirmButton } from '../confirm.js';
import { h, path, replace } from '../dom.js';
import { table, time } from '../format.js';

function field(id, label, control, help) {
  return h('div', { class: 'field' }, h('label', { for: id }, label), control,
    help ? h('p', { class: 'help', id: `${id}-help` }, help) : null);
}

// signedIn shows why the page is empty without auth; it says whether the
// page may go on.
function signedIn(ctx, title) {
  if (ctx.config.auth_required) return true;
  ctx.show(h('h1', {}, title), h('p', { class: 'notice' }, 'This server runs without authentication: there is no account to manage.'));
  return false;
}

export async function passwordPage(ctx) {
  document.title = 'Change password · appliance';
  if (!signedIn(ctx, 'Change password')) return;
  const current = h('input', { id: 'current-password', type: 'password', autocomplete: 'current-password', required: true });
  const next = h('input', { id: 'new-password', type: 'password', autocomplete: 'new-password', required: true, 'aria-describedby': 'new-password-help' });
  const again = h('input', { id: 'repeat-password', type: 'password', autocomplete: 'new-password', required: true });
  // Checked by default, and again after a reset: whoever knew the old
  // password may have created keys.
  const revokeKeys = h('input', { id: 'revoke-keys', type: 'checkbox' });
  revokeKeys.defaultChecked = true;
  const error = h('p', { class: 'error', role: 'alert', id: 'password-error' });
  const note = h('p', { class: 'ok', role: 'status', id: 'password-status' });
  const submit = h('button', { type: 'submit' }, 'Change password');
  const form = h('form', {
    class: 'stack', id: 'change-password', 'aria-describedby': 'password-error', novalidate: true,
    async onsubmit(e) {
      e.preventDefault();
      error.textContent = '';
      note.textContent = '';
      if (next.value !== again.value) {
        error.textContent = 'The new password and its repetition differ.';
        return;
      }
      submit.disabled = true;
      try {
        const revoked = revokeKeys.checked;
        await api('/api/auth/me/password', {
          method: 'PUT',
          body: { current_password: current.value, password: next.value, revoke_api_keys: revoked },
        });
        form.reset();
        note.textContent = `Password changed. Your other sessions${revoked ? ' and your API keys' : ''} have ended; this one goes on.`;
      } catch (err) {
        error.textContent = err.message;
      } finally {
        submit.disabled = false;
      }
    },
  },
  field('current-password', 'Current password', current),
  field('new-password', 'New password', next, 'At least 12 characters.'),
  field('repeat-password', 'New password again', again),
  h('div', { class: 'field checkbox' }, revokeKeys, h('label', { for: 'revoke-keys' }, 'Also revoke my API keys')),
  h('div', { class: 'actions' }, submit, note, error));
  ctx.show(h('h1', {}, 'Change password'),
    ctx.me ? h('p', { class: 'lead' }, `For ${ctx.me.email}.`) : null,
    h('section', { class: 'card narrow-left' }, form));
}

export async function apiKeysPage(ctx) {
  document.title = 'API keys · appliance';
  if (!signedIn(ctx, 'API keys')) return;
  const { signal } = ctx;
  let keys = await api('/api/auth/api-keys', { signal });
  const list = h('div', { id: 'api-keys' });
  const listError = h('p', { class: 'error', role: 'alert', id: 'api-keys-error' });
  const created = h('div', { id: 'new-key-box' });

  const reload = async () => {
    keys = await api('/api/auth/api-keys', { signal });
    showList();
  };
  const showList = () => replace(list, table(['Name', 'Key starts with', 'Scopes', 'Created', 'Expires', 'Last used', ''],
    keys.map((k) => h('tr', { 'data-key': k.prefix },
      h('th', { scope: 'row' }, k.name),
      h('td', {}, h('code', {}, `${k.prefix}…`)),
      h('td', {}, (k.scopes || []).join(', ')),
      h('td', {}, time(k.created_at)),
      h('td', {}, k.expires_at ? time(k.expires_at) : 'never'),
      h('td', {}, k.last_used_at ? time(k.last_used_at) : h('span', { class: 'muted' }, 'not yet')),
      h('td', {}, confirmButton({
        label: 'Revoke…',
        question: `Revoke ${k.name}? Whatever uses it stops working.`,
        yes: 'Revoke key',
        onError: (err) => { listError.textContent = err.message; },
        async act() {
          listError.textContent = '';
          await api(path('api', 'auth', 'api-keys', k.prefix), { method: 'DELETE' });
          await reload();
        },
      })))), 'You have no API keys.'));
  showList();

  const name = h('input', { id: 'key-name', type: 'text', autocomplete: 'off', required: true, placeholder: 'e.g. CI deploys' });
  const days = h('input', { id: 'key-days', type: 'number', min: 1, step: 1, inputmode: 'numeric', 'aria-describedby': 'key-days-help' });
  // Scopes narrow what the key may do; all checked is all you may do.
  const scopeHelp = {
    read: 'read: lists, details, logs',
    run: 'run: run, cancel, re-run',
    approve: 'approve: approval decisions',
    admin: 'admin: users, groups, keys',
  };
  const scopes = Object.keys(scopeHelp).map((s) => h('input', { type: 'checkbox', id: `key-scope-${s}`, name: 'scopes', value: s, checked: true }));
  const scopeBoxes = h('fieldset', { id: 'key-scopes' }, h('legend', {}, 'Scopes'),
    ...scopes.map((box) => h('label', { for: box.id }, box, ' ', scopeHelp[box.value])));
  const error = h('p', { class: 'error', role: 'alert', id: 'key-error' });
  const submit = h('button', { type: 'submit' }, 'Create key');
  const form = h('form', {
    class: 'stack', id: 'create-key', 'aria-describedby': 'key-error', novalidate: true,
    async onsubmit(e) {
      e.preventDefault();
      error.textContent = '';
      replace(created);
      const body = { name: name.value.trim(), expires_in_days: null, scopes: scopes.filter((b) => b.checked).map((b) => b.value) };
      if (body.scopes.length === 0) {
        error.textContent = 'Scopes: check at least one.';
        return;
      }
      if (days.value.trim() !== '') {
        const n = Number(days.value);
        if (!Number.isInteger(n) || n < 1) {
          error.textContent = 'Expires in: a whole number of days, 1 or more, or empty for a key that never expires.';
          return;
        }
        body.expires_in_days = n;
      }
      submit.disabled = true;
      try {
        const k = await api('/api/auth/api-keys', { method: 'POST', body });
        form.reset();
        scopes.forEach((b) => { b.checked = true; });
        replace(created, newKey(k));
        await reload();
      } catch (err) {
        error.textContent = err.message;
      } finally {
        submit.disabled = false;
      }
    },
  },
  field('key-name', 'Name', name),
  field('key-days', 'Expires in (days)', days, 'Leave empty for a key that never expires.'),
  scopeBoxes,
  h('div', { class: 'actions' }, submit, error));

  ctx.show(h('h1', {}, 'API keys'),
    h('p', { class: 'lead' }, 'A key acts as you, with your permissions, for scripts and the command-line client: send it as ',
      h('code', {}, 'Authorization: Bearer <key>'), ' or set ', h('code', {}, 'APPLIANCE_TOKEN'), '.'),
    created,
    h('section', { 'aria-labelledby': 'keys-h' }, h('h2', { id: 'keys-h' }, 'Your keys'), listError, list),
    h('section', { class: 'card', 'aria-labelledby': 'create-h' }, h('h2', { id: 'create-h' }, 'Create a key'), form));
}

// newKey shows a created key, the only time it is ever shown.
function newKey(k) {
  const value = h('code', { id: 'new-key', class: 'secret' }, k.key);
  const copied = h('span', { role: 'status', id: 'copy-status' });
  const copy = h('button', { type: 'button', id: 'copy-key' }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(k.key);
      copied.textContent = 'Copied.';
    } catch {
      // No clipboard access (an insecure origin, a denied permission):
      // select the key so the user copies it themselves.
      getSelection().selectAllChildren(value);
      copied.textContent = 'Copying is not allowed here: the key is selected, press Ctrl+C (⌘C).';
    }
  });
  return h('section', { class: 'card new-key', role: 'alert', 'aria-labelledby': 'new-key-h' },
    h('h2', { id: 'new-key-h' }, `New key: ${k.name}`),
    h('p', { class: 'warning' }, h('strong', {}, 'Copy it now: it will not be shown again.'),
      ' The server keeps only a hash of it; if you lose it, revoke it and create another.'),
    h('div', { class: 'actions' }, value, copy, copied),
    k.expires_at ? h('p', { class: 'help' }, 'Expires ', time(k.expires_at), '.') : h('p', { class: 'help' }, 'It never expires.'));
}
