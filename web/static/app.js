// The demo page's client: MCP over WebSocket with resumable requests (SEP-975).
// One call at a time; its state lives in sessionStorage so that a reload of this
// tab finds it again.
'use strict';

(function () {
  const KEY = 'mcp-resume-demo/call';
  const SEQ = 'io.mcp-resume/seq';
  const ACK = 'io.mcp-resume/ack';
  const FINAL = ['completed', 'failed', 'expired', 'cancelled'];
  const $ = (id) => document.getElementById(id);

  // call: {id, seconds, steps, token, seq, progress, total, state, result, task, taskId}
  // A call made as a task (2025-11-25 tasks: params.task) is polled with
  // tasks/get, its result read with tasks/result; it has no progress.
  let call = load();
  let ws = null;
  let connected = false;
  let retries = 0;
  let unloading = false;
  let nextID = 1;
  const pending = new Map(); // id of our other requests -> {resolve, reject}

  // For tests and the curious: what this page load received and sent.
  const demo = { events: [], sent: [], drop: () => ws && ws.close(4000, 'dropped by the page') };
  window.mcpDemo = demo;
  Object.defineProperty(demo, 'call', { get: () => call && { ...call } });

  function load() {
    try { return JSON.parse(sessionStorage.getItem(KEY)); } catch { return null; }
  }
  function save() {
    if (call) sessionStorage.setItem(KEY, JSON.stringify(call)); else sessionStorage.removeItem(KEY);
  }

  function log(text) {
    const li = document.createElement('li');
    li.textContent = new Date().toLocaleTimeString() + '  ' + text;
    $('log').prepend(li);
    while ($('log').children.length > 200) $('log').lastChild.remove();
  }

  function render() {
    const state = call ? call.state : 'idle';
    $('state').textContent = state;
    $('state').dataset.state = state;
    const total = call ? call.total || call.steps : 0;
    const progress = call ? call.progress : 0;
    const bar = $('bar');
    bar.dataset.progress = progress;
    bar.dataset.total = total;
    bar.setAttribute('aria-valuemax', String(total || 1));
    bar.setAttribute('aria-valuenow', String(progress));
    $('fill').style.width = total ? (100 * progress / total) + '%' : '0';
    $('step').textContent = !call ? 'no call yet' : 'step ' + progress + ' of ' + total;
    $('req-id').textContent = call ? call.id : '–';
    // The token is a bearer secret: show only enough to tell tokens apart.
    $('token').textContent = call && call.token ? call.token.slice(0, 6) + '… (in sessionStorage)' : '–';
    $('seq').textContent = call && call.seq ? String(call.seq) : '–';
    const result = $('result');
    result.hidden = !(call && call.result);
    result.textContent = call && call.result ? call.result : '';
    const active = call && !FINAL.includes(call.state);
    $('start').disabled = !connected || active;
    $('cancel').disabled = !connected || !active;
    $('drop').disabled = !connected;
  }

  function setConn(state) {
    connected = state === 'connected';
    $('conn').textContent = state;
    $('conn').dataset.conn = state;
    render();
  }

  function setState(state, note) {
    if (!call) return;
    if (call.state !== state) log('call ' + state + (note ? ': ' + note : ''));
    call.state = state;
    save();
    render();
  }

  function send(msg) {
    demo.sent.push(msg);
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
  }

  // request sends one of our own requests (not the call) and resolves with its result.
  function request(method, params) {
    const id = 'page-' + nextID++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      send({ jsonrpc: '2.0', id, method, params });
    });
  }

  function wsURL() {
    const q = new URLSearchParams(location.search).get('ws');
    if (q) return q;
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
  }

  // A page cannot see WebSocket pings, so it checks the connection itself: a
  // ping every HEARTBEAT ms, and a connection that brought nothing (no answer, no
  // message) for twice that is taken for dead (a laptop that slept, a path that
  // stopped carrying bytes without closing) and the call resumed on a new one.
  // ?heartbeat=MS sets it (the browser test uses a short one).
  const HEARTBEAT = Number(new URLSearchParams(location.search).get('heartbeat')) || 10000;
  let heard = 0; // when the current connection last brought a message
  let beat = null;

  function heartbeat(sock) {
    clearInterval(beat);
    heard = Date.now();
    beat = setInterval(() => {
      if (ws !== sock) { clearInterval(beat); return; }
      const quiet = Date.now() - heard;
      if (quiet > 2 * HEARTBEAT) {
        clearInterval(beat);
        lost(sock, 'no data for ' + (quiet / 1000).toFixed(1) + ' s');
        sock.onclose = null;
        sock.close(4001, 'silent');
        return;
      }
      request('ping', {}).catch(() => {});
    }, HEARTBEAT);
  }

  // lost settles what a connection that ended leaves: its pending requests
  // fail, a running call is detached (the server keeps it), and a new connection
  // is made.
  function lost(sock, why) {
    if (ws !== sock) return;
    ws = null;
    for (const p of pending.values()) p.reject(new Error('connection closed'));
    pending.clear();
    setConn('disconnected');
    log('connection lost (' + why + ')');
    if (call && !FINAL.includes(call.state)) setState('detached', 'the server keeps it running');
    if (unloading) return;
    if (!sock.opened) {
      // Refused before it opened: a browser does not say why (1006). Ask over
      // HTTP whether the server wants an API key, which a page cannot send on a
      // WebSocket handshake (browsers set no headers there).
      fetch(wsURL().replace(/^ws/, 'http'), { cache: 'no-store' }).then((r) => {
        if (r.status === 401) {
          setConn('unauthorized');
          log('this server requires an API key (serve --api-keys), which a browser page cannot send on a WebSocket handshake; use mcp-resume call, or a server without --api-keys');
          return;
        }
        setTimeout(connect, Math.min(5000, 250 * 2 ** retries++));
      }, () => setTimeout(connect, Math.min(5000, 250 * 2 ** retries++)));
      return;
    }
    setTimeout(connect, Math.min(5000, 250 * 2 ** retries++));
  }

  function connect() {
    setConn('connecting');
    const sock = new WebSocket(wsURL(), 'mcp');
    ws = sock;
    sock.onopen = async () => {
      sock.opened = true;
      retries = 0;
      heartbeat(sock);
      try {
        await request('initialize', {
          protocolVersion: '2025-06-18',
          // Ack mode: the server keeps every message until the page acknowledges
          // it (on resume), so what a dying connection held in buffers is sent
          // again: every progress step exactly once.
          capabilities: { resumableRequests: { extensions: [ACK] } },
          clientInfo: { name: 'mcp-resume demo page', version: '1' },
        });
        send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        setConn('connected');
        log('connected to ' + wsURL());
        await recover();
      } catch (e) {
        log('initialize failed: ' + e.message);
      }
    };
    sock.onmessage = (e) => {
      heard = Date.now();
      let m;
      try { m = JSON.parse(e.data); } catch { log('unreadable message'); return; }
      onMessage(m);
    };
    sock.onclose = (e) => lost(sock, 'closed, ' + e.code + (e.reason ? ' ' + e.reason : ''));
  }

  // recover picks up a call this tab started before a reload or a drop.
  async function recover() {
    if (!call || FINAL.includes(call.state)) return;
    if (call.task) {
      if (call.taskId) poll();
      else setState('expired', 'no task id was received');
      return;
    }
    if (!call.token) {
      // The connection died before the resume policy arrived: the call cannot be
      // found again.
      setState('expired', 'no resume token was received');
      return;
    }
    let st;
    try {
      st = await request('requests/getStatus', { requestId: call.id, resumeToken: call.token });
    } catch (e) {
      endWithError(e.data);
      return;
    }
    log('getStatus: ' + st.status + (st.hasPendingMessage ? ', messages pending' : ''));
    // Same id as the original call: the call's response answers this message.
    const params = { resumeToken: call.token };
    if (call.seq) params._meta = { [ACK]: call.seq };
    send({ jsonrpc: '2.0', id: call.id, method: 'requests/resume', params });
    setState('processing', 'resumed after message ' + (call.seq || 0));
  }

  function endWithError(err) {
    const reason = err && err.data && err.data.reason;
    if (reason === 'cancelled') setState('cancelled');
    else if (reason === 'expired' || reason === 'not_found') setState('expired', reason);
    else setState('failed', err ? err.message : 'unknown error');
    call.token = null;
    save();
    render();
  }

  function seqOf(obj) {
    return obj && obj._meta && typeof obj._meta[SEQ] === 'number' ? obj._meta[SEQ] : 0;
  }

  // fresh records a sequenced message; false for one already seen.
  function fresh(obj) {
    const seq = seqOf(obj);
    if (seq && seq <= call.seq) return false;
    if (seq) call.seq = seq;
    return true;
  }

  function onMessage(m) {
    if (m.method && m.id !== undefined) {
      // A request from the server: answer ping, refuse the rest.
      if (m.method === 'ping') send({ jsonrpc: '2.0', id: m.id, result: {} });
      else send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'not supported by this page' } });
      return;
    }
    if (m.method === 'notifications/requests/resumePolicy') {
      if (call && m.params.requestId === call.id) {
        call.token = m.params.resumeToken;
        call.maxWait = m.params.maxWait;
        save();
        render();
        log('resumable for ' + m.params.maxWait + 's without a client');
      }
      return;
    }
    if (m.method === 'notifications/progress') {
      if (!call || m.params.progressToken !== call.id || !fresh(m.params)) return;
      call.progress = m.params.progress;
      call.total = m.params.total || call.total;
      if (call.state !== 'processing') call.state = 'processing';
      demo.events.push({ kind: 'progress', progress: call.progress, seq: call.seq });
      save();
      render();
      return;
    }
    if (m.method) return; // other notifications
    if (call && m.id === call.id) {
      onCallResponse(m);
      return;
    }
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) {
      const e = new Error(m.error.message);
      e.data = m.error;
      p.reject(e);
    } else {
      p.resolve(m.result);
    }
  }

  // poll asks for the task's state until it has ended, then for its result.
  async function poll() {
    const taskId = call && call.taskId;
    if (!taskId || FINAL.includes(call.state) || call.polling) return;
    call.polling = true;
    try {
      for (;;) {
        const t = await request('tasks/get', { taskId });
        if (!call || call.taskId !== taskId) return;
        demo.events.push({ kind: 'task', status: t.status });
        if (t.status === 'cancelled' || t.status === 'failed') {
          setState(t.status);
          return;
        }
        if (t.status === 'completed') {
          const res = await request('tasks/result', { taskId });
          call.result = (res.content || []).map((c) => c.text).filter(Boolean).join(' ');
          call.progress = call.total;
          demo.events.push({ kind: 'result', text: call.result });
          setState('completed', call.result);
          return;
        }
        setState('processing', 'task ' + t.status);
        await new Promise((r) => setTimeout(r, Math.max(200, t.pollInterval || 1000)));
      }
    } catch (e) {
      if (e.data) endWithError(e.data); // otherwise the connection went: recover() polls again
    } finally {
      if (call) call.polling = false;
    }
  }

  function onCallResponse(m) {
    if (call.task && m.result && m.result.task) {
      call.taskId = m.result.task.taskId;
      save();
      log('running as task ' + call.taskId.slice(0, 12) + '…');
      poll();
      return;
    }
    if (m.error) {
      demo.events.push({ kind: 'error', reason: m.error.data && m.error.data.reason });
      endWithError(m.error);
      return;
    }
    if (!fresh(m.result)) return;
    const text = (m.result.content || []).map((c) => c.text).filter(Boolean).join(' ');
    call.result = text;
    demo.events.push({ kind: 'result', text, seq: call.seq });
    const token = call.token;
    call.token = null;
    setState(m.result.isError ? 'failed' : 'completed', text);
    // Acknowledging the final response frees it on the server at once.
    if (token && call.seq) {
      request('requests/getStatus', { requestId: call.id, resumeToken: token, _meta: { [ACK]: call.seq } }).catch(() => {});
    }
  }

  function start(ev) {
    ev.preventDefault();
    const seconds = Number($('seconds').value) || 30;
    const steps = Math.max(1, Math.floor(Number($('steps').value) || 30));
    const id = 'countdown-' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 8);
    const task = $('as-task').checked;
    call = { id, seconds, steps, token: null, seq: 0, progress: 0, total: steps, state: 'processing', result: null, task, taskId: null };
    save();
    render();
    log('tools/call countdown(' + seconds + 's, ' + steps + ' steps) as ' + id + (task ? ', as a task' : ''));
    const params = { name: 'countdown', arguments: { seconds, steps }, _meta: { progressToken: id } };
    if (task) params.task = { ttl: 600000 };
    send({ jsonrpc: '2.0', id, method: 'tools/call', params });
  }

  function cancel() {
    if (!call || FINAL.includes(call.state)) return;
    if (call.task) {
      if (call.taskId) request('tasks/cancel', { taskId: call.taskId }).catch(() => {});
      setState('cancelled');
      return;
    }
    // With resumeToken (an mcp-resume extension) the cancel also reaches a call
    // that is attached to no connection, or to another one.
    send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: call.id, reason: 'cancelled on the page', resumeToken: call.token || undefined } });
    call.token = null;
    setState('cancelled');
  }

  $('start-form').addEventListener('submit', start);
  $('cancel').addEventListener('click', cancel);
  $('drop').addEventListener('click', () => demo.drop());
  window.addEventListener('pagehide', () => { unloading = true; });
  if (call) {
    $('seconds').value = call.seconds;
    $('steps').value = call.steps;
    $('as-task').checked = !!call.task;
    call.polling = false;
    if (!FINAL.includes(call.state)) call.state = 'detached';
  }
  render();
  if (call) log('found call ' + call.id + ' in sessionStorage (' + call.state + ', step ' + call.progress + ')');
  connect();
})();
