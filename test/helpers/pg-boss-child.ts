// A dispatch in a process of its own, for tests that SIGKILL it: it works `queue` with handlers
// that never finish, printing `took <id>` for each message it takes.
import { pino } from 'pino';
import { PgBossDispatch, type PgBossDispatchOptions } from '../../src/queue/pg-boss-dispatch.js';

const { queue, ...options } = JSON.parse(process.argv[2] ?? '{}') as Omit<
  PgBossDispatchOptions,
  'logger'
> & { queue: string };
const dispatch = new PgBossDispatch({ ...options, logger: pino({ level: 'silent' }) });
await dispatch.start();
await dispatch.work(queue, { slots: 1, perGroup: 1 }, async (jobId) => {
  process.stdout.write(`took ${jobId}\n`);
  await new Promise(() => {});
});
process.stdout.write('working\n');
