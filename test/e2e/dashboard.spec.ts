import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { LocalCluster } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import { connectNats, type NatsConnection } from '#libs/messaging';
import { restartServer } from '../support/server-restart.js';
import { ROOT } from '../support/service-process.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { testCluster } from '../support/test-cluster.js';
import { tinyJobSpec, writeTinyDataset, writeTinyEvalSet, type TinyDataset } from '../support/tiny-dataset.js';

/** Debian's Chromium (scripts/prerequisites.sh installs it); no browser is downloaded. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where the screenshot of the page is saved (git-ignored). */
const ARTIFACTS = join(ROOT, 'test', 'e2e', 'artifacts');
/** Waits on a loaded machine: each is a bound on a condition polled, never a pause. */
const PAGE_WAIT_MS = 180_000;

/** Starts `tributary dashboard` on a free port; resolves with the process and the page's URL. */
function startDashboardProcess(natsUrl: string, stateDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'tributary.js'), 'dashboard', '--port', '0', '--nats', natsUrl],
    {
      env: { ...process.env, TRIBUTARY_STATE_DIR: stateDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the dashboard did not start: ${output}`)), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = /dashboard at (http:\S+)/.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve({ child, url: found[1] });
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the dashboard exited (${code}): ${output}`));
    });
  });
}

/** The number of points the page's chart `id` shows. */
async function chartPoints(page: Page, id: string): Promise<number> {
  return Number(await page.getAttribute(`#${id}`, 'data-points'));
}

/** Waits (polling the page) until its chart `id` shows at least `min` points. */
async function waitForPoints(page: Page, id: string, min: number): Promise<void> {
  await page.waitForFunction(`Number(document.getElementById('${id}').dataset.points) >= ${min}`, null, {
    timeout: PAGE_WAIT_MS,
  });
}

/**
 * Clicks job `jobId`'s row in the jobs table and waits until the page shows that job. The table
 * changes with every snapshot (several a second while a job trains), so a click that spans one
 * must still select.
 */
async function selectJob(page: Page, jobId: string): Promise<void> {
  await page.click(`#jobs tr[data-job-id="${jobId}"]`, { timeout: PAGE_WAIT_MS });
  await page.waitForSelector(`#jobs tr[data-job-id="${jobId}"][aria-selected="true"]`, { timeout: PAGE_WAIT_MS });
  expect(await page.textContent('#job-title')).toBe(jobId);
}

/** Waits (polling the page) until `selector` matches `count` elements. */
async function waitForCount(page: Page, selector: string, count: number): Promise<void> {
  await page.waitForFunction(`document.querySelectorAll('${selector}').length === ${count}`, null, {
    timeout: PAGE_WAIT_MS,
  });
}

describe('dashboard, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let data: TinyDataset;
  let dashboard: { child: ChildProcess; url: string };
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    servers = await startTestServers();
    data = await writeTinyDataset(join(servers.dir, 'data'));
    // Every eval label names the wrong class: the job cannot reach its target, so it runs until stopped.
    await writeTinyEvalSet(join(servers.dir, 'data'), { mislabelled: true });
    cluster = testCluster(servers);
    await cluster.start();
    nc = await connectNats(servers.nats.url, 'e2e-test');
    dashboard = await startDashboardProcess(servers.nats.url, join(servers.dir, 'cluster'));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    // The stop button asks first.
    page.on('dialog', (dialog) => void dialog.accept());
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    if (dashboard && dashboard.child.exitCode === null) {
      const exited = new Promise((resolve) => dashboard.child.once('exit', resolve));
      dashboard.child.kill('SIGTERM');
      await exited;
    }
    await nc?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 180_000);

  test('dashboard - during a real job the page shows the job and its curves growing, a trainer leaving on SIGTERM, and stops the job', async () => {
    const jobId = 'dash-job';
    await new MasterClient(nc, 'e2e-test').submitJob(
      tinyJobSpec(jobId, data, join(servers.dir, 'out-dash'), {
        evaluation: { everySteps: 2 },
        stop: { target: 0.9, maxSeconds: 400, maxEpochs: 100_000 },
      }),
    );
    await page.goto(dashboard.url);
    await page.waitForSelector('#connection[data-state="live"]', { timeout: PAGE_WAIT_MS });
    await selectJob(page, jobId);
    await page.waitForSelector(`#job-panel[data-state="running"]`, { timeout: PAGE_WAIT_MS });

    await waitForPoints(page, 'chart-steps', 2);
    const before = await chartPoints(page, 'chart-steps');
    await waitForPoints(page, 'chart-steps', before + 1);
    expect(await chartPoints(page, 'chart-time')).toBeGreaterThan(before);
    // The task queue and the pservers' versions of the job are shown.
    await page.waitForSelector('#tasks tbody tr', { timeout: PAGE_WAIT_MS });
    await waitForCount(page, '#pservers tbody tr', 2);

    // Both trainers are listed; one stopped with SIGTERM leaves the table, the other stays.
    const trainers = cluster.list().filter((s) => s.role === 'trainer');
    const [stays, leaves] = trainers.map((t) => cluster.pid(t.id)!);
    for (const pid of [stays, leaves]) {
      await page.waitForSelector(`#trainers tr[data-pid="${pid}"]`, { timeout: PAGE_WAIT_MS });
    }
    await cluster.kill(trainers[1].id, 'SIGTERM');
    await page.waitForSelector(`#trainers tr[data-pid="${leaves}"]`, { state: 'detached', timeout: PAGE_WAIT_MS });
    expect(await page.$(`#trainers tr[data-pid="${stays}"]`)).not.toBeNull();
    await waitForPoints(page, 'chart-throughput', 1);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });

    await page.click('#stop-button');
    await page.waitForSelector('#job-panel[data-state="stopped"]', { timeout: PAGE_WAIT_MS });
    await page.waitForSelector('#events li[data-type="stopped"]', { timeout: PAGE_WAIT_MS });
    expect(await page.textContent('#job-state')).toBe('stopped (manual)');
  }, 600_000);

  test('dashboard - NATS restarts: the page says so, then goes on showing new jobs and their curves', async () => {
    await page.waitForSelector('#connection[data-state="live"]', { timeout: PAGE_WAIT_MS });
    const restarted = restartServer(servers, 'nats', { downMs: 3_000 });
    await page.waitForSelector('#connection[data-state="nats-down"]', { timeout: PAGE_WAIT_MS });
    await restarted;
    await page.waitForSelector('#connection[data-state="live"]', { timeout: PAGE_WAIT_MS });

    const jobId = 'after-restart';
    await new MasterClient(nc, 'e2e-test').submitJob(
      tinyJobSpec(jobId, data, join(servers.dir, 'out-after'), {
        evaluation: { everySteps: 2 },
        stop: { target: 0.9, maxSeconds: 400, maxEpochs: 100_000 },
      }),
    );
    // The first job, stopped, was selected: the click must move the panel to the new one.
    await selectJob(page, jobId);
    await waitForPoints(page, 'chart-steps', 2);
    await page.waitForSelector(`#job-panel[data-state="running"]`, { timeout: PAGE_WAIT_MS });
    await page.click('#stop-button');
    await page.waitForSelector('#job-panel[data-state="stopped"]', { timeout: PAGE_WAIT_MS });
  }, 600_000);
});
