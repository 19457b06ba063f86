import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml } from 'yaml';
import { eicar } from '../../src/engines/test-content.js';
import type { OpenApiDocument, Operation } from '../../src/http/openapi/types.js';
import { uploadForm } from '../helpers/content.js';
import { checkResponse, descriptorProblems } from '../helpers/openapi.js';
import { basic, buildService, type TestService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });
const VERSIONS = ['v2.0', 'v2.1', 'v2.2'] as const;

async function descriptorOf(url: string, version: string): Promise<OpenApiDocument> {
  const response = await fetch(`${url}/${version}/openapi.json`);
  assert.equal(response.status, 200);
  return (await response.json()) as OpenApiDocument;
}

/** (method, path) of every operation, with the server's prefix and Fastify's `:param` form. */
function documentedRoutes(document: OpenApiDocument): string[] {
  const prefix = document.servers[0]?.url ?? '';
  return Object.entries(document.paths)
    .flatMap(([path, item]) =>
      Object.keys(item).map(
        (method) => `${method.toUpperCase()} ${prefix}${path.replace(/\{(\w+)\}/g, ':$1')}`,
      ),
    )
    .sort();
}

function servedRoutes(svc: TestService, version: string): string[] {
  const own = new Set([`/${version}/openapi.json`, `/${version}/openapi.yaml`]);
  return svc.service.routes
    .filter(({ method }) => method !== 'HEAD' && method !== 'OPTIONS')
    .filter(({ url }) => url.startsWith(`/${version}/`) && !own.has(url))
    .map(({ method, url }) => `${method} ${url}`)
    .sort();
}

function operations(document: OpenApiDocument): Array<[string, string, Operation]> {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => [method, path, op] as [string, string, Operation]),
  );
}

describe('the published API descriptor', () => {
  test('JSON and YAML of each version, without credentials, are the same document', async (t) => {
    const svc = await buildService(t, env());
    for (const version of VERSIONS) {
      const json = await fetch(`${svc.url}/${version}/openapi.json`);
      const yaml = await fetch(`${svc.url}/${version}/openapi.yaml`);
      assert.equal(json.status, 200, version);
      assert.equal(yaml.status, 200, version);
      assert.equal(json.headers.get('content-type'), 'application/json');
      assert.match(yaml.headers.get('content-type') ?? '', /^application\/yaml/);
      const document = (await json.json()) as OpenApiDocument;
      assert.deepEqual(parseYaml(await yaml.text()), document, version);
      assert.equal(document.openapi.slice(0, 4), '3.1.');
      assert.equal(document.info.version, version.slice(1));
      assert.deepEqual(
        document.servers.map((server) => server.url),
        [`/${version}`],
      );
    }
  });

  test('with a public URL, the server URL is absolute', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_PUBLIC_URL: 'https://scan.example.com' });
    const document = await descriptorOf(svc.url, 'v2.1');
    assert.deepEqual(
      document.servers.map((server) => server.url),
      ['https://scan.example.com/v2.1'],
    );
  });

  test('each is valid OpenAPI 3.1 with valid schemas; broken documents are refused', async (t) => {
    const svc = await buildService(t, env());
    for (const version of VERSIONS) {
      assert.deepEqual(await descriptorProblems(await descriptorOf(svc.url, version)), [], version);
    }
    const good = await descriptorOf(svc.url, 'v2.2');
    const broken = [
      (d: OpenApiDocument) => Object.assign(d, { openapi: '3.0.3' }),
      (d: OpenApiDocument) => Object.assign(d.info, { title: undefined }),
      (d: OpenApiDocument) => {
        const parameter = d.paths['/files/{id}']?.get?.parameters?.[0];
        if (parameter !== undefined) Object.assign(parameter, { in: 'body' });
      },
      (d: OpenApiDocument) => Object.assign(d.components.schemas.Ping ?? {}, { type: 'pong' }),
      (d: OpenApiDocument) => Object.assign(d.components.schemas.Token ?? {}, { requird: ['id'] }),
    ];
    for (const [index, breakIt] of broken.entries()) {
      const document = structuredClone(good);
      breakIt(document);
      assert.notDeepEqual(await descriptorProblems(document), [], `broken document ${index}`);
    }
  });

  test('describes exactly the routes each version serves, no more and no less', async (t) => {
    const svc = await buildService(t, env());
    for (const version of VERSIONS) {
      const document = await descriptorOf(svc.url, version);
      const served = servedRoutes(svc, version);
      assert.ok(served.length >= 8, `${version} serves its routes`);
      assert.deepEqual(documentedRoutes(document), served, version);
    }
    const v22 = documentedRoutes(await descriptorOf(svc.url, 'v2.2'));
    assert.ok(v22.includes('GET /v2.2/files/:id/trace'));
    assert.ok(!documentedRoutes(await descriptorOf(svc.url, 'v2.1')).some((r) => /trace/.test(r)));
  });

  test('every route registered is described, or one of the open routes; none ends in a slash', async (t) => {
    const svc = await buildService(t, env());
    const described = new Set<string>();
    for (const version of VERSIONS) {
      for (const route of documentedRoutes(await descriptorOf(svc.url, version))) {
        described.add(route);
      }
    }
    // Outside the descriptors: health, metrics, samples, the descriptors and their pages, their
    // icon, v1.0, CORS, the web console (pages for people, not the API), and watched buckets'
    // webhook events (a bucket server's, with their own token: docs/BUCKETS.md).
    const open =
      /^(GET|HEAD) \/(health|metrics|static|docs|favicon\.svg)\b|^(GET|HEAD) \/v2\.\d\/openapi\.(json|yaml)$|^\w+ \/console\b|^POST \/bucket-events\/:source$/;
    const undescribed = svc.service.routes
      .map(({ method, url }) => `${method} ${url}`)
      .filter((route) => !described.has(route) && !described.has(route.replace(/^HEAD/, 'GET')))
      .filter((route) => !open.test(route) && !/^\w+ \/api\/scan\b/.test(route))
      .filter((route) => route !== 'OPTIONS *');
    assert.deepEqual(undescribed, []);
    // One rule serves `/path/` as `/path`: a route or a description with the slash is a duplicate.
    const slashed = [...described, ...svc.service.routes.map(({ url }) => url)].filter((route) =>
      route.endsWith('/'),
    );
    assert.deepEqual(slashed, []);
  });

  test('every operation needs Basic credentials and documents 401, 429 and rate-limit headers', async (t) => {
    const svc = await buildService(t, env());
    for (const version of VERSIONS) {
      const document = await descriptorOf(svc.url, version);
      assert.deepEqual(document.components.securitySchemes.basicAuth, {
        ...document.components.securitySchemes.basicAuth,
        type: 'http',
        scheme: 'basic',
      });
      assert.deepEqual(document.security, [{ basicAuth: [] }]);
      for (const [method, path, operation] of operations(document)) {
        const where = `${version} ${method} ${path}`;
        assert.equal(operation.security, undefined, `${where} inherits Basic`);
        assert.deepEqual(operation.responses['401'], {
          $ref: '#/components/responses/Unauthorized',
        });
        assert.deepEqual(operation.responses['429'], {
          $ref: '#/components/responses/RateLimited',
        });
        const ok = Object.entries(operation.responses).find(([status]) => status.startsWith('2'));
        assert.ok(ok !== undefined && 'headers' in ok[1], where);
        assert.ok(ok[1].headers?.['x-ratelimit-remaining'], where);
        // What is documented must be what unauthenticated requests get.
        const response = await fetch(
          `${svc.url}/${version}${path.replace('{id}', 'f'.repeat(32))}`,
          {
            method: method.toUpperCase(),
          },
        );
        assert.deepEqual(await checkResponse(document, method, path, response), [], where);
        assert.equal(response.status, 401, where);
      }
      const rateLimited = document.components.responses.RateLimited;
      assert.deepEqual(rateLimited?.headers?.['Retry-After'], {
        $ref: '#/components/headers/RetryAfter',
      });
      assert.equal(document.components.headers.RetryAfter?.schema.type, 'integer');
    }
  });

  test('/docs renders every operation of the descriptor, self-contained', async (t) => {
    const svc = await buildService(t, env());
    for (const [page, version] of [
      ['/docs', 'v2.2'],
      ['/docs/v2.1', 'v2.1'],
      ['/docs/v2.0', 'v2.0'],
    ] as const) {
      const response = await fetch(`${svc.url}${page}`);
      assert.equal(response.status, 200, page);
      assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
      const html = await response.text();
      // Its one link is its icon, served by Assay itself.
      const icon = '<link rel="icon" href="/favicon.svg" type="image/svg+xml">';
      assert.ok(html.includes(icon), 'its icon');
      assert.doesNotMatch(
        html.replace(icon, ''),
        /<script|<link|<img|<iframe|@import|url\(/i,
        'nothing external',
      );
      assert.match(html, new RegExp(`href="/${version}/openapi.json"`));
      assert.match(html, new RegExp(`href="/${version}/openapi.yaml"`));
      const document = await descriptorOf(svc.url, version);
      for (const [method, path, operation] of operations(document)) {
        assert.ok(
          html.includes(`id="${operation.operationId}"`),
          `${page}: ${operation.operationId}`,
        );
        assert.ok(
          html.includes(`${method.toUpperCase()}</span>/${version}${path}`),
          `${page}: ${path}`,
        );
        for (const status of Object.keys(operation.responses)) {
          assert.ok(html.includes(`<strong>${status}</strong>`), `${page}: ${status}`);
        }
      }
      assert.equal(html.includes('/files/{id}/trace'), version === 'v2.2', page);
      assert.equal(html.includes('/account.json'), version !== 'v2.0', page);
    }
  });
});

describe('real responses match the descriptor', () => {
  async function eventually(url: string, auth: string): Promise<Response> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const response = await fetch(url, { headers: { authorization: auth } });
      if (response.status !== 404) return response;
      await response.body?.cancel();
      await sleep(100);
    }
    throw new Error(`${url} stayed 404`);
  }

  test('v2.2: ping, files, a failed fetch, trace, tokens, account, errors', async (t) => {
    const svc = await buildService(t, env());
    const document = await descriptorOf(svc.url, 'v2.2');
    const base = `${svc.url}/v2.2`;
    const auth = { authorization: svc.auth };
    const checks: Array<[string, string, Response]> = [];
    const record = (method: string, path: string, response: Response) => {
      checks.push([method, path, response.clone()]);
      return response;
    };

    record('get', '/ping', await fetch(`${base}/ping`, { headers: auth }));
    const created = record(
      'post',
      '/files',
      await fetch(`${base}/files`, {
        method: 'POST',
        headers: auth,
        body: uploadForm(eicar(), { 'metadata[order]': '42' }),
      }),
    );
    assert.equal(created.status, 201);
    const { id } = (await created.json()) as { id: string };
    record('get', '/files/{id}', await fetch(`${base}/files/${id}`, { headers: auth }));
    record('get', '/files/{id}', await fetch(`${base}/files/${'0'.repeat(32)}`, { headers: auth }));
    record('get', '/files/{id}/trace', await fetch(`${base}/files/${id}/trace`, { headers: auth }));
    record(
      'post',
      '/files',
      await fetch(`${base}/files`, { method: 'POST', headers: auth, body: uploadForm('') }),
    );
    record(
      'post',
      '/files/async',
      await fetch(`${base}/files/async`, {
        method: 'POST',
        headers: auth,
        body: uploadForm('async content'),
      }),
    );
    // Refused by the SSRF guard: the item finishes with an `error` and no findings.
    const fetched = record(
      'post',
      '/files/fetch',
      await fetch(`${base}/files/fetch`, {
        method: 'POST',
        headers: auth,
        body: new URLSearchParams({ location: 'http://127.0.0.1:9/content' }),
      }),
    );
    const failedId = ((await fetched.json()) as { id: string }).id;
    const failed = record(
      'get',
      '/files/{id}',
      await eventually(`${base}/files/${failedId}`, svc.auth),
    );
    assert.ok('error' in ((await failed.json()) as object));

    const token = record(
      'post',
      '/auth/tokens',
      await fetch(`${base}/auth/tokens`, { method: 'POST', headers: auth }),
    );
    const tokenId = ((await token.json()) as { id: string }).id;
    record(
      'get',
      '/auth/tokens/{id}',
      await fetch(`${base}/auth/tokens/${tokenId}`, { headers: auth }),
    );
    record(
      'get',
      '/account.json',
      await fetch(`${base}/account.json`, { headers: { authorization: basic(tokenId, '') } }),
    );
    record(
      'get',
      '/ping',
      await fetch(`${base}/ping`, { headers: { authorization: basic(tokenId, '') } }),
    );
    record(
      'delete',
      '/auth/tokens/{id}',
      await fetch(`${base}/auth/tokens/${tokenId}`, { method: 'DELETE', headers: auth }),
    );
    await svc.store.users.insert({
      accountId: svc.accountId,
      email: 'ops@example.com',
      creationDate: '2026-01-02T03:04:05.678Z',
      lastLoginDate: null,
    });
    record('get', '/account.json', await fetch(`${base}/account.json`, { headers: auth }));

    for (const [method, path, response] of checks) {
      const where = `${method} ${path} ${response.status}`;
      assert.deepEqual(await checkResponse(document, method, path, response), [], where);
    }
    const statuses = checks.map(
      ([method, path, response]) => `${method} ${path} ${response.status}`,
    );
    assert.ok(statuses.includes('get /account.json 403'), 'a token on the account');
    assert.ok(statuses.includes('get /files/{id} 404'));
  });

  test('v2.0 results carry no metadata, as its descriptor says; v2.1 results do', async (t) => {
    const svc = await buildService(t, env());
    for (const version of ['v2.0', 'v2.1'] as const) {
      const document = await descriptorOf(svc.url, version);
      const response = await fetch(`${svc.url}/${version}/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm('plain text content', { 'metadata[a]': 'b' }),
      });
      assert.deepEqual(await checkResponse(document, 'post', '/files', response), [], version);
      const properties = (document.components.schemas.FileResult?.properties ?? {}) as object;
      assert.equal('metadata' in properties, version === 'v2.1', version);
    }
  });
});
