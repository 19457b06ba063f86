/**
 * Async throughput on PostgreSQL with 1 and 2 worker processes (BENCH_WORKERS, e.g. "1,2,4"): one
 * `--role api` process takes 4 KB async uploads (concurrency 16) into a shared spool directory with
 * no worker running (its rate and CPU per item: every 202 waits for two syncs, the spool file's and
 * the commit's), over the fresh process's first items (BENCH_WORKER_JOBS, while V8 compiles the
 * request path) and as many again once warm (after twice as many more); then `--role worker`
 * processes are started and drain the queue. Each count gets a database of its own on
 * BENCH_POSTGRES (default postgres://postgres@127.0.0.1:5432, created and dropped here). Reported
 * for the drain: items per second from the workers being ready to the last result (a few items may
 * finish while a second worker starts), the CPU per item of the workers and of PostgreSQL's
 * backends (all processes of the machine's `postgres` user), and the database's transactions per
 * item (pg_stat_database), pg-boss's polls and maintenance included. First, the transactions per
 * second of the same deployment idle (BENCH_IDLE_SECONDS, 60, after BENCH_IDLE_SETTLE_SECONDS, 30,
 * at rest), before the burst: after it, autovacuum's passes over the tables would count as
 * transactions too.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { cpuSeconds, memoryOf, startAssay } from './service-process.js';
import { runConcurrently } from './stats.js';

const SERVER = process.env.BENCH_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';
const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;

/** CPU seconds of every process of the `postgres` user: the database's side of the work. */
function postgresCpuSeconds(): number {
  let total = 0;
  for (const seconds of postgresCpuByProcess().values()) total += seconds;
  return total;
}

/** CPU seconds of each process of the `postgres` user so far, by pid and title. */
function postgresCpuByProcess(): Map<string, number> {
  const cpu = new Map<string, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      const uid = /Uid:\s+(\d+)/.exec(status)?.[1];
      if (uid !== postgresUid) continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
        .replace(/\0/g, ' ')
        .replace(/\(\d+\).*$/, '')
        .trim();
      cpu.set(`${entry} ${title}`, cpuSeconds(Number(entry)));
    } catch {
      // gone meanwhile
    }
  }
  return cpu;
}
const postgresUid = (() => {
  try {
    return execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
})();

async function admin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: `${SERVER}/postgres` });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

async function adminRows<T>(statement: string, values: unknown[]): Promise<T[]> {
  const client = new pg.Client({ connectionString: `${SERVER}/postgres` });
  await client.connect();
  try {
    return (await client.query(statement, values)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Transactions committed or rolled back in `database` so far (every statement outside a
 * transaction is one): its round trips' lower bound. PostgreSQL publishes them within a second.
 */
async function transactions(database: string): Promise<number> {
  const client = new pg.Client({ connectionString: `${SERVER}/postgres` });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      `select xact_commit + xact_rollback as n from pg_stat_database where datname = $1`,
      [database],
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** Where this machine's PostgreSQL writes its log (Debian's cluster layout). */
const POSTGRES_LOG = process.env.BENCH_POSTGRES_LOG ?? '/var/log/postgresql/postgresql-15-main.log';

/**
 * BENCH_STATEMENTS=1: logs every statement of `database` (set before any session opens) and
 * reports a phase's statements per item (or per second), by their first words, with the time each
 * took where pg_stat_statements is loaded (by hand: shared_preload_libraries): where the round
 * trips of the idle deployment, of the acceptance and of the drain go.
 */
class StatementLog {
  private from = 0;

  private constructor(private readonly database: string) {}

  static async open(database: string): Promise<StatementLog> {
    await admin(`ALTER DATABASE ${database} SET log_statement = 'all'`);
    return new StatementLog(database);
  }

  /** A phase starts. */
  async begin(): Promise<void> {
    await admin('SELECT pg_stat_statements_reset()').catch(() => undefined);
    this.from = statSync(POSTGRES_LOG).size;
  }

  /** What ran since `begin`, per `units` (items, or seconds). */
  async report(title: string, units: number): Promise<string> {
    const text = readFileSync(POSTGRES_LOG, 'utf8').slice(this.from);
    const counts = new Map<string, number>();
    const marker = new RegExp(`@${this.database} LOG:  (?:statement|execute [^:]*): (.*)$`);
    // A statement's further lines are the log's lines that start with a tab.
    for (const line of text.replace(/\n\t/g, ' ').split('\n')) {
      const statement = marker.exec(line)?.[1];
      if (statement === undefined) continue;
      const kind = statement.replace(/\s+/g, ' ').trim().slice(0, 90);
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
    }
    const rows = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 20);
    const lines = [`  statements ${title}:`];
    lines.push(...rows.map(([kind, n]) => `    ${(n / units).toFixed(2).padStart(6)}  ${kind}`));
    const timed = await adminRows<{ ms: number; plan: number; calls: string; query: string }>(
      `SELECT total_exec_time + total_plan_time AS ms, total_plan_time AS plan, calls, query
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = $1 ORDER BY 1 DESC LIMIT 12`,
      [this.database],
    ).catch(() => []);
    if (timed.length > 0) lines.push('    ms (of it planning), calls, statement:');
    for (const row of timed) {
      const per = (ms: number) => (ms / units).toFixed(3);
      const statement = row.query.replace(/\s+/g, ' ').trim().slice(0, 80);
      lines.push(
        `    ${per(row.ms)} (${per(row.plan)}) ${(Number(row.calls) / units).toFixed(2)}  ${statement}`,
      );
    }
    return lines.join('\n');
  }
}

export async function benchWorkers(socket: string, work: string, items: number): Promise<string[]> {
  const counts = (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number);
  const lines: string[] = [];
  for (const workers of counts) {
    const name = `assay_bench_workers_${process.pid}_${workers}`;
    await admin(`CREATE DATABASE ${name}`);
    const statements =
      process.env.BENCH_STATEMENTS === '1' ? await StatementLog.open(name) : undefined;
    const database = `${SERVER}/${name}`;
    const spool = join(work, `workers-${workers}-spool`);
    mkdirSync(spool, { recursive: true });
    const shared = {
      ASSAY_DATABASE_URL: database,
      ASSAY_SPOOL_DIR: spool,
      // One account may use every slot (ASSAY_JOB_CONCURRENCY, 8 by default).
      ASSAY_ACCOUNT_JOB_CONCURRENCY: process.env.ASSAY_JOB_CONCURRENCY ?? '8',
    };
    const api = await startAssay(socket, join(work, `workers-${workers}-api`), {
      ...shared,
      ASSAY_ROLE: 'api',
    });
    const started: Array<Awaited<ReturnType<typeof startAssay>>> = [];
    try {
      // Idle first, the deployment as it will drain (the api and the workers) with nothing to do:
      // what it costs the database. (After the burst, autovacuum's passes would count too.)
      const idle = [];
      // What a worker's start costs, to take out of the drain's CPU below.
      const startupCpu: number[] = [];
      for (let i = 0; i < workers; i++) {
        const worker = await startAssay(socket, join(work, `workers-${workers}-idle-${i}`), {
          ...shared,
          ASSAY_ROLE: 'worker',
        });
        startupCpu.push(cpuSeconds(worker.child.pid ?? 0));
        idle.push(worker);
      }
      // At rest: past what a start does once (pg-boss's first maintenance pass, queue setup).
      const settleSeconds = Number(process.env.BENCH_IDLE_SETTLE_SECONDS ?? 30);
      await new Promise((resolve) => setTimeout(resolve, settleSeconds * 1000));
      // A whole number of pg-boss's supervise passes (one a minute) by default.
      const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 60);
      await statements?.begin();
      const idleBefore = await transactions(name);
      await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
      const idleRate = ((await transactions(name)) - idleBefore) / idleSeconds;
      if (statements !== undefined)
        console.log(await statements.report('per second idle', idleSeconds));
      for (const p of idle) {
        p.child.kill('SIGTERM');
        await new Promise((resolve) => p.child.once('exit', resolve));
      }
      lines.push(
        `idle, 1 api + ${workers} worker process${workers > 1 ? 'es' : ''} on PostgreSQL: ` +
          `${idleRate.toFixed(2)} database transactions per second (over ${idleSeconds} s, after ${settleSeconds} s at rest)`,
      );
      console.log(`  ${lines.at(-1)}`);
      // Accepting first, with no worker: the api's own rate and cost, over a fresh process's first
      // items (V8 compiles the request path meanwhile) and, after twice as many more, warm: V8
      // optimises a function after 3,000 calls by default (1,000 as `serve` sets it).
      const acceptBatch = async (count: number) => {
        const apiCpuBefore = cpuSeconds(api.child.pid ?? 0);
        const dbCpuBefore = postgresCpuSeconds();
        const xactBefore = await transactions(name);
        await statements?.begin();
        const begin = performance.now();
        await runConcurrently(count, 16, async () => {
          const form = new FormData();
          form.append('file', new Blob([randomBytes(4096)]), 'item.bin');
          const response = await fetch(`${api.url}/v2.2/files/async`, {
            method: 'POST',
            headers: { authorization: AUTH },
            body: form,
          });
          if (response.status !== 202) throw new Error(`async upload: ${response.status}`);
          await response.arrayBuffer();
        });
        const seconds = (performance.now() - begin) / 1000;
        if (statements !== undefined)
          console.log(await statements.report('per item accepted', count));
        const apiCpu = cpuSeconds(api.child.pid ?? 0) - apiCpuBefore;
        const dbCpu = postgresCpuSeconds() - dbCpuBefore;
        // PostgreSQL publishes a backend's counts within a second (as for the drain below).
        await new Promise((resolve) => setTimeout(resolve, 1500));
        return { seconds, apiCpu, dbCpu, xacts: (await transactions(name)) - xactBefore };
      };
      const cold = await acceptBatch(items);
      const between = await acceptBatch(2 * items);
      const warm = await acceptBatch(items);
      const queued = 4 * items;
      // Then the workers drain the queue: their rate and cost, and the database's.
      await statements?.begin();
      const dbByProcessBefore = postgresCpuByProcess();
      const dbBefore = postgresCpuSeconds();
      const xactBefore = await transactions(name);
      // A worker claims jobs as soon as it has started, before startAssay sees it ready: the
      // drain is timed from the first result to the last, and its CPU is the workers' CPU less
      // what a start costs (measured on the idle ones).
      let firstResultAt: number | null = null;
      let lastResultAt = 0;
      /** The watcher's own queries: transactions of the database, not of the drain. */
      let polls = 0;
      const watcher = new pg.Client({ connectionString: database });
      await watcher.connect();
      const watching = (async () => {
        try {
          for (;;) {
            const { rows } = await watcher.query<{ n: string }>('select count(*) as n from files');
            polls++;
            const results = Number(rows[0]?.n ?? 0);
            if (results > 0) firstResultAt ??= performance.now();
            if (results >= queued) {
              lastResultAt = performance.now();
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        } finally {
          await watcher.end();
        }
      })();
      for (let i = 0; i < workers; i++) {
        started.push(
          await startAssay(socket, join(work, `workers-${workers}-worker-${i}`), {
            ...shared,
            ASSAY_ROLE: 'worker',
          }),
        );
      }
      const pids = started.map((p) => p.child.pid ?? 0);
      await watching;
      // The first result came one item's time after the drain began: counted back in.
      const seconds =
        (((lastResultAt - (firstResultAt ?? 0)) / 1000) * queued) / Math.max(1, queued - 1);
      const startCpu = startupCpu.reduce((sum, cpu) => sum + cpu, 0);
      const workerCpu = pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0) - startCpu;
      const dbCpu = postgresCpuSeconds() - dbBefore;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const xacts = (await transactions(name)) - xactBefore - polls;
      const perItem = (s: number, n = queued) => ((s * 1000) / n).toFixed(2);
      const acceptance = ({ seconds, apiCpu, dbCpu, xacts }: typeof cold) =>
        `${(items / seconds).toFixed(1)} items/s (${perItem(apiCpu, items)} ms cpu each, ` +
        `postgres ${perItem(dbCpu, items)} ms, ${(xacts / items).toFixed(2)} transactions)`;
      const acceptCpu = [cold, between, warm].reduce((sum, b) => sum + b.apiCpu + b.dbCpu, 0);
      const acceptXacts = cold.xacts + between.xacts + warm.xacts;
      lines.push(
        `4 KB async on PostgreSQL: accepted by 1 api process at ${acceptance(cold)} over its ` +
          `first ${items}, then ${acceptance(warm)} over ${items} after ${2 * items} more; ` +
          `drained by ${workers} worker ` +
          `process${workers > 1 ? 'es' : ''} at ${(queued / seconds).toFixed(1)} items/s; ` +
          `cpu per item: workers ${perItem(workerCpu)} ms, postgres ` +
          `${perItem(dbCpu)} ms; ${(xacts / queued).toFixed(1)} database transactions per item ` +
          `(pg-boss's included); in all, accepted and drained: ` +
          `${perItem(acceptCpu + workerCpu + dbCpu)} ms of api, worker and postgres cpu ` +
          `and ${((acceptXacts + xacts) / queued).toFixed(1)} transactions per item; ` +
          `peak RSS: api ${memoryOf(api.child.pid ?? 0).peakMb.toFixed(0)} MB, ` +
          `largest worker ${Math.max(...pids.map((p) => memoryOf(p).peakMb)).toFixed(0)} MB`,
      );
      console.log(`  ${lines.at(-1)}`);
      if (statements !== undefined) {
        console.log(await statements.report('per item drained', queued));
        for (const [process, seconds] of postgresCpuByProcess()) {
          const used = seconds - (dbByProcessBefore.get(process) ?? 0);
          if (used > 0) console.log(`    ${perItem(used).padStart(6)} ms  ${process}`);
        }
      }
    } finally {
      for (const p of [api, ...started]) {
        p.child.kill('SIGTERM');
        await new Promise((resolve) => p.child.once('exit', resolve));
      }
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  }
  return lines;
}
