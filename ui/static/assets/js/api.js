// Calls the HTTP API: JSON in and out, the bearer token when there is one,
// a refresh shortly before the access token expires, and one refresh
// attempt when the server answers 401.

const ACCESS = 'appliance.access_token';
const REFRESH = 'appliance.refresh_token';

export const tokens = {
  get access() { return localStorage.getItem(ACCESS) || ''; },
  get refresh() { return localStorage.getItem(REFRESH) || ''; },
  set(access, refresh) {
    localStorage.setItem(ACCESS, access || '');
    localStorage.setItem(REFRESH, refresh || '');
    scheduleRefresh();
  },
  clear() {
    clearTimeout(renewal);
    localStorage.removeItem(ACCESS);
    localStorage.removeItem(REFRESH);
  },
};

// claims reads a JWT's payload without checking it (the server does).
function claims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part)) || {};
  } catch {
    return {};
  }
}

// tokenSubject is the user id of the stored access token ('' without one).
export function tokenSubject() {
  return tokens.access ? String(claims(tokens.access).sub || '') : '';
}

// Renewal ahead of expiry: a third of the token's life before it ends, at
// most 30 s, so a live log stream (whose token rides in its URL) and the
// next request both find a valid token.
let renewal = null;

export function scheduleRefresh() {
  clearTimeout(renewal);
  const { exp, iat } = claims(tokens.access);
  if (!exp || !tokens.refresh) return;
  const margin = Math.min(30, Math.max(1, ((exp - (iat || exp)) / 3))) * 1000;
  const wait = Math.max(0, exp * 1000 - margin - Date.now());
  // A renewal that fails leaves the session to the next request: its 401
  // tries once more, then sends the user to the login page.
  renewal = setTimeout(refresh, wait);
}

// Another tab that renews or signs out changes the shared storage.
window.addEventListener('storage', (e) => {
  if (e.key === ACCESS || e.key === null) scheduleRefresh();
});

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let unauthorized = () => {};

// onUnauthorized sets what happens when the session cannot be renewed.
export function onUnauthorized(f) {
  unauthorized = f;
}

// One refresh at a time: parallel requests failing together share it, as
// each refresh token is good for one use only (a second use revokes the
// login). Tabs share the tokens, so where the browser has Web Locks a
// refresh also holds a lock, and a tab that waited for it takes the tokens
// the other tab got.
let refreshing = null;

function refresh() {
  const rt = tokens.refresh;
  if (!rt) return Promise.resolve(false);
  const locked = (f) => (navigator.locks ? navigator.locks.request('appliance.refresh', f) : f());
  refreshing ??= locked(async () => {
    if (tokens.refresh !== rt) return Boolean(tokens.refresh);
    try {
      const r = await fetch('/api/auth/refresh', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ refresh_token: rt }),
      });
      if (!r.ok) return false;
      const b = await r.json();
      tokens.set(b.access_token, b.refresh_token);
      return true;
    } catch {
      return false;
    }
  }).finally(() => {
    refreshing = null;
  });
  return refreshing;
}

function send(url, method, body, signal, auth) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (auth && tokens.access) headers.Authorization = `Bearer ${tokens.access}`;
  return fetch(url, {
    method, headers, signal,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

// answer sends a request, renewing the session once on a 401, and returns
// the response as it starts to arrive; a refusal throws an ApiError
// carrying the server's `error` message.
async function answer(url, { method = 'GET', body, signal, auth = true } = {}) {
  let r = await send(url, method, body, signal, auth);
  if (auth && r.status === 401) {
    if (await refresh()) r = await send(url, method, body, signal, auth);
    if (r.status === 401) {
      tokens.clear();
      unauthorized();
      throw new ApiError(401, 'your session has ended; please sign in again');
    }
  }
  if (!r.ok) {
    const data = decode(await r.text());
    throw new ApiError(r.status, (data && data.error) || `${r.status} ${r.statusText}`);
  }
  return r;
}

function decode(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

// api sends a request and returns the decoded answer, or throws an ApiError
// carrying the server's `error` message. With auth false it sends no token
// and a 401 is just an error (the login form's wrong password).
export async function api(url, options = {}) {
  const r = await answer(url, options);
  return decode(await r.text());
}

// apiStream is a GET whose body the caller reads as it arrives (a big log).
export function apiStream(url, { signal } = {}) {
  return answer(url, { signal });
}

// logStreamURL is the WebSocket address of a job's live log, starting
// after line `after` (0 = the whole log); a browser cannot set headers on
// a WebSocket, so the token rides in the query.
export function logStreamURL(jobID, after = 0) {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const query = new URLSearchParams();
  if (after > 0) query.set('after', String(after));
  if (tokens.access) query.set('token', tokens.access);
  const qs = query.toString();
  return `${scheme}://${location.host}/api/jobs/${encodeURIComponent(jobID)}/logs/stream${qs ? `?${qs}` : ''}`;
}
