// User management, for admins: the users a page at a time, a form to add
// one, and a page per user to set their groups and admin status, reset
// their password or delete them. Every form shows the server's refusal
// next to it (a taken email, a short password, the last admin).
import { api } from '../api.js';
import { confirmButton } from '../confirm.js';
import { h, link, path, replace } from '../dom.js';
import { table, time } from '../format.js';

const PAGE = 20;

// flash is a message for the next users page (after a deletion).
let flash = '';

// adminsOnly shows the refusal for anyone else, and says whether it did.
function adminsOnly(ctx, title) {
  if (ctx.config.auth_required && ctx.me?.is_admin) return false;
  document.title = `${title} · appliance`;
  ctx.show(h('h1', {}, title),
    h('p', { class: 'notice', role: 'alert', id: 'admins-only' }, ctx.config.auth_required
      ? 'Admins only: this page manages user accounts, and you are not an admin. Ask an admin if you need an account changed.'
      : 'This server runs without authentication, so it has no user accounts to manage.'));
  return true;
}

// refused is the same message for a 403 from the server (the user lost
// admin status since the page loaded).
function refused(ctx, title, err) {
  if (err.status !== 403) throw err;
  adminsOnly({ ...ctx, me: null }, title);
}

// splitGroups reads "a, b c" as ["a", "b", "c"].
function splitGroups(s) {
  return [...new Set(s.split(/[\s,]+/).filter(Boolean))];
}

function field(id, label, control, help) {
  return h('div', { class: 'field' }, h('label', { for: id }, label), control,
    help ? h('p', { class: 'help', id: `${id}-help` }, help) : null);
}

function checkbox(id, label, control) {
  return h('div', { class: 'field checkbox' }, control, h('label', { for: id }, label));
}

function groupsHelp(groups) {
  return groups.length ? `Separate with commas or spaces. Groups in use: ${groups.join(', ')}.` : 'Separate with commas or spaces.';
}

export async function usersPage(ctx) {
  if (adminsOnly(ctx, 'Users')) return;
  document.title = 'Users · appliance';
  const { signal, query } = ctx;
  const offset = Math.max(0, parseInt(query.get('offset') || '0', 10) || 0);
  let users;
  let groups;
  try {
    [users, groups] = await Promise.all([
      api(`/api/users?${new URLSearchParams({ limit: PAGE, offset })}`, { signal }),
      api('/api/groups', { signal }),
    ]);
  } catch (err) {
    refused(ctx, 'Users', err);
    return;
  }
  const note = h('p', { class: 'ok', role: 'status', id: 'users-status' }, flash);
  flash = '';
  const list = h('div', { id: 'users-list' });
  const to = (o) => (o > 0 ? `/admin?offset=${o}` : '/admin');

  const showList = () => {
    const first = users.total ? offset + 1 : 0;
    const last = offset + users.items.length;
    replace(list,
      table(['Email', 'Name', 'Groups', 'Admin', 'Signs in with', 'Created'], users.items.map((u) => h('tr', { 'data-user': u.email },
        h('th', { scope: 'row' }, link(path('admin', 'users', u.id), u.email)),
        h('td', {}, u.name || h('span', { class: 'muted' }, '—')),
        h('td', {}, u.groups.length ? u.groups.join(', ') : h('span', { class: 'muted' }, 'none')),
        h('td', {}, u.is_admin ? 'yes' : 'no'),
        h('td', {}, u.auth_methods.join(', ') || h('span', { class: 'muted' }, 'nothing yet')),
        h('td', {}, time(u.created_at)))), offset ? 'No users on this page.' : 'No users.'),
      h('nav', { class: 'pager', 'aria-label': 'Pages' },
        offset > 0 ? link(to(Math.max(0, offset - PAGE)), '← Previous') : h('span', { class: 'muted' }, '← Previous'),
        h('span', { class: 'count' }, `${first}–${last} of ${users.total}`),
        last < users.total ? link(to(offset + PAGE), 'Next →') : h('span', { class: 'muted' }, 'Next →')));
  };
  showList();

  const email = h('input', { id: 'new-email', type: 'email', autocomplete: 'off', required: true });
  const name = h('input', { id: 'new-name', type: 'text', autocomplete: 'off' });
  const password = h('input', { id: 'new-password', type: 'password', autocomplete: 'new-password', required: true, 'aria-describedby': 'new-password-help' });
  const admin = h('input', { id: 'new-admin', type: 'checkbox' });
  const groupsIn = h('input', { id: 'new-groups', type: 'text', autocomplete: 'off', 'aria-describedby': 'new-groups-help' });
  const error = h('p', { class: 'error', role: 'alert', id: 'add-user-error' });
  const submit = h('button', { type: 'submit' }, 'Add user');
  const form = h('form', {
    class: 'stack', id: 'add-user', 'aria-describedby': 'add-user-error', novalidate: true,
    async onsubmit(e) {
      e.preventDefault();
      error.textContent = '';
      note.textContent = '';
      submit.disabled = true;
      try {
        const u = await api('/api/users', {
          method: 'POST',
          body: { email: email.value.trim(), name: name.value.trim() || null, password: password.value, is_admin: admin.checked, groups: splitGroups(groupsIn.value) },
        });
        form.reset();
        note.textContent = `Added ${u.email}.`;
        users = await api(`/api/users?${new URLSearchParams({ limit: PAGE, offset })}`, { signal });
        showList();
      } catch (err) {
        error.textContent = err.message;
      } finally {
        submit.disabled = false;
      }
    },
  },
  field('new-email', 'Email', email),
  field('new-name', 'Name (optional)', name),
  field('new-password', 'Password', password, 'At least 12 characters. Give it to the user by a safe channel; they can change it under their account menu.'),
  field('new-groups', 'Groups', groupsIn, groupsHelp(groups.groups)),
  checkbox('new-admin', 'Admin (manages users, may run every task)', admin),
  h('div', { class: 'actions' }, submit, error));

  ctx.show(
    h('h1', {}, 'Users'),
    note,
    h('section', { 'aria-labelledby': 'users-h' }, h('h2', { id: 'users-h', class: 'visually-hidden' }, 'All users'), list),
    h('section', { class: 'card', 'aria-labelledby': 'add-h' }, h('h2', { id: 'add-h' }, 'Add a user'), form));
}

export async function userPage(ctx) {
  if (adminsOnly(ctx, 'User')) return;
  const [id] = ctx.params;
  const { signal } = ctx;
  let user;
  let groups;
  try {
    [user, groups] = await Promise.all([
      api(path('api', 'users', id), { signal }),
      api('/api/groups', { signal }),
    ]);
  } catch (err) {
    refused(ctx, 'User', err);
    return;
  }
  document.title = `${user.email} · appliance`;
  const self = user.id === ctx.me.user_id;
  const base = path('api', 'users', id);

  // Groups and admin status.
  const groupsIn = h('input', { id: 'user-groups', type: 'text', autocomplete: 'off', value: user.groups.join(', '), 'aria-describedby': 'user-groups-help' });
  const admin = h('input', { id: 'user-admin', type: 'checkbox', checked: user.is_admin });
  const accessError = h('p', { class: 'error', role: 'alert', id: 'access-error' });
  const accessNote = h('p', { class: 'ok', role: 'status', id: 'access-status' });
  const save = h('button', { type: 'submit' }, 'Save');
  const access = h('form', {
    class: 'stack', id: 'user-access', 'aria-describedby': 'access-error', novalidate: true,
    async onsubmit(e) {
      e.preventDefault();
      accessError.textContent = '';
      accessNote.textContent = '';
      save.disabled = true;
      try {
        const g = await api(`${base}/groups`, { method: 'PUT', body: { groups: splitGroups(groupsIn.value) } });
        user.groups = g.groups;
        groupsIn.value = g.groups.join(', ');
        if (admin.checked !== user.is_admin) {
          const a = await api(`${base}/admin`, { method: 'PUT', body: { is_admin: admin.checked } });
          user.is_admin = a.is_admin;
        }
        accessNote.textContent = `Saved: ${user.groups.length ? `groups ${user.groups.join(', ')}` : 'no groups'}; ${user.is_admin ? 'an admin' : 'not an admin'}.`;
      } catch (err) {
        accessError.textContent = err.message;
        admin.checked = user.is_admin;
      } finally {
        save.disabled = false;
      }
    },
  },
  field('user-groups', 'Groups', groupsIn, groupsHelp(groups.groups)),
  checkbox('user-admin', 'Admin (manages users, may run every task)', admin),
  h('div', { class: 'actions' }, save, accessNote, accessError));

  // Password reset.
  const password = h('input', { id: 'reset-password', type: 'password', autocomplete: 'new-password', 'aria-describedby': 'reset-password-help' });
  const resetError = h('p', { class: 'error', role: 'alert', id: 'reset-error' });
  const resetNote = h('p', { class: 'ok', role: 'status', id: 'reset-status' });
  const setPw = h('button', { type: 'submit' }, 'Set password');
  const reset = h('form', {
    class: 'stack', id: 'reset', 'aria-describedby': 'reset-error', novalidate: true,
    async onsubmit(e) {
      e.preventDefault();
      resetError.textContent = '';
      resetNote.textContent = '';
      setPw.disabled = true;
      try {
        await api(`${base}/password`, { method: 'PUT', body: { password: password.value } });
        password.value = '';
        resetNote.textContent = self ? 'Password set. Your other sessions have ended.' : `Password set. ${user.email} is signed out everywhere and signs in with the new password.`;
      } catch (err) {
        resetError.textContent = err.message;
      } finally {
        setPw.disabled = false;
      }
    },
  },
  field('reset-password', 'New password', password, 'At least 12 characters.'),
  h('div', { class: 'actions' }, setPw, resetNote, resetError));

  // Deletion.
  const deleteError = h('p', { class: 'error', role: 'alert', id: 'delete-error' });
  const remove = self
    ? h('p', { class: 'muted' }, 'You cannot delete your own account; another admin can.')
    : confirmButton({
      id: 'delete-user',
      label: 'Delete user…',
      question: `Delete ${user.email}? Their sessions and API keys end with it. This cannot be undone.`,
      yes: `Delete ${user.email}`,
      onError: (err) => { deleteError.textContent = err.message; },
      async act() {
        deleteError.textContent = '';
        await api(base, { method: 'DELETE' });
        flash = `Deleted ${user.email}.`;
        ctx.navigate('/admin');
      },
    });

  ctx.show(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, link('/admin', 'Users'), ' / ', user.email),
    h('h1', {}, user.email),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Name'), h('dd', {}, user.name || h('span', { class: 'muted' }, '—')),
      h('dt', {}, 'Signs in with'), h('dd', {}, user.auth_methods.join(', ') || 'nothing yet'),
      h('dt', {}, 'Created'), h('dd', {}, time(user.created_at))),
    h('section', { class: 'card', 'aria-labelledby': 'access-h' }, h('h2', { id: 'access-h' }, 'Groups and admin status'),
      h('p', { class: 'help' }, 'Groups decide what the ACL lets the user see and run.'), access),
    h('section', { class: 'card', 'aria-labelledby': 'reset-h' }, h('h2', { id: 'reset-h' }, 'Reset password'), reset),
    h('section', { class: 'card', 'aria-labelledby': 'delete-h' }, h('h2', { id: 'delete-h' }, 'Delete user'),
      h('div', { class: 'actions' }, remove, deleteError)));
}
