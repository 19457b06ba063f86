import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { after, describe, test } from 'node:test';
import { buildService, tempDir, useSharedClamd } from '../helpers/service.js';
import { writeSelfSignedCertificate } from '../helpers/tls.js';

const clamd = useSharedClamd();

function generateCertificate(): { dir: string; cert: string; key: string } {
  const dir = tempDir('assay-tls-');
  return { dir, ...writeSelfSignedCertificate(dir) };
}

function httpsRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; ca: Buffer },
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? 'GET', headers: options.headers, ca: options.ca },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('HTTPS', () => {
  const pair = generateCertificate();
  after(() => rmSync(pair.dir, { recursive: true, force: true }));

  test('serves the API over TLS with the configured certificate; Location is https', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TLS_CERT: pair.cert,
      ASSAY_TLS_KEY: pair.key,
    });
    assert.match(svc.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const ca = readFileSync(pair.cert);
    const ping = await httpsRequest(`${svc.url}/v2.2/ping`, {
      headers: { authorization: svc.auth },
      ca,
    });
    assert.equal(ping.status, 200);
    assert.equal(JSON.parse(ping.body).key, svc.keyId);

    const token = await httpsRequest(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      ca,
    });
    assert.equal(token.status, 201);
    assert.equal(
      token.headers.location,
      `${svc.url}/v2.2/auth/tokens/${JSON.parse(token.body).id}`,
    );

    // A client that does not trust the certificate is refused by its own TLS check.
    await assert.rejects(
      httpsRequest(`${svc.url}/v2.2/ping`, { ca: Buffer.from('') }),
      /self[- ]signed|unable to verify|certificate/i,
    );
    // Plain HTTP on the TLS port gets no API answer.
    const plain = await fetch(`${svc.url.replace('https:', 'http:')}/v2.2/ping`, {
      headers: { authorization: svc.auth },
    }).then(
      (response) => response.status,
      () => 'refused',
    );
    assert.notEqual(plain, 200);
  });
});

describe('behind a reverse proxy', () => {
  const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'scan.example.com' };

  async function tokenLocation(url: string, auth: string): Promise<string | null> {
    const response = await fetch(`${url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: auth, ...forwarded },
    });
    assert.equal(response.status, 201);
    return response.headers.get('location');
  }

  test('X-Forwarded-Proto and -Host are ignored unless the proxy is trusted', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    assert.ok((await tokenLocation(svc.url, svc.auth))?.startsWith(`${svc.url}/v2.2/auth/tokens/`));
  });

  test('a trusted proxy sets the scheme and host of Location', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '127.0.0.1/32',
    });
    assert.match(
      (await tokenLocation(svc.url, svc.auth)) ?? '',
      /^https:\/\/scan\.example\.com\/v2\.2\/auth\/tokens\/[0-9a-f]{32}$/,
    );
  });

  test('a proxy at another address is not trusted', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_TRUST_PROXY: '10.0.0.1' });
    assert.ok((await tokenLocation(svc.url, svc.auth))?.startsWith(`${svc.url}/`));
  });

  test('ASSAY_PUBLIC_URL wins over forwarded headers', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '1',
      ASSAY_PUBLIC_URL: 'https://assay.internal',
    });
    assert.ok((await tokenLocation(svc.url, svc.auth))?.startsWith('https://assay.internal/v2.2/'));
  });
});
