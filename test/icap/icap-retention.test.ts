import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { newId } from '../../src/accounts/credentials.js';
import { assayCliAsync } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import {
  buildIcapService,
  chunked,
  httpResponseHead,
  icapRequest,
  RawIcapConnection,
} from '../helpers/icap.js';
import { useSharedClamd } from '../helpers/service.js';
import { storeEnv } from '../helpers/test-database.js';

// Results are kept for a retention time: a bounded default for the keys ICAP services act as,
// for good for the API's keys unless the operator says otherwise, and a key's own.

const clamd = useSharedClamd();
const ROUND_MS = 200;

async function status(url: string, auth: string, path: string): Promise<number> {
  const response = await fetch(`${url}/v2.2/files/${path}`, { headers: { authorization: auth } });
  await response.arrayBuffer();
  return response.status;
}

describe('result retention', () => {
  test("an ICAP service's results go after ASSAY_ICAP_RESULT_RETENTION; the API's stay", async (t) => {
    const svc = await buildIcapService(
      t,
      clamd.socket,
      { ASSAY_ICAP_RESULT_RETENTION: '1' },
      { resultRetentionIntervalMs: ROUND_MS },
    );
    const content = randomContent(1000);
    const connection = new RawIcapConnection(svc.icapPort);
    t.after(() => connection.close());
    connection.write(
      Buffer.concat([
        icapRequest('RESPMOD', 'avscan', {
          responseHead: httpResponseHead(content.length),
          body: true,
          headers: { Allow: '204' },
        }),
        chunked(content),
      ]),
    );
    const answer = await connection.response();
    const id = answer.headers.get('x-assay-result-id') ?? '';
    const icapAuth = svc.icapAuth.avscan as string;
    assert.equal(await status(svc.url, icapAuth, id), 200);
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(500)),
    });
    const kept = ((await upload.json()) as { id: string }).id;
    await waitUntil(
      'the ICAP result deleted',
      async () => (await status(svc.url, icapAuth, id)) === 404,
      10_000,
    );
    assert.equal(await status(svc.url, icapAuth, `${id}/trace`), 404, 'its trace went with it');
    assert.equal(await status(svc.url, svc.auth, kept), 200, "the API key's result stays");
  });

  test("a key's own retention, set with the CLI, deletes its old results in batches", async (t) => {
    const svc = await buildIcapService(
      t,
      clamd.socket,
      {},
      { resultRetentionIntervalMs: ROUND_MS },
    );
    // 1,200 results received two days ago: more than two batches.
    const old = new Date(Date.now() - 2 * 86_400_000).toISOString();
    const ids: string[] = [];
    for (let n = 0; n < 1200; n++) {
      const id = newId();
      ids.push(id);
      await svc.store.files.insert({
        id,
        accountId: svc.accountId,
        apiKeyId: svc.keyId,
        checksum: null,
        sha256: null,
        contentLength: 1,
        contentType: 'text/plain',
        findings: [],
        metadata: {},
        callback: null,
        error: null,
        creationDate: old,
      });
    }
    assert.equal(await status(svc.url, svc.auth, ids[0] as string), 200, 'kept by default');
    const cli = await assayCliAsync(
      ['admin', 'key', 'update', svc.keyId, '--result-retention', '86400'],
      { env: { ASSAY_DATA_DIR: svc.dataDir, ...storeEnv(svc.dataDir) } },
    );
    assert.equal(cli.status, 0, cli.stderr);
    await waitUntil(
      'every old result deleted',
      async () =>
        (await status(svc.url, svc.auth, ids[0] as string)) === 404 &&
        (await status(svc.url, svc.auth, ids[1199] as string)) === 404,
      15_000,
    );
    const contradictory = await assayCliAsync(
      [
        'admin',
        'key',
        'update',
        svc.keyId,
        '--result-retention',
        '1',
        '--default-result-retention',
      ],
      { env: { ASSAY_DATA_DIR: svc.dataDir, ...storeEnv(svc.dataDir) } },
    );
    assert.notEqual(contradictory.status, 0);
    assert.match(contradictory.stderr, /contradicts/);
  });
});
