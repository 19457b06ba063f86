import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { newId } from '../../src/accounts/credentials.js';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { uploadForm } from '../helpers/content.js';
import { legacyRequest } from '../helpers/legacy.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import {
  buildService,
  credentialsRefreshed,
  spoolOf,
  type TestService,
  useSharedClamd,
} from '../helpers/service.js';

const clamd = useSharedClamd();
let remote: LocalServer;
/** `/held` answers 404 once `release` is called: a job whose download is under way. */
let release = () => {};
let held = Promise.resolve();
function holdDownloads(): void {
  held = new Promise((resolve) => {
    release = resolve;
  });
}
before(async () => {
  remote = await startLocalServer(async (request, response) => {
    if (request.url.startsWith('/clean')) return void response.end('nothing to see here');
    if (request.url === '/held') await held;
    response.writeHead(404);
    response.end('not here');
  });
});
after(() => remote.close());

/** Every submission reaches its route: the sync caps are above the 20 sent at once. */
const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_SYNC_CONCURRENCY: '32',
  ASSAY_ACCOUNT_SYNC_CONCURRENCY: '32',
});

async function setBalance(svc: TestService, balance: number, enforceBalance: boolean) {
  await svc.store.accounts.update(
    svc.accountId,
    { balance, enforceBalance },
    new Date().toISOString(),
  );
  await credentialsRefreshed(svc);
}

async function balanceOf(svc: TestService): Promise<number> {
  return (await svc.store.accounts.find(svc.accountId))?.balance ?? Number.NaN;
}

const countOf = async (svc: TestService, table: 'jobs' | 'files') =>
  (await svc.store.db.selectFrom(table).select('id').execute()).length;

/** An item sent to one route: its status and, when accepted, the id of its result. */
interface Sent {
  status: number;
  id: string | null;
  error: string;
}

async function v2Answer(response: Response): Promise<Sent> {
  const body = (await response.json()) as { id?: string; error?: string };
  return { status: response.status, id: body.id ?? null, error: body.error ?? '' };
}

async function v1Answer(answer: Awaited<ReturnType<typeof legacyRequest>>): Promise<Sent> {
  // The v1.0 request_id is the v2.x id with dashes.
  const id = answer.body.request_id?.replaceAll('-', '') ?? null;
  return { status: answer.status, id, error: answer.body.reason ?? '' };
}

function location(form: FormData, url: string): FormData {
  form.append('location', url);
  return form;
}

interface Route {
  name: string;
  send(svc: TestService, n: number): Promise<Sent>;
  accepted: number;
  refused: number;
  /** Accepted items are jobs: their results come later. */
  async: boolean;
}

const post = (svc: TestService, path: string, body: BodyInit, type?: string) =>
  fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { authorization: svc.auth, ...(type ? { 'content-type': type } : {}) },
    body,
  });
const form = 'application/x-www-form-urlencoded';

const ROUTES: Route[] = [
  {
    name: 'v2.2 sync upload',
    send: async (svc, n) => v2Answer(await post(svc, '/v2.2/files', uploadForm(`item ${n}`))),
    accepted: 201,
    refused: 403,
    async: false,
  },
  {
    name: 'v2.2 sync location',
    send: async (svc, n) =>
      v2Answer(
        await post(svc, '/v2.2/files', location(new FormData(), `${remote.url}/clean/${n}`)),
      ),
    accepted: 201,
    refused: 403,
    async: false,
  },
  {
    name: 'v2.2 async upload',
    send: async (svc, n) => v2Answer(await post(svc, '/v2.2/files/async', uploadForm(`item ${n}`))),
    accepted: 202,
    refused: 403,
    async: true,
  },
  {
    name: 'v2.2 fetch',
    send: async (svc, n) =>
      v2Answer(await post(svc, '/v2.2/files/fetch', `location=${remote.url}/clean/${n}`, form)),
    accepted: 202,
    refused: 403,
    async: true,
  },
  {
    name: 'v1.0 scan',
    send: async (svc, n) =>
      v1Answer(
        await legacyRequest(`${svc.url}/api/scan/`, {
          method: 'POST',
          headers: { authorization: svc.auth },
          body: `item ${n}`,
        }),
      ),
    accepted: 200,
    refused: 406,
    async: false,
  },
  {
    name: 'v1.0 async scan',
    send: async (svc, n) =>
      v1Answer(
        await legacyRequest(`${svc.url}/api/scan/async`, {
          method: 'POST',
          headers: { authorization: svc.auth },
          body: `item ${n}`,
        }),
      ),
    accepted: 200,
    refused: 406,
    async: true,
  },
  {
    name: 'v1.0 fetch',
    send: async (svc, n) =>
      v1Answer(
        await legacyRequest(`${svc.url}/api/scan/fetch`, {
          method: 'POST',
          headers: { authorization: svc.auth, 'content-type': form },
          body: `url=${remote.url}/clean/${n}`,
        }),
      ),
    accepted: 200,
    refused: 406,
    async: true,
  },
];

describe('the balance is taken when an item is accepted', () => {
  for (const route of ROUTES) {
    test(`${route.name}: 20 at once at balance 2 accept exactly 2; the refused leave nothing behind`, async (t) => {
      const svc = await buildService(t, env());
      await setBalance(svc, 2, true);
      const sent = await Promise.all(Array.from({ length: 20 }, (_, n) => route.send(svc, n)));
      const accepted = sent.filter((item) => item.status === route.accepted);
      const refused = sent.filter((item) => item.status === route.refused);
      assert.equal(accepted.length, 2, JSON.stringify(sent.map((item) => item.status)));
      assert.equal(refused.length, 18, JSON.stringify(sent.map((item) => item.status)));
      for (const item of refused) assert.match(item.error, /no balance left/);
      assert.equal(await balanceOf(svc), 0, 'the two accepted took their credits at once');

      const ids = accepted.map((item) => item.id ?? '');
      // Nothing of the refused: no job, no spool file, no result.
      assert.ok((await countOf(svc, 'jobs')) <= (route.async ? 2 : 0));
      // A job's file may be there already (`.part` while a fetch downloads it).
      for (const name of spoolOf(svc.dataDir)) {
        assert.ok(
          ids.includes(name.replace(/\.part$/, '')),
          `spool file ${name} is an accepted item's`,
        );
      }
      if (route.async) {
        for (const id of ids) {
          const result = await pollResult(svc.url, svc.auth, id);
          assert.deepEqual(result.findings, [], `${id} was scanned`);
        }
      }
      assert.equal(await countOf(svc, 'files'), 2, 'two results');
      assert.equal(await countOf(svc, 'jobs'), 0);
      // A job's spool file goes just after its result is recorded.
      await waitUntil('the spool is empty', () => spoolOf(svc.dataDir).length === 0);
      assert.equal(await balanceOf(svc), 0, 'finishing a job does not charge it again');
    });
  }
});

describe('what an item costs', () => {
  test('an async item that ends in an error costs nothing: its credit comes back with the result', async (t) => {
    const svc = await buildService(t, env());
    await setBalance(svc, 1, true);
    holdDownloads();
    t.after(release);
    const id = await submitFetch(svc.url, svc.auth, `${remote.url}/held`);
    assert.equal(await balanceOf(svc), 0, 'the credit is held while the job runs');
    const refused = await post(svc, '/v2.2/files/fetch', `location=${remote.url}/clean`, form);
    assert.equal(refused.status, 403, 'a held credit is not spent twice');
    release();
    const result = await pollResult(svc.url, svc.auth, id);
    assert.match(String(result.error), /404/);
    assert.equal(result.findings, undefined);
    assert.equal(await balanceOf(svc), 1, 'given back: nothing was scanned');
    // The refusal above read the account when it had no credit: that reading is reused for
    // ASSAY_CREDENTIAL_CACHE_MS (round 4 of a repeat got v1.0's refusal within it).
    await credentialsRefreshed(svc);

    const v1 = await v1Answer(
      await legacyRequest(`${svc.url}/api/scan/fetch`, {
        method: 'POST',
        headers: { authorization: svc.auth, 'content-type': form },
        body: `url=${remote.url}/missing`,
      }),
    );
    assert.equal(v1.status, 200);
    assert.equal(await balanceOf(svc), 0);
    await pollResult(svc.url, svc.auth, v1.id ?? '');
    assert.equal(await balanceOf(svc), 1, 'v1.0 alike');
  });

  test('a sync item without a result costs nothing; one with a verdict costs one credit', async (t) => {
    const svc = await buildService(t, env());
    await setBalance(svc, 1, true);
    const missing = await post(
      svc,
      '/v2.2/files',
      location(new FormData(), `${remote.url}/missing`),
    );
    assert.equal(missing.status, 502);
    assert.equal(await balanceOf(svc), 1, 'a failed download is given back');
    const empty = await post(svc, '/v2.2/files', uploadForm(''));
    assert.equal(empty.status, 400);
    const noContent = await post(svc, '/v2.2/files', new FormData());
    assert.equal(noContent.status, 400);
    const v1Empty = await legacyRequest(`${svc.url}/api/scan/`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: '',
    });
    assert.equal(v1Empty.status, 400);
    assert.equal(await balanceOf(svc), 1, 'bad requests are given back');
    const scanned = await post(svc, '/v2.2/files', uploadForm('worth a credit'));
    assert.equal(scanned.status, 201);
    assert.equal(await balanceOf(svc), 0);
    assert.equal(await countOf(svc, 'files'), 1);
  });

  test('a sync item the engine cannot scan (503) gives its credit back', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: '/nonexistent/clamd.sock' });
    await setBalance(svc, 1, true);
    const upload = await post(svc, '/v2.2/files', uploadForm('hello'));
    assert.equal(upload.status, 503);
    const v1 = await legacyRequest(`${svc.url}/api/scan/`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: 'hello',
    });
    assert.equal(v1.status, 502);
    assert.equal(await balanceOf(svc), 1);
  });

  test('an account that does not enforce its balance is charged the same and may go below zero', async (t) => {
    const svc = await buildService(t, env());
    await setBalance(svc, 1, false);
    const sent = await Promise.all([
      post(svc, '/v2.2/files', uploadForm('one')),
      post(svc, '/v2.2/files/async', uploadForm('two')),
      post(svc, '/v2.2/files/fetch', `location=${remote.url}/clean`, form),
    ]);
    assert.deepEqual(
      sent.map((response) => response.status),
      [201, 202, 202],
    );
    assert.equal(await balanceOf(svc), -2);
    for (const response of sent.slice(1)) {
      await pollResult(svc.url, svc.auth, ((await response.json()) as { id: string }).id);
    }
    assert.equal(await balanceOf(svc), -2, 'counted once each');
  });

  test('a job accepted before credits were held at acceptance is charged when it finishes', async (t) => {
    const scanned = newId();
    const failed = newId();
    // As migration 0010 leaves jobs accepted before it: no credit held. They are in the store when
    // the upgraded service starts.
    const svc = await buildService(t, env(), undefined, undefined, async (_dataDir, store) => {
      const [account] = await store.accounts.list();
      const [key] = await store.apiKeys.list(account?.id ?? '');
      if (account === undefined || key === undefined) throw new Error('no account');
      await store.accounts.update(
        account.id,
        { balance: 5, enforceBalance: true },
        new Date().toISOString(),
      );
      const now = new Date().toISOString();
      const job = (id: string, path: string) => ({
        id,
        accountId: account.id,
        apiKeyId: key.id,
        apiVersion: 'v2.2',
        kind: 'fetch' as const,
        state: 'pending' as const,
        location: `${remote.url}${path}`,
        spoolKey: null,
        metadata: {},
        callback: null,
        attempts: 0,
        runAfter: now,
        creationDate: now,
      });
      await store.jobs.insert(job(scanned, '/clean'));
      await store.jobs.insert(job(failed, '/missing'));
    });
    await pollResult(svc.url, svc.auth, scanned);
    await pollResult(svc.url, svc.auth, failed);
    assert.equal(await balanceOf(svc), 4, 'the scanned one costs one credit, the failed none');
  });
});
