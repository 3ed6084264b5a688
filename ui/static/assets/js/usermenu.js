// The header's user menu when auth is on: who is signed in, links to
// their password and API keys, and sign-out.
import { h, link } from './dom.js';

export function userMenu(me, signOut) {
  const who = me ? (me.name || me.email) : 'Signed in';
  const menu = h('details', { class: 'user-menu', id: 'user-menu' },
    h('summary', { 'aria-label': `Account menu of ${who}` }, who),
    h('div', { class: 'menu' },
      me ? h('p', { class: 'who' }, 'Signed in as ', h('strong', { id: 'signed-in-as' }, me.email),
        me.is_admin ? h('span', { class: 'tag' }, 'admin') : null) : null,
      h('ul', { class: 'plain' },
        h('li', {}, link('/account/password', 'Change password')),
        h('li', {}, link('/account/api-keys', 'API keys'))),
      h('button', { type: 'button', id: 'sign-out', class: 'secondary', onclick: signOut }, 'Sign out')));
  // Escape closes the menu and gives focus back to it.
  menu.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && menu.open) {
      menu.open = false;
      menu.querySelector('summary').focus();
    }
  });
  return menu;
}

// A click outside an open menu closes it.
document.addEventListener('click', (e) => {
  const open = document.querySelector('details.user-menu[open]');
  if (open && !open.contains(e.target)) open.open = false;
});
