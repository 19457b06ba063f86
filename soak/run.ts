/**
 * `npm run soak -- [--minutes N] [--deployment embedded|scale-out] [--spool dir|s3]
 * [--chaos [--chaos-every S] [--faults clamd,processes,receiver,postgres,disk,s3]] [--out DIR]`:
 * Assay under a
 * mixed load for N minutes (default 10) on loopback, sampled every 5 s, then checked (checks.ts);
 * writes a report folder (report.ts) and exits 1 if a check failed. `embedded`: one process on
 * SQLite; `scale-out`: 2 api processes and 2 workers on a PostgreSQL database of its own
 * (created and dropped; ASSAY_SOAK_POSTGRES names the server) with a shared spool: a directory (on
 * a tmpfs of its own for the `disk` fault), or `--spool s3`, a bucket on the tests' S3 emulator.
 * A script, not a test: it takes minutes (docs/DEVELOPMENT.md).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { type Fault, type FaultRecord, restartPostgres, runChaos } from './chaos.js';
import { checkOutcome, passed } from './checks.js';
import { type Deployment, type DeploymentKind, startDeployment } from './deployment.js';
import { type LoadState, runLoad } from './load.js';
import { latencyByKind, writeReport } from './report.js';
import { metricValue, type Sample, type Sampled, takeSample } from './sampler.js';
import { startContentHost, startReceiver } from './servers.js';
import { openSoakSpool } from './spool-faults.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    deployment: { type: 'string', default: 'embedded' },
    spool: { type: 'string', default: 'dir' },
    out: { type: 'string' },
    chaos: { type: 'boolean', default: false },
    'chaos-every': { type: 'string', default: '60' },
    faults: { type: 'string', default: 'clamd,processes,receiver,postgres,disk,s3' },
  },
});
const chaosEveryMs = Number(values['chaos-every']) * 1000;
if (!(chaosEveryMs >= 5000)) throw new Error('--chaos-every: seconds between faults, at least 5');
// postgres: scale-out only; disk: a spool directory; s3: an S3 spool (others are left out).
const FAULT_NAMES = ['clamd', 'processes', 'receiver', 'postgres', 'disk', 's3'];
const chosenFaults = (values.faults ?? '').split(',').filter(Boolean);
for (const name of chosenFaults) {
  if (!FAULT_NAMES.includes(name))
    throw new Error(`--faults: ${name} is not one of ${FAULT_NAMES}`);
}
const minutes = Number(values.minutes);
if (!(minutes > 0 && minutes <= 24 * 60)) throw new Error('--minutes: a number of minutes, 0-1440');
const deploymentArg = values.deployment;
if (deploymentArg !== 'embedded' && deploymentArg !== 'scale-out') {
  throw new Error('--deployment: embedded or scale-out');
}
const deployment: DeploymentKind = deploymentArg;
const spoolKind: 'dir' | 's3' =
  values.spool === 's3' || values.spool === 'dir' ? values.spool : 'dir';
if (values.spool !== spoolKind) throw new Error('--spool: dir or s3');
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const out = resolve(values.out ?? join('soak-reports', `${deployment}-${stamp}`));
mkdirSync(out, { recursive: true });

/** The spool's own filesystem, for the `disk` fault: room for the load's backlog, filled in it. */
const SPOOL_TMPFS_BYTES = 1024 * 1024 * 1024;
const SERVER = process.env.ASSAY_SOAK_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';
const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;
const log = (line: string) =>
  console.error(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}`);

/** A second account with a key, made with the admin CLI against the deployment's store. */
function secondAccount(env: Record<string, string>): string {
  const admin = (args: string[]) =>
    JSON.parse(
      execFileSync(process.execPath, ['bin/assay.js', 'admin', ...args, '--json'], {
        env: { ...process.env, ...env, ASSAY_LOG_LEVEL: 'silent' },
      }).toString(),
    ) as Record<string, string>;
  const account = admin(['account', 'create', '--name', 'soak-second']);
  const key = admin(['key', 'create', '--account', account.id ?? '']);
  return `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}`;
}

async function main(): Promise<boolean> {
  const work = mkdtempSync(join(tmpdir(), 'assay-soak-'));
  const receiver = await startReceiver();
  const host = await startContentHost();
  const spool = await openSoakSpool(
    spoolKind,
    join(work, 'spool'),
    values.chaos && chosenFaults.includes('disk') ? SPOOL_TMPFS_BYTES : null,
  );
  const env: Record<string, string> = {
    ASSAY_CALLBACK_RETRY_BASE_MS: '1000',
    ASSAY_LOG_LEVEL: process.env.SOAK_LOG_LEVEL ?? 'error',
    ASSAY_MAX_FILE_SIZE: String(32 * 1024 * 1024),
    ...spool.env,
  };
  const samples: Sample[] = [];
  const state: LoadState = {
    requests: [],
    accepted: [],
    wrongAnswers: [],
    unexpected: [],
    fault: { name: null, killsProcesses: false },
    unansweredDuringFaults: 0,
  };
  const faults: FaultRecord[] = [];
  let ok = false;
  let deployed: Deployment | undefined;
  try {
    const started = await startDeployment(deployment, {
      work,
      env,
      server: SERVER,
      databasePrefix: 'assay_soak_',
      wrapper: spool.wrapper,
    });
    deployed = started;
    const { processes, apiUrls, clamd } = started;
    const second = secondAccount({ ...started.env, ASSAY_DATA_DIR: join(work, 'data') });
    log(`${deployment}: ${processes.length} processes; load for ${minutes} min; report in ${out}`);
    const sampled: Sampled[] = processes.map((p, i) => ({
      name: p.name,
      pid: () => processes[i]?.child.pid,
      url: () => processes[i]?.url ?? p.url,
    }));
    const sample = async () => {
      const taken = await takeSample(sampled, () => spool.usage(), started.databaseBytes);
      samples.push(taken);
      const rss = taken.processes.map((p) => `${p.name} ${p.rssMb.toFixed(0)} MB`).join(', ');
      log(
        `${state.requests.length} requests, ${state.accepted.length} accepted; RSS ${rss}; ` +
          `due ${taken.jobsDue}, callbacks ${taken.callbacksPending}`,
      );
    };
    await sample();
    let stopped = false;
    const sampler = (async () => {
      while (!stopped) {
        await sleep(5000);
        await sample();
      }
    })();
    const load = runLoad(
      {
        urls: apiUrls,
        accounts: [AUTH, second],
        callbackUrl: receiver.url,
        contentUrl: host.url,
      },
      state,
      () => stopped,
    );
    const pending = async () => {
      const page = await (await fetch(`${apiUrls[0]}/metrics`)).text();
      return metricValue(page, 'assay_callbacks_pending');
    };
    let chaos: Promise<void> = Promise.resolve();
    if (values.chaos) {
      const chaosFaults: Array<Fault & { key: string }> = [
        {
          key: 'clamd',
          name: 'clamd killed',
          killsProcesses: false,
          async run() {
            if (clamd.pid !== undefined) process.kill(clamd.pid, 'SIGKILL');
          },
        },
        {
          key: 'processes',
          name:
            deployment === 'embedded'
              ? 'the process SIGKILLed and started again'
              : 'an api process and a worker SIGKILLed and started again',
          killsProcesses: true,
          run: () => started.killAndRestart(deployment === 'embedded' ? [0] : [0, 2]),
        },
        {
          key: 'receiver',
          name: 'the callback receiver hanging for 30 s (recovered: its backlog of callbacks delivered)',
          killsProcesses: false,
          async run() {
            receiver.hang = true;
            await sleep(30_000);
            receiver.hang = false;
          },
          // As many callbacks waiting as before the hang, give or take the load's own.
          settled: async () => (await pending()) <= 20,
        },
        ...(deployment === 'scale-out' ? [{ ...restartPostgres(15_000), key: 'postgres' }] : []),
        ...(spool.fault === null ? [] : [spool.fault]),
      ];
      chaos = runChaos(
        chaosFaults.filter((fault) => chosenFaults.includes(fault.key)),
        { urls: () => processes.map((p) => p.url), apiUrl: () => apiUrls[0] ?? '', auth: AUTH },
        chaosEveryMs,
        () => stopped,
        faults,
        log,
        state.fault,
      );
    }
    await sleep(minutes * 60_000);
    stopped = true;
    await Promise.all([load, sampler, chaos]);
    log('load stopped; waiting for every result and callback');
    const outcome = await checkOutcome(apiUrls[0] ?? '', state, receiver, 180_000, pending);
    await sample();
    ok = passed(outcome) && faults.every((f) => f.recoverMs >= 0);
    const rssLine = (name: string) => {
      const of = samples.map((s) => s.processes.find((p) => p.name === name)?.rssMb ?? 0);
      const warm = of[Math.min(of.length - 1, Math.ceil(of.length / 5))] ?? 0;
      const end = of[of.length - 1] ?? 0;
      return `| ${name} | ${(of[0] ?? 0).toFixed(0)} | ${warm.toFixed(0)} | ${end.toFixed(0)} | ${warm > 0 ? ((100 * (end - warm)) / warm).toFixed(0) : '-'}% |`;
    };
    const list = (items: string[]) =>
      items.length === 0 ? '0' : `${items.length}: ${items.slice(0, 10).join('; ')}`;
    const summary = [
      `# Soak: ${deployment}, ${minutes} min, spool: ${spoolKind === 's3' ? 'S3' : 'directory'}`,
      '',
      `${ok ? 'PASS' : 'FAIL'}`,
      '',
      `- requests: ${state.requests.length}; items accepted (async, fetch): ${outcome.accepted}; results: ${outcome.results}`,
      `- lost: ${list(outcome.lost)}`,
      `- wrong verdicts of async items: ${list(outcome.wrongVerdicts)}`,
      `- wrong synchronous answers: ${list(outcome.wrongAnswers)}`,
      `- silent cleans (not scanned, came back []): ${list(outcome.silentCleans)}`,
      `- callbacks with more than one delivery id: ${list(outcome.duplicatedDeliveries)}`,
      `- callbacks never delivered: ${list(outcome.undelivered)}`,
      `- unexpected answers (a 5xx but 503/507, no answer): ${list(outcome.unexpected)}`,
      `- requests without an answer while a process was down (killed by the chaos): ${state.unansweredDuringFaults}`,
      ...(values.chaos
        ? [
            '',
            '| fault | at (s) | lasted (s) | recovered after (ms) |',
            '|---|---|---|---|',
            ...faults.map(
              (f) =>
                `| ${f.name} | ${((f.startedAt - (samples[0]?.at ?? f.startedAt)) / 1000).toFixed(0)} | ${((f.endedAt - f.startedAt) / 1000).toFixed(1)} | ${f.recoverMs < 0 ? 'never' : f.recoverMs} |`,
            ),
          ]
        : []),
      '',
      '| kind | requests | p50 ms | p99 ms | statuses |',
      '|---|---|---|---|---|',
      ...latencyByKind(state.requests),
      '',
      'RSS, MB (warm: after the first fifth of the run)',
      '',
      '| process | start | warm | end | end vs warm |',
      '|---|---|---|---|---|',
      ...processes.map((p) => rssLine(p.name)),
      '',
    ].join('\n');
    writeReport(
      out,
      samples,
      state.requests,
      summary,
      faults.map((f) => f.startedAt),
    );
    console.log(summary);
  } finally {
    await deployed?.stop();
    receiver.close();
    host.close();
    await spool.close();
    rmSync(work, { recursive: true, force: true });
  }
  return ok;
}

process.exitCode = (await main()) ? 0 : 1;
