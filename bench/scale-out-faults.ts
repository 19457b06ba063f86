/**
 * `npm run bench:faults`: the third audit's scenarios on the scale-out deployment (2 api
 * processes, 2 workers, one PostgreSQL, a shared spool directory; 4 async uploads a second with
 * callbacks, a quarter of them EICAR), each reported as accepted, finished, lost, duplicated and
 * the time to recover:
 *
 * - `stop`: PostgreSQL stopped for 30 s (`pg_ctlcluster … stop -m fast`, then start: needs root,
 *   and stops the machine's PostgreSQL for everyone);
 * - `terminate`: every connection of the database ended 10 times, 2 s apart;
 * - `kill`: a worker SIGKILLed with callbacks in flight (the receiver answers after 3 s), started
 *   again 2 s later.
 *
 * FAULTS=terminate,kill picks scenarios (default: all three). A script, not a test: it takes
 * minutes, and stopping PostgreSQL disturbs whatever else uses it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { asyncUploadLoad, type Submitted } from '../test/helpers/async-load.js';
import { postgresCtl, startOwnClamd } from './local-parts.js';
import { startAssay } from './service-process.js';

const SERVER = process.env.BENCH_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';
const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Process = Awaited<ReturnType<typeof startAssay>> & { role: string; dataDir: string };

interface Deployment {
  api: Process[];
  workers: Process[];
  env: Record<string, string>;
}

/** A callback receiver: per item, its delivery ids; answers after `delayMs`. */
async function startReceiver() {
  const deliveries = new Map<string, Set<string>>();
  /** When each item's first delivery arrived. */
  const arrivals = new Map<string, number>();
  /** Requests per item (a delivery sent again, same id, counts again). */
  const requests = new Map<string, number>();
  let delayMs = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      try {
        const { id } = JSON.parse(Buffer.concat(chunks).toString()) as { id: string };
        const ids = deliveries.get(id) ?? new Set<string>();
        ids.add(String(request.headers['x-assay-delivery']));
        deliveries.set(id, ids);
        if (!arrivals.has(id)) arrivals.set(id, Date.now());
        requests.set(id, (requests.get(id) ?? 0) + 1);
      } catch {
        // not a result
      }
      setTimeout(() => response.end(), delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    arrivals,
    requests,
    setDelay(ms: number) {
      delayMs = ms;
    },
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

async function allReady(processes: Process[]): Promise<boolean> {
  const answers = await Promise.all(
    processes.map((p) =>
      fetch(`${p.url}/health/ready`)
        .then((r) => r.status === 200)
        .catch(() => false),
    ),
  );
  return answers.every(Boolean);
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number) {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
  return Date.now() - started;
}

async function startProcess(
  socket: string,
  role: string,
  env: Record<string, string>,
  dataDir = mkdtempSync(join(tmpdir(), `assay-faults-${role}-`)),
): Promise<Process> {
  const started = await startAssay(socket, dataDir, { ...env, ASSAY_ROLE: role });
  return { ...started, role, dataDir };
}

/** The outcome of one scenario, for the report. */
async function settle(
  name: string,
  deployment: Deployment,
  accepted: Submitted[],
  extra: { refused: number; unexpected: string[]; recoverMs: number },
  receiver: Awaited<ReturnType<typeof startReceiver>>,
) {
  const api = deployment.api[0]?.url ?? '';
  let finished = 0;
  let wrong = 0;
  const deadline = Date.now() + 300_000;
  for (const item of accepted) {
    for (;;) {
      const response = await fetch(`${api}/v2.2/files/${item.id}`, {
        headers: { authorization: AUTH },
      }).catch(() => null);
      if (response?.status === 200) {
        const result = (await response.json()) as { findings?: string[] };
        finished += 1;
        const flagged = (result.findings ?? []).length > 0;
        if (flagged !== item.infected || result.findings === undefined) wrong += 1;
        break;
      }
      await response?.arrayBuffer();
      if (Date.now() > deadline) break;
      await sleep(200);
    }
  }
  await waitFor(
    'callbacks',
    async () => accepted.every((item) => receiver.deliveries.has(item.id)),
    300_000,
  ).catch(() => 0);
  const duplicated = accepted.filter(
    (item) => (receiver.deliveries.get(item.id)?.size ?? 0) > 1,
  ).length;
  const undelivered = accepted.filter((item) => !receiver.deliveries.has(item.id)).length;
  const alive = [...deployment.api, ...deployment.workers].every((p) => p.child.exitCode === null);
  console.log(
    `${name}: accepted ${accepted.length}, finished ${finished}, lost ${accepted.length - finished}, ` +
      `duplicated ${duplicated} (items with two result deliveries), callbacks undelivered ${undelivered}, ` +
      `wrong verdicts ${wrong}, refused ${extra.refused} (503/507 with Retry-After, retried), ` +
      `unexpected answers ${extra.unexpected.length}${extra.unexpected.length > 0 ? ` (${extra.unexpected.slice(0, 3).join(' | ')})` : ''}, ` +
      `time to recover ${(extra.recoverMs / 1000).toFixed(1)} s, every process alive: ${alive}`,
  );
}

/** Runs the load for `seconds` around `fault`, which returns its time to recover. */
async function underLoad(
  deployment: Deployment,
  receiver: Awaited<ReturnType<typeof startReceiver>>,
  seconds: number,
  fault: () => Promise<number>,
) {
  let stop = false;
  const load = asyncUploadLoad({
    urls: () => deployment.api.map((p) => p.url),
    auth: AUTH,
    callback: receiver.url,
    concurrency: 4,
    rate: 4,
    until: () => stop,
  });
  const recoverMs = await fault();
  await sleep(seconds * 1000);
  stop = true;
  const report = await load;
  return { ...report, recoverMs };
}

async function main(): Promise<void> {
  const faults = (process.env.FAULTS ?? 'stop,terminate,kill').split(',');
  const work = mkdtempSync(join(tmpdir(), 'assay-faults-'));
  const { clamd, socket } = await startOwnClamd(work, {
    maxFileSize: 100 * 1024 * 1024,
    officialDatabases: false,
  });
  const database = `assay_faults_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client(`${SERVER}/postgres`);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const receiver = await startReceiver();
  const env = {
    ASSAY_DATABASE_URL: `${SERVER}/${database}`,
    ASSAY_SPOOL_DIR: join(work, 'spool'),
    ASSAY_CALLBACK_RETRY_BASE_MS: '1000',
    // The faults make every process log; the report is what this prints (BENCH_LOG_LEVEL=warn).
    ASSAY_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'fatal',
  };
  const deployment: Deployment = { api: [], workers: [], env };
  try {
    for (const role of ['api', 'api', 'worker', 'worker']) {
      const started = await startProcess(socket, role, env);
      (role === 'api' ? deployment.api : deployment.workers).push(started);
    }
    if (faults.includes('stop')) {
      const outcome = await underLoad(deployment, receiver, 20, async () => {
        await sleep(10_000);
        postgresCtl('stop');
        await sleep(30_000);
        postgresCtl('start');
        return waitFor(
          'ready after the restart',
          () => allReady([...deployment.api, ...deployment.workers]),
          120_000,
        );
      });
      const accepted = outcome.accepted;
      await settle('PostgreSQL stopped 30 s', deployment, accepted, outcome, receiver);
    }
    if (faults.includes('terminate')) {
      const killer = new pg.Client(`${SERVER}/postgres`);
      await killer.connect();
      const outcome = await underLoad(deployment, receiver, 10, async () => {
        let last = 0;
        for (let round = 0; round < 10; round++) {
          await sleep(2000);
          await killer.query(
            'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
            [database],
          );
          last = Date.now();
        }
        await waitFor('ready', () => allReady([...deployment.api, ...deployment.workers]), 60_000);
        return Date.now() - last;
      });
      await killer.end();
      await settle('10 connection terminations', deployment, outcome.accepted, outcome, receiver);
    }
    if (faults.includes('kill')) {
      receiver.setDelay(3000);
      let killedAt = Date.now();
      const outcome = await underLoad(deployment, receiver, 20, async () => {
        await sleep(8000);
        const victim = deployment.workers[0];
        if (victim === undefined) return 0;
        victim.child.kill('SIGKILL');
        killedAt = Date.now();
        await sleep(2000);
        deployment.workers[0] = await startProcess(socket, 'worker', env, victim.dataDir);
        return Date.now() - killedAt;
      });
      receiver.setDelay(0);
      const before = outcome.accepted.filter((item) => item.acceptedAt < killedAt);
      await waitFor(
        'callbacks of the items accepted before the kill',
        async () => before.every((item) => receiver.arrivals.has(item.id)),
        300_000,
      ).catch(() => 0);
      const last = Math.max(...before.map((item) => receiver.arrivals.get(item.id) ?? 0));
      console.log(
        `  the last callback of an item accepted before the kill arrived ${((last - killedAt) / 1000).toFixed(1)} s after it`,
      );
      // What the killed worker had in flight (received, unanswered) is sent again after the
      // delivery's 2-minute lease, with the same delivery id.
      await sleep(Math.max(0, killedAt + 135_000 - Date.now()));
      const again = outcome.accepted.filter((item) => (receiver.requests.get(item.id) ?? 0) > 1);
      const sameId = again.filter((item) => receiver.deliveries.get(item.id)?.size === 1);
      console.log(
        `  sent again after the lease: ${again.length} items, ${sameId.length} of them with the same delivery id`,
      );
      await settle(
        'a worker SIGKILLed with callbacks in flight (time to recover: to its restart; its deliveries come back after their 2-minute lease)',
        deployment,
        outcome.accepted,
        outcome,
        receiver,
      );
    }
  } finally {
    for (const proc of [...deployment.api, ...deployment.workers]) proc.child.kill('SIGTERM');
    await sleep(2000);
    receiver.close();
    await clamd.stop();
    const cleanup = new pg.Client(`${SERVER}/postgres`);
    await cleanup.connect().catch(() => {});
    await cleanup.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
    await cleanup.end().catch(() => {});
    for (const proc of [...deployment.api, ...deployment.workers]) {
      rmSync(proc.dataDir, { recursive: true, force: true });
    }
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
