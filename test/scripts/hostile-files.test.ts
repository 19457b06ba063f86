import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sendItem } from '../../soak/hostile-client.js';
import {
  type Answer,
  type HostileItem,
  ITEM_BOUND_MS,
  mismatch,
  prepareCorpus,
} from '../../soak/hostile-corpus.js';
import { eicar } from '../../src/engines/test-content.js';
import { buildService, startSharedClamd } from '../helpers/service.js';
import { onPostgres } from '../helpers/test-database.js';

// @run-alone: bombs load CPU and memory; each item timed (ITEM_BOUND_MS)

const MiB = 1024 * 1024;

function shown(answer: Answer): string {
  if (answer.kind === 'findings') return JSON.stringify(answer.findings);
  return answer.kind === 'error' ? `error: ${answer.error.slice(0, 100)}` : answer.detail;
}

/**
 * The hostile corpus of `npm run hostile-files` (soak/hostile-corpus.ts), once, each item sync and
 * async, against the service on this run's store: each must end within ITEM_BOUND_MS with the
 * answer it must have, never `[]` for what was not examined whole.
 */
describe(`the hostile corpus, sync and async (${onPostgres ? 'PostgreSQL' : 'SQLite'})`, () => {
  let clamd: Awaited<ReturnType<typeof startSharedClamd>>;
  // A 32 MiB upload limit and a clamd to match: its limits (MaxScanSize 132 MiB), not the default
  // 804 MiB, are what the bombs unpack to before they are reported, a few times faster.
  before(async () => {
    clamd = await startSharedClamd(32 * MiB);
  });
  after(() => clamd.stop());

  test('every item ends in time with its finding or error; the service works on', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_MAX_FILE_SIZE: String(32 * MiB),
      // A third worker for the rest while both copies of the 2^27-page PDF hold one for 30 s.
      ASSAY_NSFW_WORKERS: '3',
      // Async results are polled every 100 ms: the key's rate limit must not be what answers.
      ASSAY_RATE_LIMIT: '1000000',
      ASSAY_RATE_BURST: '1000000',
    });
    const items = (await prepareCorpus()).build();
    const problems: string[] = [];
    const run = async (item: HostileItem) => {
      const [sync, async] = await Promise.all(
        (['sync', 'async'] as const).map((mode) =>
          sendItem(mode, svc.url, svc.auth, item.content, 2 * ITEM_BOUND_MS),
        ),
      );
      for (const [mode, sent] of [
        ['sync', sync],
        ['async', async],
      ] as const) {
        if (sent === undefined) continue;
        const wrong = mismatch(item.expect, sent.answer);
        if (wrong !== null) problems.push(`${item.name} (${mode}): ${wrong}`);
        if (sent.ms > ITEM_BOUND_MS) problems.push(`${item.name} (${mode}): ${sent.ms} ms`);
        t.diagnostic(`${item.name} (${mode}): ${sent.ms.toFixed(0)} ms, ${shown(sent.answer)}`);
      }
    };
    // Two items at a time: the 30-s PDF overlaps the rest (the suite runs on 2 cores).
    let next = 0;
    await Promise.all(
      [0, 1].map(async () => {
        for (let item = items[next++]; item !== undefined; item = items[next++]) await run(item);
      }),
    );
    assert.deepEqual(problems, []);
    // Afterwards, as before: malware flagged, clean content clean.
    for (const [content, flagged] of [
      [eicar(), true],
      ['An ordinary sentence.', false],
    ] as const) {
      const { answer } = await sendItem('sync', svc.url, svc.auth, Buffer.from(content), 30_000);
      assert.equal(answer.kind, 'findings', shown(answer));
      assert.equal(answer.kind === 'findings' && answer.findings.length > 0, flagged);
    }
  });
});
