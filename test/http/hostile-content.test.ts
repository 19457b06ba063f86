import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pollResult } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { zipStored } from '../helpers/zip.js';

const clamd = useSharedClamd();

describe('content that cannot be fully examined', () => {
  test('an encrypted archive is flagged, never reported clean, synchronously and asynchronously', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const archive = zipStored([
      { name: 'invoice.pdf', data: randomContent(2048), password: 'infected' },
    ]);
    const sync = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(archive),
    });
    assert.equal(sync.status, 201);
    const expected = ['content.malicious.heuristics.encrypted.zip'];
    assert.deepEqual(((await sync.json()) as { findings: string[] }).findings, expected);
    const accepted = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(
        zipStored([{ name: 'other.bin', data: randomContent(512), password: 'secret' }]),
      ),
    });
    assert.equal(accepted.status, 202);
    const { id } = (await accepted.json()) as { id: string };
    assert.deepEqual((await pollResult(svc.url, svc.auth, id)).findings, expected);
  });

  test('with ASSAY_UNEXAMINED=error, an encrypted or too-deep archive is an error, synchronously and asynchronously, never clean', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_UNEXAMINED: 'error' });
    let deep: Buffer = Buffer.from('harmless text at the bottom');
    for (let depth = 0; depth < 20; depth++)
      deep = zipStored([{ name: `l${depth}.zip`, data: deep }]);
    const cases = [
      {
        content: () =>
          zipStored([{ name: 'invoice.pdf', data: randomContent(2048), password: 'infected' }]),
        why: /could not be fully examined: it is encrypted \(Heuristics\.Encrypted\.Zip\)/,
      },
      {
        content: () => deep,
        why: /could not be fully examined: it is over a limit of depth, file count or size \(Heuristics\.Limits\.Exceeded\.MaxRecursion\)/,
      },
    ];
    for (const { content, why } of cases) {
      const sync = await fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm(content()),
      });
      assert.equal(sync.status, 422);
      assert.match(((await sync.json()) as { error: string }).error, why);
      const accepted = await fetch(`${svc.url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm(content()),
      });
      assert.equal(accepted.status, 202);
      const { id } = (await accepted.json()) as { id: string };
      const result = await pollResult(svc.url, svc.auth, id);
      assert.match(String(result.error), why);
      assert.notDeepEqual(result.findings, [], 'never reported clean');
    }
    // What clamd examined whole is still a finding, and clean content still clean.
    const plain = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(zipStored([{ name: 'a.txt', data: randomContent(512) }])),
    });
    assert.equal(plain.status, 201);
    assert.deepEqual(((await plain.json()) as { findings: string[] }).findings, []);
  });
});
