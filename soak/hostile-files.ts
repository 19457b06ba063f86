/**
 * `npm run hostile-files -- [--deployment embedded|scale-out] [--rounds N]`: the hostile corpus
 * (soak/hostile-corpus.ts: bombs, nested archives, polyglots, broken images, PDFs with huge page
 * trees, deep JSON, XML entity expansion) sent N times (default 1), each item synchronously and
 * asynchronously at once, while a client uploads small clean files without pause; first a baseline
 * of the clean client alone. Checks that every item got the answer it must have within
 * ITEM_BOUND_MS, that no process exited, that each process's peak RSS stayed under RSS_BOUND_MB and
 * that the service answers properly afterwards; prints a table and PASS or FAIL (exit status 1).
 * Deployments as the soak's (soak/deployment.ts; ASSAY_SOAK_POSTGRES names the server).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { memoryOf } from '../bench/service-process.js';
import { percentile } from '../bench/stats.js';
import { eicar } from '../src/engines/test-content.js';
import { type DeploymentKind, startDeployment } from './deployment.js';
import { type Mode, sendItem } from './hostile-client.js';
import {
  type Answer,
  type HostileItem,
  ITEM_BOUND_MS,
  mismatch,
  prepareCorpus,
} from './hostile-corpus.js';

/**
 * Peak RSS of any one process: its base (~300 MB) and its two language workers (ASSAY_NSFW_WORKERS
 * below) each at their 1 GB heap limit, which the PDF of 2^27 pages fills in 30 s: the sync and
 * async copies of it run at once in the embedded process.
 */
export const RSS_BOUND_MB = 3072;
const WORKERS = '2';
const BASELINE_MS = 20_000;
const CLEAN_CLIENTS = 2;

const { values } = parseArgs({
  options: {
    deployment: { type: 'string', default: 'embedded' },
    rounds: { type: 'string', default: '1' },
  },
});
const kind = values.deployment;
if (kind !== 'embedded' && kind !== 'scale-out') {
  throw new Error('--deployment: embedded or scale-out');
}
const deployment: DeploymentKind = kind;
const rounds = Number(values.rounds);
if (!(Number.isInteger(rounds) && rounds >= 1))
  throw new Error('--rounds: a whole number, 1 or more');

const SERVER = process.env.ASSAY_SOAK_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';
const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;
const log = (line: string) =>
  console.error(`[hostile ${new Date().toISOString().slice(11, 19)}] ${line}`);

interface Outcome {
  item: HostileItem;
  round: number;
  mode: Mode;
  ms: number;
  answer: Answer;
  problem: string | null;
}

interface CleanSample {
  hostile: boolean;
  ms: number;
  ok: boolean;
}

function describe(answer: Answer): string {
  if (answer.kind === 'findings') return answer.findings.join(', ') || '[]';
  if (answer.kind === 'error')
    return `error: ${answer.error.replace(/^the content could not be (fully )?examined: /, '').slice(0, 70)}`;
  return `?? ${answer.detail.slice(0, 70)}`;
}

function latency(samples: CleanSample[], hostile: boolean): string {
  const of = samples.filter((s) => s.hostile === hostile);
  const sorted = of.map((s) => s.ms).sort((a, b) => a - b);
  const failed = of.filter((s) => !s.ok).length;
  return `| ${hostile ? 'under the hostile load' : 'baseline'} | ${of.length} | ${percentile(sorted, 50).toFixed(1)} | ${percentile(sorted, 99).toFixed(1)} | ${(sorted.at(-1) ?? Number.NaN).toFixed(1)} | ${failed} |`;
}

/** A sync upload of `content` to each api process; what it must answer. */
async function probe(urls: string[], content: string, flagged: boolean): Promise<string[]> {
  const problems: string[] = [];
  for (const url of urls) {
    const sent = await sendItem('sync', url, AUTH, Buffer.from(content), 30_000);
    const answer = sent.answer;
    const good =
      answer.kind === 'findings' &&
      (flagged ? answer.findings.length > 0 : answer.findings.length === 0);
    if (!good) problems.push(`${url}: ${flagged ? 'EICAR' : 'clean text'} got ${describe(answer)}`);
  }
  return problems;
}

async function main(): Promise<boolean> {
  const work = mkdtempSync(join(tmpdir(), 'assay-hostile-'));
  const started = await startDeployment(deployment, {
    work,
    env: {
      ASSAY_LOG_LEVEL: process.env.HOSTILE_LOG_LEVEL ?? 'error',
      ASSAY_NSFW_WORKERS: WORKERS,
      // One spool for all: scale-out's workers scan what its api processes accepted.
      ASSAY_SPOOL_DIR: join(work, 'spool'),
    },
    server: SERVER,
    databasePrefix: 'assay_hostile_',
  });
  const { processes, apiUrls, clamd } = started;
  // Ctrl-C still stops the processes and clamd and drops the database.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void started.stop().finally(() => {
        rmSync(work, { recursive: true, force: true });
        process.exit(130);
      });
    });
  }
  const exits: string[] = [];
  for (const p of processes) {
    p.child.once('exit', (code, signal) => exits.push(`${p.name} exited (${code ?? signal})`));
  }
  const watched = [
    ...processes.map((p) => ({ name: p.name, pid: p.child.pid ?? 0 })),
    { name: 'clamd', pid: clamd.pid ?? 0 },
  ];
  const startRss = new Map(watched.map((w) => [w.name, memoryOf(w.pid).rssMb]));
  const outcomes: Outcome[] = [];
  const clean: CleanSample[] = [];
  let ok = false;
  try {
    log(`${deployment}: ${processes.length} processes; preparing the corpus`);
    const corpus = await prepareCorpus();
    let hostile = false;
    let stopped = false;
    let next = 0;
    const cleanClients = Array.from({ length: CLEAN_CLIENTS }, async () => {
      while (!stopped) {
        const url = apiUrls[next++ % apiUrls.length] as string;
        const content = Buffer.concat([Buffer.from('clean upload '), randomBytes(2048)]);
        const phase = hostile;
        const { answer, ms } = await sendItem('sync', url, AUTH, content, 30_000);
        clean.push({
          hostile: phase,
          ms,
          ok: answer.kind === 'findings' && answer.findings.length === 0,
        });
      }
    });
    log(`baseline: the clean client alone for ${BASELINE_MS / 1000} s`);
    await sleep(BASELINE_MS);
    hostile = true;
    for (let round = 1; round <= rounds; round++) {
      const items = corpus.build();
      log(`round ${round}/${rounds}: ${items.length} items, each sync and async`);
      for (const item of items) {
        const sent = await Promise.all(
          (['sync', 'async'] as const).map(async (mode) => {
            const url = apiUrls[(round + (mode === 'sync' ? 0 : 1)) % apiUrls.length] as string;
            const { answer, ms } = await sendItem(mode, url, AUTH, item.content, 2 * ITEM_BOUND_MS);
            const wrong = mismatch(item.expect, answer);
            const late = ms > ITEM_BOUND_MS ? `${ms.toFixed(0)} ms, over ${ITEM_BOUND_MS}` : null;
            return { item, round, mode, ms, answer, problem: wrong ?? late };
          }),
        );
        outcomes.push(...sent);
      }
    }
    stopped = true;
    await Promise.all(cleanClients);
    log('load stopped; checking the service');
    const peaks = watched.map((w) => {
      const { rssMb, peakMb } = exits.length > 0 ? { rssMb: 0, peakMb: 0 } : memoryOf(w.pid);
      return { ...w, rssMb, peakMb };
    });
    const after: string[] = [];
    for (const p of processes) {
      const ready = await fetch(`${p.url}/health/ready`).catch(() => null);
      if (ready?.status !== 200)
        after.push(`${p.name}: /health/ready ${ready?.status ?? 'no answer'}`);
    }
    after.push(...(await probe(apiUrls, eicar(), true)));
    after.push(...(await probe(apiUrls, 'An ordinary sentence, nothing more.', false)));
    const asyncEicar = await sendItem(
      'async',
      apiUrls[0] ?? '',
      AUTH,
      Buffer.from(eicar()),
      30_000,
    );
    if (asyncEicar.answer.kind !== 'findings' || asyncEicar.answer.findings.length === 0) {
      after.push(`async EICAR got ${describe(asyncEicar.answer)}`);
    }
    const wrong = outcomes.filter((o) => o.problem !== null);
    const overRss = peaks.filter((p) => p.name !== 'clamd' && p.peakMb > RSS_BOUND_MB);
    const cleanFailures = clean.filter((s) => !s.ok).length;
    ok =
      wrong.length === 0 &&
      exits.length === 0 &&
      overRss.length === 0 &&
      after.length === 0 &&
      cleanFailures === 0;
    const byItem = new Map<string, Outcome[]>();
    for (const o of outcomes) byItem.set(o.item.name, [...(byItem.get(o.item.name) ?? []), o]);
    const times = (list: Outcome[], mode: Mode) => {
      const ms = list.filter((o) => o.mode === mode).map((o) => o.ms);
      return `${(Math.max(...ms) / 1000).toFixed(2)}`;
    };
    const lines = [
      `# Hostile files: ${deployment}, ${rounds} round(s), ${byItem.size} items, each sync and async`,
      '',
      ok ? 'PASS' : 'FAIL',
      '',
      `Bounds: an answer within ${ITEM_BOUND_MS / 1000} s per item; peak RSS under ${RSS_BOUND_MB} MB per Assay process.`,
      '',
      '| item | bytes | sync s (max) | async s (max) | answer (last round, sync / async) | ok |',
      '|---|---|---|---|---|---|',
      ...[...byItem.values()].map((list) => {
        const last = list.filter((o) => o.round === rounds);
        const answers = (['sync', 'async'] as const)
          .map((mode) =>
            describe(last.find((o) => o.mode === mode)?.answer ?? { kind: 'other', detail: '' }),
          )
          .join(' / ');
        const bad = list.filter((o) => o.problem !== null).length;
        const first = list[0] as Outcome;
        return `| ${first.item.name} | ${first.item.content.length} | ${times(list, 'sync')} | ${times(list, 'async')} | ${answers} | ${bad === 0 ? 'yes' : `NO (${bad})`} |`;
      }),
      '',
      '| process | RSS at start MB | peak MB (VmHWM) | at the end MB |',
      '|---|---|---|---|',
      ...peaks.map(
        (p) =>
          `| ${p.name} | ${(startRss.get(p.name) ?? 0).toFixed(0)} | ${p.peakMb.toFixed(0)} | ${p.rssMb.toFixed(0)} |`,
      ),
      '',
      `Clean client (${CLEAN_CLIENTS} at once, 2 KB random uploads, sync), ms:`,
      '',
      '| period | uploads | p50 | p99 | max | not 201 [] |',
      '|---|---|---|---|---|---|',
      latency(clean, false),
      latency(clean, true),
      '',
      `- wrong or late answers: ${wrong.length}${wrong
        .slice(0, 10)
        .map((o) => `\n  - ${o.item.name} (${o.mode}, round ${o.round}): ${o.problem}`)
        .join('')}`,
      `- processes that exited: ${exits.length === 0 ? 0 : exits.join('; ')}`,
      `- over the RSS bound: ${overRss.length === 0 ? 0 : overRss.map((p) => `${p.name} ${p.peakMb.toFixed(0)} MB`).join('; ')}`,
      `- afterwards: ${after.length === 0 ? 'healthy (ready, EICAR flagged sync and async, clean text clean)' : after.join('; ')}`,
      '',
    ];
    console.log(lines.join('\n'));
  } finally {
    await started.stop();
    rmSync(work, { recursive: true, force: true });
  }
  return ok;
}

process.exitCode = (await main()) ? 0 : 1;
