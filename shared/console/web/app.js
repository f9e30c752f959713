// Meridian console: one page over the console API (/console/...). The
// session is an HttpOnly cookie the page cannot read; every change sends
// the session's CSRF token. Data is put in the page as text, never as HTML.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const views = ['overview', 'keys', 'monitors', 'ledger', 'usage', 'status'];
  let csrf = '';
  let signedIn = false;

  class ApiError extends Error {
    constructor(message, requestId, status, type, details) {
      super(message);
      this.requestId = requestId;
      this.status = status;
      this.type = type;
      this.details = details || {};
    }
  }

  // api calls the console API and returns its JSON, or throws ApiError
  // with the error envelope's message and request id.
  async function api(method, path, body) {
    const headers = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (method !== 'GET') headers['x-csrf-token'] = csrf;
    let res;
    try {
      res = await fetch(path, {
        method, headers, credentials: 'same-origin', cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError('The console could not reach the API (' + e.message + ').', '', 0, '', {});
    }
    let json = null;
    try { json = await res.json(); } catch (_) { json = null; }
    if (!res.ok) {
      const err = (json && json.error) || {};
      throw new ApiError(err.message || ('The API answered HTTP ' + res.status + '.'),
        (json && json.request_id) || res.headers.get('x-request-id') || '', res.status, err.type || '', err.details);
    }
    return json;
  }

  // ---- messages ----------------------------------------------------------

  function showError(e, extra) {
    if (!(e instanceof ApiError)) e = new ApiError(String(e && e.message || e), '', 0, '', {});
    const reason = e.details && e.details.reason;
    if (e.status === 401 && (reason === 'invalid_console_token' || reason === 'missing_console_token') && signedIn) {
      signedOutView();
    }
    $('alert').classList.remove('info');
    $('alert-message').textContent = e.message + (extra ? ' ' + extra : '');
    $('alert-request-id').textContent = e.requestId || '(none)';
    $('alert-request-id').parentElement.hidden = !e.requestId;
    $('alert').hidden = false;
    $('alert').focus();
  }

  function clearError() { $('alert').hidden = true; }

  $('alert').tabIndex = -1;
  $('alert-close').addEventListener('click', clearError);

  // ---- formatting ----------------------------------------------------------

  const nf = new Intl.NumberFormat('en-US');
  const num = (n) => (n === null || n === undefined ? '–' : nf.format(n));
  function when(s) {
    if (!s) return 'never';
    const d = new Date(s);
    if (isNaN(d) || d.getUTCFullYear() < 2000) return 'never';
    return d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  }
  const pct = (r) => (r * 100).toFixed(r > 0 && r < 0.1 ? 1 : 0) + '%';

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') n.className = v;
      else if (k === 'text') n.textContent = v;
      else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) n.append(c);
    return n;
  }

  // ---- the one-time key reveal ---------------------------------------------

  function reveal(container, fullKey, what) {
    container.replaceChildren();
    const code = el('code', { id: 'revealed-key', text: fullKey });
    const copied = el('span', { class: 'muted', 'aria-live': 'polite' });
    const copy = el('button', {
      type: 'button', id: 'copy-key', text: 'Copy',
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(fullKey);
        } catch (_) {
          const range = document.createRange();
          range.selectNodeContents(code);
          const sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
          document.execCommand('copy');
        }
        copied.textContent = 'Copied.';
      },
    });
    const done = el('button', {
      type: 'button', class: 'secondary', text: 'I have saved it',
      onclick: () => container.replaceChildren(),
    });
    container.append(el('div', { class: 'card reveal', role: 'status', id: 'key-reveal' },
      el('h2', { text: what }),
      el('p', {}, el('strong', { text: 'Copy it now: you will not see it again.' }),
        ' Only a hash is stored, so the key cannot be shown or recovered later.'),
      el('div', { class: 'secret' }, code, copy, copied),
      done));
    copy.focus();
  }

  // ---- views ---------------------------------------------------------------

  function showSection(name) {
    for (const v of ['signin', ...views]) $('view-' + v).hidden = v !== name;
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    $('loading').hidden = true;
  }

  async function route() {
    if (!signedIn) return;
    let name = location.hash.replace(/^#/, '');
    if (!views.includes(name)) name = 'overview';
    showSection(name);
    const title = $('view-' + name).querySelector('h1');
    document.title = title.textContent + ' · Meridian console';
    try {
      await loaders[name]();
    } catch (e) {
      showError(e);
    }
  }

  const loaders = {
    async overview() {
      const o = await api('GET', '/console/overview');
      $('ov-balance').textContent = num(o.credits_remaining);
      $('ov-lifetime').textContent = num(o.credits_lifetime);
      $('ov-changed').textContent = when(o.balance_changed_at);
      $('ov-month').textContent = o.spend_this_month === null || o.spend_this_month === undefined ? '–' : num(o.spend_this_month);
      $('ov-account').textContent = o.account_id;
      const active = (o.keys || []).filter((k) => k.status === 'active').length;
      $('ov-keys').textContent = active + ' active ' + (active === 1 ? 'key' : 'keys') + ' of 5';
      if (o.new_key) reveal($('overview-new-key'), o.new_key.key, 'Your first API key');
    },
    keys: loadKeys,
    monitors() {
      $('create-monitor-status').textContent = '';
      return loadMonitors();
    },
    ledger: () => loadLedger(),
    usage: loadUsage,
    async status() {
      const s = await api('GET', '/console/status');
      $('status-window').textContent = s.window_minutes;
      $('status-at').textContent = 'as of ' + when(s.generated_at);
      const list = $('status-list');
      list.replaceChildren();
      for (const p of s.platforms) {
        const label = p.state.replace('_', ' ');
        list.append(el('li', {},
          el('div', { class: 'platform' }, el('span', { text: p.platform }), el('span', { class: 'badge ' + p.state, text: label })),
          el('div', { class: 'figures', text: p.requests === 0 ? 'No requests' :
            num(p.requests) + ' requests · ' + pct(p.error_rate) + ' errors · p50 ' + (p.p50_ms ?? '–') + ' ms · p95 ' + (p.p95_ms ?? '–') + ' ms' }),
          canaryLine(p.canary)));
      }
    },
  };

  // The scheduled canary's last check of a platform: its state and time,
  // then each operation that drifted or failed with the fields gone null.
  function canaryLine(c) {
    if (!c) return el('div', { class: 'canary muted', text: 'Canary: not checked yet' });
    const line = el('div', { class: 'canary' }, 'Canary ',
      el('span', { class: 'badge canary-' + c.state, text: c.state.replace('_', ' ') }), ' · ' + when(c.checked_at));
    const notes = el('ul', { class: 'canary-ops' });
    for (const o of c.operations) {
      if (o.state === 'ok') continue;
      let text = o.operation + ': ' + o.state.replace('_', ' ');
      if (o.fill_rate !== null && o.baseline_fill_rate !== null) text += ', fill ' + pct(o.fill_rate) + ' of ' + pct(o.baseline_fill_rate);
      if (o.null_fields.length) text += '; went null: ' + o.null_fields.join(', ');
      notes.append(el('li', { text }));
    }
    if (notes.children.length) line.append(notes);
    return line;
  }

  // ---- keys ----------------------------------------------------------------

  async function loadKeys() {
    const r = await api('GET', '/console/keys');
    const body = $('keys-table').tBodies[0];
    body.replaceChildren();
    if (r.items.length === 0) {
      body.append(el('tr', {}, el('td', { colspan: 8, class: 'muted', text: 'No keys yet: create one above.' })));
    }
    for (const k of r.items) body.append(keyRow(k));
  }

  function keyRow(k) {
    const shown = k.prefix + '…' + k.last4;
    const name = k.name || '(unnamed)';
    const act = (label, fn, cls) => el('button', {
      type: 'button', class: cls || 'secondary', text: label, 'aria-label': label + ' key ' + name + ' (' + shown + ')',
      onclick: async (ev) => {
        ev.target.disabled = true;
        try { await fn(); } catch (e) { showError(e); } finally { ev.target.disabled = false; }
      },
    });
    const change = async (path, method) => {
      clearError();
      await api(method || 'POST', '/console/keys/' + encodeURIComponent(k.id) + path);
      await loadKeys();
    };
    const actions = el('div', { class: 'actions' },
      act('Edit', () => openEdit(k)),
      k.status === 'active'
        ? act('Revoke', () => change('/revoke'))
        : act('Reactivate', () => change('/reactivate').catch((e) => { throw explainLimit(e); })),
      act('Delete', () => openDelete(k), 'danger'));
    return el('tr', { 'data-key-id': k.id, 'data-prefix': k.prefix },
      el('td', { text: name }),
      el('td', {}, el('code', { text: shown })),
      el('td', {}, el('span', { class: 'badge ' + k.status, text: k.status })),
      el('td', { text: k.credit_limit === null ? 'uncapped' : num(k.credit_limit) }),
      el('td', { text: num(k.credits_used) }),
      el('td', { text: when(k.created_at) }),
      el('td', { text: when(k.last_used_at) }),
      el('td', {}, actions));
  }

  // explainLimit adds what the five-active-keys rule means to its refusal.
  function explainLimit(e) {
    if (e instanceof ApiError && e.details.reason === 'active_key_limit') {
      e.message += ' Each account may hold five active keys at once; revoked and deleted keys do not count, so revoke or delete one you no longer use, then try again.';
    }
    return e;
  }

  function limitValue(input) {
    const v = input.value.trim();
    return v === '' ? null : Number(v);
  }

  $('create-key-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const body = { name: $('new-key-name').value.trim() };
    const limit = limitValue($('new-key-limit'));
    if (limit !== null) body.credit_limit = limit;
    const button = ev.submitter || ev.target.querySelector('button');
    button.disabled = true;
    try {
      const k = await api('POST', '/console/keys', body);
      ev.target.reset();
      reveal($('keys-new-key'), k.key, 'New key “' + (k.name || '(unnamed)') + '”');
      const copy = $('copy-key');
      await loadKeys();
      copy.focus();
    } catch (e) {
      showError(explainLimit(e));
    } finally {
      button.disabled = false;
    }
  });

  let editing = null;
  function openEdit(k) {
    editing = k;
    $('edit-name').value = k.name || '';
    $('edit-limit').value = k.credit_limit === null ? '' : String(k.credit_limit);
    $('edit-dialog').showModal();
    $('edit-name').focus();
  }
  $('edit-cancel').addEventListener('click', () => $('edit-dialog').close());
  $('edit-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const k = editing;
    $('edit-dialog').close();
    clearError();
    try {
      await api('PATCH', '/console/keys/' + encodeURIComponent(k.id),
        { name: $('edit-name').value.trim(), credit_limit: limitValue($('edit-limit')) });
      await loadKeys();
    } catch (e) {
      showError(e);
    }
  });

  let deleting = null;
  function openDelete(k) {
    deleting = k;
    $('delete-which').textContent = (k.name || '(unnamed)') + ' (' + k.prefix + '…' + k.last4 + ')';
    $('delete-dialog').showModal();
    $('delete-cancel').focus();
  }
  $('delete-cancel').addEventListener('click', () => $('delete-dialog').close());
  $('delete-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const k = deleting;
    $('delete-dialog').close();
    clearError();
    try {
      await api('DELETE', '/console/keys/' + encodeURIComponent(k.id));
      await loadKeys();
    } catch (e) {
      showError(e);
    }
  });

  // ---- monitors ------------------------------------------------------------

  // The account's keys by id: the monitors' key column and the form's
  // selector (active keys only), read again with the monitors.
  let keysById = new Map();
  const keyLabel = (k) => (k.name || '(unnamed)') + ' (' + k.prefix + '…' + k.last4 + ')';
  const monitorLabel = (m) => m.name || m.operation;

  // The form's inputs by the API field a refusal names (details.field; a
  // refusal of one of the operation's own parameters says details.in =
  // "params" and names the parameter).
  const monitorInputs = {
    key_id: 'monitor-key', platform: 'monitor-platform', endpoint: 'monitor-endpoint',
    params: 'monitor-params', interval_minutes: 'monitor-interval', name: 'monitor-name',
  };

  async function loadMonitors() {
    const [r, keys] = await Promise.all([api('GET', '/console/monitors'), api('GET', '/console/keys')]);
    keysById = new Map(keys.items.map((k) => [k.id, k]));
    fillKeySelect(keys.items);
    renderMonitors(r);
    if (runs.monitor) {
      const m = r.items.find((x) => x.id === runs.monitor.id);
      if (m) {
        runs.monitor = m;
        $('runs-title').textContent = 'Runs of ' + monitorLabel(m);
        markSelected(m.id);
      } else {
        closeRuns();
      }
    }
  }

  function fillKeySelect(keys) {
    const select = $('monitor-key');
    const chosen = select.value;
    const active = keys.filter((k) => k.status === 'active');
    select.replaceChildren();
    if (!active.length) {
      select.append(el('option', { value: '', text: 'No active key: create one under Keys' }));
      return;
    }
    for (const k of active) select.append(el('option', { value: k.id, text: keyLabel(k) }));
    if (active.some((k) => k.id === chosen)) select.value = chosen;
  }

  function renderMonitors(r) {
    $('monitors-count').textContent = '(' + r.count + ' of ' + r.max + ')';
    const body = $('monitors-table').tBodies[0];
    body.replaceChildren();
    if (r.items.length === 0) {
      body.append(el('tr', {}, el('td', { colspan: 7, class: 'muted', text: 'No monitors yet: create one above.' })));
    }
    for (const m of r.items) body.append(monitorRow(m));
  }

  // operationCode shows /v1/platform/endpoint, breakable after each slash.
  function operationCode(path) {
    const code = el('code');
    path.split('/').forEach((seg, i) => {
      if (i > 0) code.append('/', el('wbr'));
      code.append(seg);
    });
    return code;
  }

  function monitorRow(m) {
    const label = monitorLabel(m);
    const act = (text, aria, fn, cls) => el('button', {
      type: 'button', class: cls || 'secondary', text, 'aria-label': aria,
      onclick: async (ev) => {
        ev.target.disabled = true;
        try { await fn(); } catch (e) { showError(e); } finally { ev.target.disabled = false; }
      },
    });
    const change = async (what) => {
      clearError();
      await api('POST', '/console/monitors/' + encodeURIComponent(m.id) + '/' + what);
      await loadMonitors();
    };
    const state = el('td', {}, el('span', { class: 'badge ' + m.state, text: m.state }));
    if (m.state === 'paused' && m.paused_message) {
      state.append(el('div', { class: 'note state-note', 'data-reason': m.paused_reason, text: m.paused_message }));
    } else if (m.consecutive_failures > 0) {
      state.append(el('div', { class: 'note state-note', text: m.consecutive_failures + ' ' + (m.consecutive_failures === 1 ? 'run' : 'runs') + ' in a row did not succeed' }));
    }
    // The key each run is made with, under the monitor's name.
    const k = keysById.get(m.key_id);
    const key = el('div', { class: 'note' }, 'key ');
    if (k) {
      key.append(el('code', { text: k.prefix + '…' + k.last4 }), k.name ? ' ' + k.name : '');
      if (k.status !== 'active') key.append(' ', el('span', { class: 'badge ' + k.status, text: k.status }));
    } else {
      key.append('deleted');
    }
    const names = Object.keys(m.params || {}).sort();
    const params = names.length
      ? el('ul', { class: 'params' }, ...names.map((n) => el('li', {}, el('code', { text: n + '=' + m.params[n] }))))
      : el('span', { class: 'muted', text: 'none' });
    const actions = el('div', { class: 'actions' },
      m.state === 'paused'
        ? act('Resume', 'Resume monitor ' + label, () => change('resume'))
        : act('Pause', 'Pause monitor ' + label, () => change('pause')),
      act('Runs', 'Show runs of monitor ' + label, () => openRuns(m)),
      act('Delete', 'Delete monitor ' + label, async () => openMonitorDelete(m), 'danger'));
    return el('tr', { 'data-monitor-id': m.id, 'data-state': m.state, class: runs.monitor && runs.monitor.id === m.id ? 'selected' : null },
      el('td', {}, m.name ? el('span', { class: 'name', text: m.name }) : el('span', { class: 'muted', text: '(unnamed)' }), key),
      el('td', { class: 'op' }, operationCode(m.operation)),
      el('td', {}, params),
      el('td', { text: num(m.interval_minutes) + ' min' }),
      state,
      m.last_run_at
        ? el('td', {}, when(m.last_run_at), el('div', {}, el('span', { class: 'badge ' + (m.last_run_status || ''), text: m.last_run_status || '' })))
        : el('td', { class: 'muted', text: 'not yet' }),
      el('td', {}, actions));
  }

  // ---- the create form: refusals next to the field they name

  function clearFieldErrors() {
    for (const field of Object.keys(monitorInputs)) clearFieldError(field);
  }

  function clearFieldError(field) {
    const box = $(monitorInputs[field] + '-error');
    box.replaceChildren();
    box.hidden = true;
    $(monitorInputs[field]).removeAttribute('aria-invalid');
  }

  function fieldError(field, message, requestId) {
    const input = $(monitorInputs[field]);
    const box = $(monitorInputs[field] + '-error');
    box.replaceChildren(message);
    if (requestId) box.append(' ', el('span', { class: 'muted', text: '(request ' + requestId + ')' }));
    box.hidden = false;
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  }

  // placeFieldError shows a refusal next to its field; false when it
  // names none of the form's fields.
  function placeFieldError(e) {
    if (!(e instanceof ApiError) || e.status < 400 || e.status >= 500) return false;
    const d = e.details || {};
    const field = d.in === 'params' ? 'params' : d.field;
    if (!Object.hasOwn(monitorInputs, field)) return false;
    fieldError(field, e.message, e.requestId);
    return true;
  }

  for (const field of Object.keys(monitorInputs)) {
    $(monitorInputs[field]).addEventListener('input', () => clearFieldError(field));
  }

  $('create-monitor-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    clearFieldErrors();
    $('create-monitor-status').textContent = '';
    const body = { platform: $('monitor-platform').value.trim(), endpoint: $('monitor-endpoint').value.trim() };
    const key = $('monitor-key').value;
    if (key) body.key_id = key;
    const text = $('monitor-params').value.trim();
    if (text !== '') {
      try {
        body.params = JSON.parse(text);
      } catch (e) {
        fieldError('params', 'The parameters are not valid JSON (' + e.message + '). Write an object such as {"query": "acme"}, or leave the box empty for none.');
        return;
      }
    }
    const interval = $('monitor-interval');
    const minutes = interval.value.trim();
    if (interval.validity.badInput || (minutes !== '' && !Number.isInteger(Number(minutes)))) {
      fieldError('interval_minutes', 'Every is a whole number of minutes from 5 to 10080.');
      return;
    }
    if (minutes !== '') body.interval_minutes = Number(minutes);
    const name = $('monitor-name').value.trim();
    if (name) body.name = name;
    const button = ev.submitter || ev.target.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const m = await api('POST', '/console/monitors', body);
      for (const id of ['monitor-platform', 'monitor-endpoint', 'monitor-params', 'monitor-name']) $(id).value = '';
      interval.value = '60';
      $('create-monitor-status').textContent = 'Monitor “' + monitorLabel(m) + '” created; its first run starts in a moment.';
      await loadMonitors();
    } catch (e) {
      if (!placeFieldError(e)) showError(e);
    } finally {
      button.disabled = false;
    }
  });

  $('monitors-refresh').addEventListener('click', () => { clearError(); loadMonitors().catch(showError); });

  let deletingMonitor = null;
  function openMonitorDelete(m) {
    deletingMonitor = m;
    $('monitor-delete-which').textContent = monitorLabel(m) + ' (' + m.operation + ')';
    $('monitor-delete-dialog').showModal();
    $('monitor-delete-cancel').focus();
  }
  $('monitor-delete-cancel').addEventListener('click', () => $('monitor-delete-dialog').close());
  $('monitor-delete-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const m = deletingMonitor;
    $('monitor-delete-dialog').close();
    clearError();
    try {
      await api('DELETE', '/console/monitors/' + encodeURIComponent(m.id));
      if (runs.monitor && runs.monitor.id === m.id) closeRuns();
      await loadMonitors();
      $('monitors-title').focus();
    } catch (e) {
      showError(e);
    }
  });

  // ---- a monitor's runs, newest first, paged with the API's cursor

  // seq numbers the loads: only the latest one's answer is shown.
  const runs = { monitor: null, next: null, seq: 0 };

  function markSelected(id) {
    for (const tr of $('monitors-table').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.monitorId === id);
  }

  async function openRuns(m) {
    clearError();
    runs.monitor = m;
    runs.next = null;
    $('runs-title').textContent = 'Runs of ' + monitorLabel(m);
    $('runs-table').tBodies[0].replaceChildren();
    $('runs-panel').hidden = false;
    markSelected(m.id);
    await loadRuns(false);
    $('runs-title').focus();
  }

  function closeRuns() {
    const id = runs.monitor && runs.monitor.id;
    runs.monitor = null;
    runs.next = null;
    $('runs-panel').hidden = true;
    $('runs-table').tBodies[0].replaceChildren();
    $('runs-shown').textContent = '';
    markSelected('');
    return id;
  }

  async function loadRuns(more) {
    const m = runs.monitor;
    if (!m) return;
    const q = new URLSearchParams({ limit: $('runs-limit').value });
    if (more && runs.next) q.set('cursor', runs.next);
    const seq = ++runs.seq;
    const r = await api('GET', '/console/monitors/' + encodeURIComponent(m.id) + '/runs?' + q);
    if (seq !== runs.seq || !runs.monitor || runs.monitor.id !== m.id) return; // another load, or another monitor's runs, came since
    const body = $('runs-table').tBodies[0];
    if (!more) body.replaceChildren();
    for (const run of r.items) body.append(runRow(run));
    const shown = body.querySelectorAll('tr[data-run-id]').length;
    if (shown === 0) {
      body.replaceChildren(el('tr', {}, el('td', { colspan: 6, class: 'muted', text: 'No runs yet: the first starts moments after the monitor is created.' })));
    }
    runs.next = r.has_more ? r.cursor : null;
    $('runs-more').hidden = !runs.next;
    $('runs-shown').textContent = shown + (shown === 1 ? ' run' : ' runs') + ' shown' + (runs.next ? '; older runs remain.' : '.');
  }

  function runRow(run) {
    return el('tr', { 'data-run-id': run.id, 'data-status': run.status },
      el('td', { text: when(run.scheduled_at), title: 'started ' + when(run.started_at) + (run.finished_at ? ', finished ' + when(run.finished_at) : '') }),
      el('td', {}, el('span', { class: 'badge ' + run.status, text: run.status })),
      el('td', { class: 'num', text: run.http_status === null || run.http_status === undefined ? '–' : String(run.http_status) }),
      el('td', { class: 'num', text: num(run.credits_used) }),
      el('td', {}, run.request_id
        ? el('button', {
          type: 'button', class: 'link', text: run.request_id, 'aria-label': 'Show request ' + run.request_id + ' in the ledger',
          onclick: () => showInLedger(run.request_id),
        })
        : '–'),
      // A run that did not succeed has no changes: it says why instead.
      el('td', {}, run.error
        ? el('div', { class: 'run-error' }, el('code', { text: run.error.type }), ': ' + run.error.message)
        : changesSummary(run)));
  }

  // changesSummary is what changed since the monitor's previous successful
  // run: per list, how many records were added, removed and changed (with
  // the changed records' field names), then the other fields that changed.
  function changesSummary(run) {
    const c = run.changes;
    if (!c) return el('span', { class: 'muted', text: run.status === 'succeeded' ? 'nothing to compare with' : '–' });
    const lines = [];
    for (const [name, l] of Object.entries(c.lists || {})) {
      const parts = [];
      const added = l.added || [], removed = l.removed || [], changed = l.changed || [];
      if (added.length) parts.push(num(added.length) + ' added');
      if (removed.length) parts.push(num(removed.length) + ' removed');
      if (changed.length) {
        const fields = [...new Set(changed.flatMap((i) => i.fields || []))].sort();
        parts.push(num(changed.length) + ' changed' + (fields.length ? ' (' + fields.join(', ') + ')' : ''));
      }
      lines.push(name + ': ' + parts.join(', ') + (l.truncated ? ', and more' : ''));
    }
    const fields = (c.fields || []).map((f) => f.name);
    if (fields.length) lines.push('fields: ' + fields.join(', '));
    if (!lines.length) return el('span', { class: 'muted', text: 'no change' });
    return el('ul', { class: 'changes' }, ...lines.map((t) => el('li', { text: t })));
  }

  function showInLedger(requestId) {
    ledger.requestId = requestId;
    ledger.pages = [''];
    ledger.index = 0;
    $('ledger-request-id').value = requestId;
    location.hash = '#ledger';
  }

  $('runs-more').addEventListener('click', async () => {
    clearError();
    try {
      await loadRuns(true);
      if ($('runs-more').hidden) $('runs-title').focus();
    } catch (e) {
      showError(e);
    }
  });
  $('runs-refresh').addEventListener('click', () => { clearError(); loadRuns(false).catch(showError); });
  $('runs-limit').addEventListener('change', () => { clearError(); loadRuns(false).catch(showError); });
  $('runs-close').addEventListener('click', () => {
    const id = closeRuns();
    const row = id && $('monitors-table').querySelector('tr[data-monitor-id="' + CSS.escape(id) + '"]');
    const button = row && row.querySelector('button[aria-label^="Show runs"]');
    (button || $('monitors-title')).focus();
  });

  function resetMonitors() {
    closeRuns();
    keysById = new Map();
    clearFieldErrors();
    $('create-monitor-form').reset();
    $('create-monitor-status').textContent = '';
    $('monitor-key').replaceChildren();
    $('monitors-count').textContent = '';
    $('monitors-table').tBodies[0].replaceChildren();
  }

  // ---- ledger --------------------------------------------------------------

  // The ledger pages with the API's cursor: pages[i] is the cursor that
  // fetches page i ('' for the newest).
  const ledger = { pages: [''], index: 0, requestId: '', next: null };

  async function loadLedger() {
    const q = new URLSearchParams({ limit: $('ledger-limit').value });
    const cursor = ledger.pages[ledger.index];
    if (cursor) q.set('cursor', cursor);
    if (ledger.requestId) q.set('request_id', ledger.requestId);
    const r = await api('GET', '/console/ledger?' + q);
    ledger.next = r.has_more ? r.cursor : null;
    renderLedger(r.items);
    $('ledger-newer').disabled = ledger.index === 0;
    $('ledger-older').disabled = !ledger.next;
    $('ledger-page').textContent = 'Page ' + (ledger.index + 1) + (ledger.requestId ? ' · request ' + ledger.requestId : '');
  }

  function renderLedger(items) {
    const table = $('ledger-table');
    for (const b of Array.from(table.tBodies)) b.remove();
    if (items.length === 0) {
      table.append(el('tbody', {}, el('tr', {}, el('td', { colspan: 7, class: 'muted', text: 'No entries.' }))));
      return;
    }
    // One group per request on this page, in the order the newest entry
    // of each appears: a debit and its refund sit together.
    const groups = new Map();
    items.forEach((e, i) => {
      const g = e.request_id || ('#' + i);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(e);
    });
    for (const entries of groups.values()) {
      const paired = entries.length > 1;
      const body = el('tbody', { class: paired ? 'pair' : null, 'data-request-id': entries[0].request_id });
      entries.forEach((e, i) => {
        const amount = (e.amount > 0 ? '+' : '') + num(e.amount);
        const type = el('td', {}, e.type);
        if (paired && i === 0) {
          const net = entries.reduce((s, x) => s + x.amount, 0);
          type.append(el('div', { class: 'pair-note', text: 'same request · net ' + (net > 0 ? '+' : '') + num(net) }));
        }
        body.append(el('tr', { 'data-entry-id': e.id, 'data-type': e.type },
          el('td', { text: when(e.created_at) }),
          type,
          el('td', { class: 'num ' + (e.amount < 0 ? 'amount-neg' : 'amount-pos'), text: amount }),
          el('td', { class: 'num', text: num(e.balance_after) }),
          el('td', { text: e.endpoint || (e.note ? e.note : '–') }),
          el('td', {}, e.key_prefix ? el('code', { text: e.key_prefix }) : '–'),
          el('td', {}, e.request_id
            ? el('button', {
              type: 'button', class: 'link', text: e.request_id, 'aria-label': 'Show only entries of request ' + e.request_id,
              onclick: () => filterLedger(e.request_id),
            })
            : '–')));
      });
      $('ledger-table').append(body);
    }
  }

  async function filterLedger(requestId) {
    clearError();
    ledger.requestId = requestId;
    ledger.pages = [''];
    ledger.index = 0;
    $('ledger-request-id').value = requestId;
    try { await loadLedger(); } catch (e) { showError(e); }
  }

  $('ledger-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    filterLedger($('ledger-request-id').value.trim());
  });
  $('ledger-clear').addEventListener('click', () => filterLedger(''));
  $('ledger-limit').addEventListener('change', () => filterLedger(ledger.requestId));
  $('ledger-older').addEventListener('click', async () => {
    if (!ledger.next) return;
    ledger.pages = ledger.pages.slice(0, ledger.index + 1);
    ledger.pages.push(ledger.next);
    ledger.index++;
    try { await loadLedger(); } catch (e) { showError(e); }
  });
  $('ledger-newer').addEventListener('click', async () => {
    if (ledger.index === 0) return;
    ledger.index--;
    try { await loadLedger(); } catch (e) { showError(e); }
  });

  // ---- usage ---------------------------------------------------------------

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') n.textContent = v;
      else n.setAttribute(k, v);
    }
    for (const c of children) if (c) n.append(c);
    return n;
  }

  // dayChart draws one bar per day; each bar has its figure as a tooltip,
  // and the chart a text summary for screen readers.
  function dayChart(container, days, field, unit) {
    const W = 720, H = 200, left = 44, bottom = 24, top = 10;
    const max = Math.max(1, ...days.map((d) => d[field]));
    const total = days.reduce((s, d) => s + d[field], 0);
    const slot = (W - left) / Math.max(1, days.length);
    const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label':
      `${unit} per day, ${days.length} days from ${days[0] ? days[0].date : ''}: ${num(total)} in all, at most ${num(max)} in a day.` });
    chart.append(svg('title', { text: `${unit} per day` }));
    chart.append(svg('line', { class: 'axis', x1: left, y1: H - bottom, x2: W, y2: H - bottom }));
    chart.append(svg('text', { x: left - 6, y: top + 8, 'text-anchor': 'end', text: num(max) }));
    chart.append(svg('text', { x: left - 6, y: H - bottom, 'text-anchor': 'end', text: '0' }));
    days.forEach((d, i) => {
      const h = Math.round(((H - bottom - top) * d[field]) / max);
      const x = left + i * slot + slot * 0.15;
      chart.append(svg('rect', { class: 'bar', x: x.toFixed(1), y: H - bottom - h, width: (slot * 0.7).toFixed(1), height: h, 'data-date': d.date },
        svg('title', { text: `${d.date}: ${num(d[field])} ${unit.toLowerCase()}` })));
      // A date under every few bars, and under the last one unless the
      // previous label is too close to it.
      const every = Math.ceil(days.length / 8);
      const last = i === days.length - 1;
      if (last || (i % every === 0 && days.length - 1 - i >= every / 2)) {
        chart.append(svg('text', { x: (x + slot * 0.35).toFixed(1), y: H - 6, 'text-anchor': 'middle', text: d.date.slice(5) }));
      }
    });
    if (total === 0) chart.append(svg('text', { class: 'empty', x: W / 2, y: H / 2, 'text-anchor': 'middle', text: 'No ' + unit.toLowerCase() + ' in this period' }));
    container.replaceChildren(chart);
  }

  function endpointChart(container, endpoints) {
    const shown = endpoints.slice(0, 12);
    const row = 26, left = 260, W = 720, H = Math.max(1, shown.length) * row + 8;
    const max = Math.max(1, ...shown.map((e) => e.calls));
    const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Calls per endpoint: ' +
      (shown.length ? shown.map((e) => `${e.endpoint} ${num(e.calls)}`).join(', ') : 'none') });
    chart.append(svg('title', { text: 'Calls per endpoint' }));
    shown.forEach((e, i) => {
      const y = 4 + i * row;
      const w = Math.max(2, Math.round(((W - left - 60) * e.calls) / max));
      const errW = e.calls ? Math.round((w * e.errors) / e.calls) : 0;
      chart.append(svg('text', { x: left - 8, y: y + 16, 'text-anchor': 'end', text: e.endpoint.length > 38 ? '…' + e.endpoint.slice(-37) : e.endpoint }));
      chart.append(svg('rect', { class: 'bar', x: left, y, width: w, height: row - 8 },
        svg('title', { text: `${e.endpoint}: ${num(e.calls)} calls, ${num(e.errors)} errors` })));
      if (errW > 0) chart.append(svg('rect', { class: 'bar err', x: left + w - errW, y, width: errW, height: row - 8 }));
      chart.append(svg('text', { x: left + w + 6, y: y + 16, text: num(e.calls) }));
    });
    if (!shown.length) chart.append(svg('text', { class: 'empty', x: W / 2, y: 20, 'text-anchor': 'middle', text: 'No calls in this period' }));
    container.replaceChildren(chart);
  }

  async function loadUsage() {
    const u = await api('GET', '/console/usage?days=' + encodeURIComponent($('usage-days').value));
    $('us-calls').textContent = num(u.totals.calls);
    $('us-credits').textContent = num(u.totals.credits);
    $('us-errors').textContent = pct(u.totals.error_rate);
    dayChart($('chart-calls'), u.days, 'calls', 'Calls');
    dayChart($('chart-credits'), u.days, 'credits', 'Credits');
    endpointChart($('chart-endpoints'), u.endpoints);
    const body = $('usage-table').tBodies[0];
    body.replaceChildren();
    if (!u.endpoints.length) body.append(el('tr', {}, el('td', { colspan: 5, class: 'muted', text: 'No calls in this period.' })));
    for (const e of u.endpoints) {
      body.append(el('tr', {},
        el('td', {}, el('code', { text: e.endpoint })),
        el('td', { class: 'num', text: num(e.calls) }),
        el('td', { class: 'num', text: num(e.credits) }),
        el('td', { class: 'num', text: num(e.errors) }),
        el('td', { class: 'num', text: pct(e.error_rate) })));
    }
  }
  $('usage-days').addEventListener('change', () => loadUsage().catch(showError));

  // ---- session -------------------------------------------------------------

  function signedInView(session) {
    csrf = session.csrf_token;
    signedIn = true;
    $('nav').hidden = false;
    route();
  }

  // signedOutView drops everything the account's pages showed.
  function signedOutView() {
    csrf = '';
    signedIn = false;
    $('nav').hidden = true;
    for (const id of ['overview-new-key', 'keys-new-key', 'status-list', 'chart-calls', 'chart-credits', 'chart-endpoints']) $(id).replaceChildren();
    for (const t of ['keys-table', 'usage-table']) $(t).tBodies[0].replaceChildren();
    for (const b of Array.from($('ledger-table').tBodies)) b.remove();
    resetMonitors();
    showSection('signin');
    document.title = 'Sign in · Meridian console';
    $('signin-token').focus();
  }

  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    const input = $('signin-token');
    try {
      const s = await api('POST', '/console/session', { token: input.value.trim() });
      input.value = '';
      signedInView(s);
    } catch (e) {
      showError(e);
    }
  });

  $('sign-out').addEventListener('click', async () => {
    clearError();
    try {
      await api('DELETE', '/console/session');
    } catch (e) {
      showError(e);
      return;
    }
    ledger.pages = [''];
    ledger.index = 0;
    ledger.requestId = '';
    signedOutView();
  });

  window.addEventListener('hashchange', () => { clearError(); route(); });

  (async () => {
    try {
      signedInView(await api('GET', '/console/session'));
    } catch (e) {
      signedOutView();
      if (!(e instanceof ApiError && e.status === 401)) showError(e);
    }
  })();
})();
