import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capturedLogger } from '../helpers/logs.js';

const SECRET = 'hunter2-secret';

test('an error carrying a pg client, a connection string or a URL with a password logs none of them', () => {
  const { logger, lines } = capturedLogger();
  // What pg-pool does with a lost idle connection's error: the whole client hangs on it.
  const lost = Object.assign(new Error('Connection terminated unexpectedly'), {
    code: '57P01',
    client: { connectionParameters: { connectionString: `postgres://u:${SECRET}@db/x` } },
  });
  logger.warn({ err: lost }, 'database connection lost');
  // What pg-boss emits for a failed worker: the error spread into a plain object.
  logger.error({ err: { ...lost, message: lost.message, queue: 'assay.scan' } }, 'pg-boss error');
  logger.error(
    { err: new Error(`could not connect to postgres://assay:${SECRET}@10.0.0.5:5432/assay`) },
    'failed',
  );
  assert.equal(lines.length, 3);
  for (const line of lines) assert.ok(!line.includes(SECRET), line);
  for (const line of lines) assert.ok(!line.includes('connectionParameters'), line);
  const [first, second, third] = lines.map((line) => JSON.parse(line));
  assert.equal(first.err.code, '57P01', 'the code stays: it tells the failure');
  assert.equal(second.err.queue, 'assay.scan');
  assert.match(third.err.message, /postgres:\/\/assay:\[redacted\]@10\.0\.0\.5:5432\/assay/);
});
