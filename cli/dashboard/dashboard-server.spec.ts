import { repoRoot } from '../repo-root.js';
import { DashboardServer, dashboardFiles } from './dashboard-server.js';
import { DashboardState } from './dashboard-state.js';

/** Reads server-sent events from a response body, one `{event, data}` at a time. */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields = Object.fromEntries(
        block
          .split('\n')
          .filter((line) => !line.startsWith(':') && line.includes(':'))
          .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trimStart()]),
      );
      if (fields.data !== undefined) yield { event: fields.event ?? 'message', data: fields.data };
    }
  }
}

describe('dashboard server', () => {
  let state: DashboardState;
  let server: DashboardServer;
  let url: string;
  let stopped: string[];
  let stopFails: boolean;

  beforeEach(async () => {
    state = new DashboardState();
    stopped = [];
    stopFails = false;
    server = new DashboardServer({
      state,
      stopJob: async (jobId) => {
        if (stopFails) throw new Error('no NATS');
        stopped.push(jobId);
      },
      files: dashboardFiles(repoRoot()),
      host: '127.0.0.1',
      port: 0,
    });
    url = await server.listen();
  });

  afterEach(async () => {
    await server.close();
  });

  test('dashboard server - serves the page, its script and the chart library', async () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const page = await fetch(url);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('/vendor/uPlot.iife.min.js');
    const script = await fetch(new URL('/dashboard.js', url));
    expect(script.headers.get('content-type')).toContain('javascript');
    const uplot = await fetch(new URL('/vendor/uPlot.iife.min.js', url));
    expect(uplot.status).toBe(200);
    expect(await uplot.text()).toContain('uPlot');
    const missing = await fetch(new URL('/../package.json', url));
    expect(missing.status).toBe(404);
  });

  test('dashboard server - the snapshot endpoint answers the state as JSON', async () => {
    state.setConnected(true);
    state.onMember('trainer.t1', {
      role: 'trainer',
      id: 't1',
      pid: 1,
      host: 'h',
      state: 'training',
      at: new Date().toISOString(),
    });
    const body = await (await fetch(new URL('/api/snapshot', url))).json();
    expect(body).toMatchObject({ connected: true, jobs: [], members: [{ id: 't1', state: 'training' }] });
  });

  test('dashboard server - the stream sends a snapshot at once and again after a change', async () => {
    const controller = new AbortController();
    const res = await fetch(new URL('/api/stream', url), { signal: controller.signal });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = sseEvents(res.body!);
    const first = (await events.next()).value!;
    expect(first.event).toBe('snapshot');
    expect(JSON.parse(first.data).jobs).toEqual([]);
    state.onEvent({ type: 'submitted', jobId: 'job-1', at: new Date().toISOString() });
    const second = (await events.next()).value!;
    expect(JSON.parse(second.data).jobs.map((j: { jobId: string }) => j.jobId)).toEqual(['job-1']);
    controller.abort();
    await events.return(undefined).catch(() => undefined);
  });

  test('dashboard server - a stop request from the page is sent; bad ones are refused saying why', async () => {
    const post = (path: string, init: RequestInit = {}) =>
      fetch(new URL(path, url), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
        ...init,
      });
    const ok = await post('/api/jobs/job-1/stop');
    expect(ok.status).toBe(202);
    expect(stopped).toEqual(['job-1']);

    const badId = await post('/api/jobs/Bad%20Id/stop');
    expect(badId.status).toBe(400);
    expect(((await badId.json()) as { error: string }).error).toContain('"Bad Id"');
    const notJson = await post('/api/jobs/job-1/stop', { headers: { 'content-type': 'text/plain' } });
    expect(notJson.status).toBe(415);
    const foreign = await post('/api/jobs/job-1/stop', {
      headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
    });
    expect(foreign.status).toBe(403);
    const get = await fetch(new URL('/api/jobs/job-1/stop', url));
    expect(get.status).toBe(405);
    expect(stopped).toEqual(['job-1']);

    stopFails = true;
    const unsent = await post('/api/jobs/job-2/stop');
    expect(unsent.status).toBe(502);
    expect(((await unsent.json()) as { error: string }).error).toContain('no NATS');
  });
});
