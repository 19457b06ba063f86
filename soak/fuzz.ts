/**
 * `npm run fuzz -- [--requests N] [--deployment embedded|scale-out] [--seed S] [--concurrency C]
 * [--minutes M] [--replay SEED]`: the protocol fuzz (soak/protocol-fuzz.ts) against a deployment
 * on loopback (soak/deployment.ts; scale-out's PostgreSQL server is ASSAY_SOAK_POSTGRES). N
 * generated requests (default 10,000) on raw sockets, each judged (soak/fuzz-client.ts); then every
 * process must still run, answer /health/live and /health/ready, and a clean upload get 201.
 * Prints counts, statuses and p50/p99 per category, RSS per process, PASS or FAIL (exit 1).
 * `--replay SEED` sends the one case of that seed (as a failure names it) and shows both sides.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { memoryOf } from '../bench/service-process.js';
import { type Deployment, startDeployment } from './deployment.js';
import { type CaseRecord, failures, judge, runCases, sendCase, tally } from './fuzz-client.js';
import { CATEGORIES, caseSeed, type FuzzContext, generateCase } from './protocol-fuzz.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '10000' },
    deployment: { type: 'string', default: 'embedded' },
    seed: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '16' },
    minutes: { type: 'string', default: '30' },
    replay: { type: 'string' },
  },
});
const requests = Number(values.requests);
const seed = Number(values.seed);
const concurrency = Number(values.concurrency);
const minutes = Number(values.minutes);
const kind = values.deployment;
if (!(Number.isSafeInteger(requests) && requests > 0)) throw new Error('--requests: a count');
if (!(Number.isSafeInteger(seed) && seed >= 0)) throw new Error('--seed: a whole number');
if (!(concurrency >= 1 && concurrency <= 256)) throw new Error('--concurrency: 1 to 256');
if (!(minutes > 0)) throw new Error('--minutes: the most the requests may take, in minutes');
if (kind !== 'embedded' && kind !== 'scale-out')
  throw new Error('--deployment: embedded or scale-out');

const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;
/** Short, so that stalled and half-sent requests are cut within seconds, not half a minute. */
const IDLE_TIMEOUT_S = 2;
const HEADER_TIMEOUT_S = 4;
const log = (line: string) =>
  console.error(`[fuzz ${new Date().toISOString().slice(11, 19)}] ${line}`);

/** What must hold once the fuzz is over: every process up, ready, and scanning. */
async function afterwards(deployment: Deployment): Promise<string[]> {
  const problems: string[] = [];
  for (const p of deployment.processes) {
    for (const path of ['/health/live', '/health/ready']) {
      const status = await fetch(`${p.url}${path}`).then(
        (r) => r.status,
        (e: Error) => e.message,
      );
      if (status !== 200) problems.push(`${p.name} ${path}: ${status}`);
    }
  }
  for (const url of deployment.apiUrls) {
    const form = new FormData();
    form.append('file', new Blob(['clean content after the protocol fuzz\n']), 'after.txt');
    const response = await fetch(`${url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: AUTH },
      body: form,
    });
    const body = await response.text();
    if (response.status !== 201 || !body.includes('"findings":[]')) {
      problems.push(`a clean upload to ${url}: ${response.status} ${body.slice(0, 200)}`);
    }
  }
  return problems;
}

async function replay(ctx: FuzzContext, port: number, caseSeedValue: number): Promise<boolean> {
  const fuzzCase = generateCase(caseSeedValue, ctx);
  const sent = Buffer.concat(fuzzCase.writes.map((w) => w.data));
  console.log(
    `${fuzzCase.category} / ${fuzzCase.kind}: ${fuzzCase.writes.length} writes, ${sent.length} bytes${fuzzCase.halfClose ? ', then half-closed' : ''}`,
  );
  console.log(JSON.stringify(sent.subarray(0, 4000).toString('latin1')));
  const outcome = await sendCase(fuzzCase, port);
  console.log(
    `ended: ${outcome.end}${outcome.reset ? ' (reset)' : ''}, after ${outcome.ms.toFixed(0)} ms`,
  );
  for (const answer of outcome.answers) {
    console.log(
      answer.status,
      JSON.stringify(answer.headers),
      JSON.stringify(answer.body.subarray(0, 2000).toString()),
    );
  }
  const problems = judge(fuzzCase, outcome);
  console.log(problems.length === 0 ? 'PASS' : `FAIL: ${problems.join('; ')}`);
  return problems.length === 0;
}

async function main(): Promise<boolean> {
  const work = mkdtempSync(join(tmpdir(), 'assay-fuzz-'));
  const deployment = await startDeployment(kind as 'embedded' | 'scale-out', {
    work,
    server: process.env.ASSAY_SOAK_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432',
    databasePrefix: 'assay_fuzz_',
    env: {
      ASSAY_LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? 'error',
      ASSAY_SPOOL_DIR: join(work, 'spool'),
      // Nothing outbound: the locations and callbacks the fuzz names are loopback, so refused.
      ASSAY_FETCH_ALLOW: '',
      // Broken credentials by the thousand from one address: not what this run measures.
      ASSAY_AUTH_FAIL_RATE: '0',
      ASSAY_REQUEST_IDLE_TIMEOUT: String(IDLE_TIMEOUT_S),
      ASSAY_HEADER_TIMEOUT: String(HEADER_TIMEOUT_S),
      // One account sends everything: its share of the synchronous scans is the whole cap (a
      // single-tenant setting), so that most uploads are parsed rather than refused with 503.
      ASSAY_ACCOUNT_SYNC_CONCURRENCY: '16',
    },
  });
  const exits: string[] = [];
  let stopping = false;
  for (const p of deployment.processes) {
    p.child.on('exit', (code, signal) => {
      if (!stopping) exits.push(`${p.name} exited (${signal ?? code})`);
    });
  }
  try {
    const ctx: FuzzContext = {
      auth: AUTH,
      idleTimeoutMs: IDLE_TIMEOUT_S * 1000,
      headerTimeoutMs: HEADER_TIMEOUT_S * 1000,
    };
    const ports = deployment.apiUrls.map((url) => Number(new URL(url).port));
    if (values.replay !== undefined) return await replay(ctx, ports[0] ?? 0, Number(values.replay));
    const rss = () => deployment.processes.map((p) => memoryOf(p.child.pid ?? 0));
    const rssBefore = rss();
    log(
      `${kind}: ${deployment.processes.length} processes; ${requests} requests, seed ${seed}, concurrency ${concurrency}`,
    );
    const started = performance.now();
    const done: CaseRecord[] = [];
    const progress = setInterval(() => log(`${done.length} of ${requests}`), 10_000);
    const records = await runCases(
      requests,
      concurrency,
      (i) => generateCase(caseSeed(seed, i), ctx),
      (i) => ports[i % ports.length] ?? 0,
      started + minutes * 60_000,
      done,
    );
    clearInterval(progress);
    const seconds = (performance.now() - started) / 1000;
    const rssAfter = rss();
    const unhealthy = await afterwards(deployment);
    const failed = records.filter((r) => r.problems.length > 0);
    const ok =
      records.length === requests &&
      failed.length === 0 &&
      exits.length === 0 &&
      unhealthy.length === 0;
    const closedKinds = new Map<string, number>();
    for (const r of records.filter((r) => r.label === 'closed')) {
      const name = `${r.fuzzCase.category} / ${r.fuzzCase.kind}`;
      closedKinds.set(name, (closedKinds.get(name) ?? 0) + 1);
    }
    const closed = [...closedKinds.values()].reduce((a, b) => a + b, 0);
    console.log(
      [
        `# Protocol fuzz: ${kind}, ${records.length} of ${requests} requests, seed ${seed}, concurrency ${concurrency}`,
        '',
        ok ? 'PASS' : 'FAIL',
        '',
        `- duration: ${seconds.toFixed(1)} s (${(records.length / seconds).toFixed(0)} requests/s)`,
        `- failed requests: ${failed.length}`,
        ...failures(records).map((line) => `  - ${line}`),
        `- connections closed by the service without an answer (framing it could not finish): ${closed}${closed === 0 ? '' : ` (${[...closedKinds].map(([name, n]) => `${name}: ${n}`).join(', ')})`}`,
        `- processes that exited: ${exits.length === 0 ? 0 : exits.join('; ')}`,
        `- afterwards (every process live and ready, a clean upload 201 on each api): ${unhealthy.length === 0 ? 'ok' : unhealthy.join('; ')}`,
        '',
        ...tally(records, CATEGORIES),
        '',
        '| process | RSS before MB | RSS after MB | peak MB |',
        '|---|---|---|---|',
        ...deployment.processes.map(
          (p, i) =>
            `| ${p.name} | ${rssBefore[i]?.rssMb.toFixed(0)} | ${rssAfter[i]?.rssMb.toFixed(0)} | ${rssAfter[i]?.peakMb.toFixed(0)} |`,
        ),
        '',
      ].join('\n'),
    );
    return ok;
  } finally {
    stopping = true;
    await deployment.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

process.exitCode = (await main()) ? 0 : 1;
