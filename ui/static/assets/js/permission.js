// What the signed-in user may do with a task and its jobs. With the ACL on,
// task and job answers carry `permission` ("view" or "run"); without it
// they carry none and everyone may run. Controls the user may not use are
// not offered: a note says why instead.
import { h } from './dom.js';

export function canRun(record) {
  return !record || record.permission !== 'view';
}

// runOnly returns node when the user may run record's task, else a note
// saying what they may not do (what: "run this task", ...).
export function runOnly(record, node, what = 'run this task or act on its jobs') {
  if (canRun(record)) return node;
  return h('p', { class: 'muted view-only' },
    `View only: you may not ${what}. Ask an admin for the run permission.`);
}
