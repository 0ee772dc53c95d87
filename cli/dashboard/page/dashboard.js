// The dashboard page: renders the snapshots the server streams (GET /api/stream) and sends stop
// requests (POST /api/jobs/<id>/stop). Plain browser JavaScript; the charts are uPlot's.
'use strict';

(function dashboard() {
  const $ = (id) => document.getElementById(id);
  let snapshot;
  let selectedId = decodeURIComponent((location.hash.match(/job=([^&]+)/) || [])[1] || '');
  /** The charts of the selected job, made when it is first shown. */
  let charts;

  function cell(row, text) {
    const td = document.createElement('td');
    setCell(td, text);
    row.appendChild(td);
    return td;
  }

  function fixed(value, digits) {
    return typeof value === 'number' && Number.isFinite(value) ? value.toFixed(digits) : '';
  }

  function clock(iso) {
    return iso ? new Date(iso).toLocaleTimeString() : '';
  }

  function fillBody(table, rows) {
    const body = table.tBodies[0];
    body.replaceChildren(...rows);
  }

  function showConnection(state, text) {
    const badge = $('connection');
    badge.dataset.state = state;
    badge.textContent = text;
  }

  function describeEvent(e) {
    switch (e.type) {
      case 'started':
        return `epoch ${e.epoch}, ${e.tasksPerEpoch} tasks per epoch, ${e.records} records`;
      case 'epoch':
        return `closed epoch ${e.epoch - 1}: ${e.done} done, ${e.discarded} discarded`;
      case 'metrics':
        return `step ${e.version}: ${Object.entries(e.metrics)
          .map(([k, v]) => `${k} ${fixed(v, 4)}`)
          .join(', ')}; best ${fixed(e.best, 4)}`;
      case 'stopped':
        return `reason ${e.reason}${e.detail ? ` (${e.detail})` : ''}`;
      case 'failed':
        return `${e.field ? `${e.field}: ` : ''}${e.error}${e.refused ? ' (submission refused)' : ''}`;
      case 'task-retried':
      case 'task-discarded':
        return `task ${e.taskId} of epoch ${e.epoch} after ${e.failures} failures: ${e.error}`;
      case 'waiting':
        return `${e.trainers} of at least ${e.min} trainers`;
      case 'model-exported':
        return `to ${e.output} (best ${fixed(e.bestValue, 4)})`;
      case 'evaluation-failed':
        return e.error;
      default:
        return '';
    }
  }

  /**
   * The jobs table's rows by job id, made once and updated in place: a row rebuilt between a
   * click's mousedown and its mouseup would take no click, and snapshots come many a second.
   */
  const jobRows = new Map();

  function jobRow(jobId) {
    let tr = jobRows.get(jobId);
    if (!tr) {
      tr = document.createElement('tr');
      tr.dataset.jobId = jobId;
      for (let i = 0; i < 7; i++) tr.appendChild(document.createElement('td'));
      tr.addEventListener('click', () => select(jobId));
      jobRows.set(jobId, tr);
    }
    return tr;
  }

  /** Sets a cell's text (empty for none) and class, touching the page only where they change. */
  function setCell(td, text, className) {
    const value = text === undefined || text === null ? '' : String(text);
    if (td.textContent !== value) td.textContent = value;
    if (className !== undefined && td.className !== className) td.className = className;
  }

  function renderJobs() {
    const body = $('jobs').tBodies[0];
    const rows = snapshot.jobs.map((job) => {
      const tr = jobRow(job.jobId);
      tr.setAttribute('aria-selected', String(job.jobId === selectedId));
      const [id, state, epoch, last, best, trainers, started] = tr.cells;
      setCell(id, job.jobId);
      setCell(state, job.reason ? `${job.state} (${job.reason})` : job.state, `state-${job.state}`);
      setCell(epoch, job.epoch);
      setCell(last, fixed(job.lastValue, 4));
      setCell(best, fixed(job.best, 4));
      setCell(trainers, job.trainers);
      setCell(started, clock(job.startedAt));
      return tr;
    });
    // Rows move only where the order changed; a moved row is still the element clicked.
    rows.forEach((tr, i) => {
      if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] ?? null);
    });
    const shown = new Set(rows);
    for (const [jobId, tr] of jobRows) {
      if (!shown.has(tr)) {
        tr.remove();
        jobRows.delete(jobId);
      }
    }
    $('no-jobs').hidden = rows.length > 0;
  }

  function makeChart(container, xLabel, series) {
    const width = Math.max(300, container.clientWidth || 400);
    const opts = {
      width,
      height: 220,
      scales: { x: { time: false } },
      axes: [
        { label: xLabel },
        ...series.map((s, i) => ({ scale: s.scale, side: i === 0 ? 3 : 1, label: s.label, grid: { show: i === 0 } })),
      ],
      series: [
        { label: xLabel },
        ...series.map((s) => ({
          label: s.label,
          scale: s.scale,
          stroke: s.stroke,
          width: 2,
          points: { show: true, size: 4 },
        })),
      ],
    };
    return new window.uPlot(opts, [[], ...series.map(() => [])], container);
  }

  function createCharts(job) {
    for (const id of ['chart-steps', 'chart-time', 'chart-throughput']) $(id).replaceChildren();
    const lines = [
      { label: job.metric, scale: 'metric', stroke: '#1565c0' },
      { label: 'loss', scale: 'loss', stroke: '#c62828' },
    ];
    return {
      jobId: job.jobId,
      metric: job.metric,
      steps: makeChart($('chart-steps'), 'step', job.metric === 'loss' ? lines.slice(1) : lines),
      time: makeChart($('chart-time'), 'seconds', job.metric === 'loss' ? lines.slice(1) : lines),
      throughput: makeChart($('chart-throughput'), 'seconds', [
        { label: 'samples/s', scale: 'rate', stroke: '#2e7d32' },
      ]),
    };
  }

  function renderCharts(job) {
    if (!charts || charts.jobId !== job.jobId || charts.metric !== job.metric) charts = createCharts(job);
    const start = job.startedAt ? Date.parse(job.startedAt) : job.points.length ? job.points[0].t : Date.now();
    const points = [...job.points].sort((a, b) => a.step - b.step || a.t - b.t);
    const values = (list) =>
      job.metric === 'loss' ? [list.map((p) => p.loss)] : [list.map((p) => p.metric ?? null), list.map((p) => p.loss)];
    charts.steps.setData([points.map((p) => p.step), ...values(points)]);
    const byTime = [...job.points].sort((a, b) => a.t - b.t);
    charts.time.setData([byTime.map((p) => (p.t - start) / 1000), ...values(byTime)]);
    charts.throughput.setData([
      job.throughput.map((p) => (p.t - start) / 1000),
      job.throughput.map((p) => p.samplesPerSecond),
    ]);
    $('chart-steps').dataset.points = String(points.length);
    $('chart-time').dataset.points = String(byTime.length);
    $('chart-throughput').dataset.points = String(job.throughput.length);
  }

  function renderFacts(job, trainers) {
    const rate = job.throughput.length ? job.throughput[job.throughput.length - 1].samplesPerSecond : undefined;
    const reported = trainers.reduce((sum, t) => sum + (t.samplesPerSecond || 0), 0);
    const facts = [
      ['epoch', job.epoch],
      ['samples', job.samples],
      ['samples/s', fixed(rate, 0)],
      ["trainers' samples/s", trainers.length ? fixed(reported, 0) : ''],
      [`last ${job.metric}`, fixed(job.lastValue, 4)],
      [`best ${job.metric}`, fixed(job.best, 4)],
      ['started', job.startedAt ? new Date(job.startedAt).toLocaleString() : ''],
      ['stopped', job.stoppedAt ? new Date(job.stoppedAt).toLocaleString() : ''],
      ['output', job.output],
      ['error', job.error],
    ].filter(([, v]) => v !== undefined && v !== '');
    $('job-facts').replaceChildren(
      ...facts.map(([k, v]) => {
        const div = document.createElement('div');
        const dt = document.createElement('dt');
        const dd = document.createElement('dd');
        dt.textContent = k;
        dd.textContent = String(v);
        div.append(dt, dd);
        return div;
      }),
    );
  }

  function renderQueue(job) {
    // Closed epochs from the accounting; the epoch the counts are of, with its todo and pending.
    const rows = job.epochs
      .filter((e) => !job.tasks || e.epoch !== job.tasksEpoch)
      .map((e) => {
        const tr = document.createElement('tr');
        for (const v of [e.epoch, 0, 0, e.done, e.discarded]) cell(tr, v);
        return tr;
      });
    if (job.tasks) {
      const tr = document.createElement('tr');
      tr.dataset.current = 'true';
      for (const v of [job.tasksEpoch, job.tasks.todo, job.tasks.pending, job.tasks.done, job.tasks.discarded]) {
        cell(tr, v);
      }
      rows.push(tr);
    }
    fillBody($('tasks'), rows.reverse());
  }

  function renderMembers(job) {
    const trainers = snapshot.members.filter((m) => m.role === 'trainer');
    fillBody(
      $('trainers'),
      trainers.map((m) => {
        const tr = document.createElement('tr');
        tr.dataset.memberId = m.id;
        tr.dataset.pid = String(m.pid);
        for (const v of [m.id, m.pid, m.state, m.jobId, m.backend, fixed(m.samplesPerSecond, 0), m.taskId]) cell(tr, v);
        return tr;
      }),
    );
    const pservers = snapshot.members
      .filter((m) => m.role === 'pserver')
      .sort((a, b) => (a.shard ?? 0) - (b.shard ?? 0));
    fillBody(
      $('pservers'),
      pservers.map((m) => {
        const tr = document.createElement('tr');
        tr.dataset.memberId = m.id;
        const version = m.versions ? m.versions[job.jobId] : undefined;
        for (const v of [m.shard, m.id, m.state, version]) cell(tr, v);
        return tr;
      }),
    );
    return trainers.filter((m) => m.jobId === job.jobId);
  }

  function renderEvents(job) {
    const items = [...job.events].reverse().map((e) => {
      const li = document.createElement('li');
      li.dataset.type = e.type;
      li.textContent = `${clock(e.at)}  ${e.type}  ${describeEvent(e)}`;
      return li;
    });
    $('events').replaceChildren(...items);
  }

  function renderJob() {
    const job = snapshot.jobs.find((j) => j.jobId === selectedId);
    $('job-panel').hidden = job === undefined;
    if (!job) return;
    $('job-title').textContent = job.jobId;
    $('job-state').textContent = job.reason ? `${job.state} (${job.reason})` : job.state;
    $('job-state').className = `state-${job.state}`;
    $('job-panel').dataset.state = job.state;
    $('stop-button').disabled = !(job.state === 'running' || job.state === 'waiting');
    const working = renderMembers(job);
    renderFacts(job, working);
    renderCharts(job);
    renderQueue(job);
    renderEvents(job);
  }

  function render() {
    if (!snapshot) return;
    if (!snapshot.jobs.some((j) => j.jobId === selectedId) && snapshot.jobs.length > 0)
      selectedId = snapshot.jobs[0].jobId;
    $('master').textContent = snapshot.masterAnswering ? '' : 'no master answering';
    renderJobs();
    renderJob();
  }

  function select(jobId) {
    selectedId = jobId;
    history.replaceState(null, '', `#job=${encodeURIComponent(jobId)}`);
    $('stop-result').textContent = '';
    render();
  }

  async function stopSelected() {
    const jobId = selectedId;
    if (!jobId || !window.confirm(`Stop job ${jobId}?`)) return;
    $('stop-result').textContent = 'stopping…';
    try {
      const res = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/stop`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      const body = await res.json();
      $('stop-result').textContent = res.ok ? 'stop requested' : body.error;
    } catch (err) {
      $('stop-result').textContent = `stop not sent: ${err.message}`;
    }
  }

  function connect() {
    const stream = new EventSource('/api/stream');
    stream.addEventListener('snapshot', (message) => {
      snapshot = JSON.parse(message.data);
      if (snapshot.connected) showConnection('live', 'live');
      else showConnection('nats-down', 'NATS disconnected, reconnecting…');
      render();
    });
    // EventSource connects again by itself (after the server's retry delay) unless it was closed.
    stream.addEventListener('error', () => {
      showConnection('offline', 'dashboard server unreachable, reconnecting…');
      if (stream.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
    });
  }

  $('stop-button').addEventListener('click', () => void stopSelected());
  window.addEventListener('resize', () => {
    if (!charts) return;
    for (const [id, chart] of [
      ['chart-steps', charts.steps],
      ['chart-time', charts.time],
      ['chart-throughput', charts.throughput],
    ]) {
      chart.setSize({ width: Math.max(300, $(id).clientWidth), height: 220 });
    }
  });
  connect();
})();
