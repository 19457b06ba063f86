import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';
import { nodeArgsOf } from './helpers/entry.js';

describe('configuration from ASSAY_* variables', () => {
  test('the ICAP listener: off by default; a port needs services, ICAPS a certificate; bad entries are named', () => {
    const off = loadConfig({});
    assert.equal(off.icap.port, null);
    assert.equal(off.icap.tlsPort, null);
    assert.equal(off.icap.oversize, 'block');
    const on = loadConfig({
      ASSAY_ICAP_PORT: '1344',
      ASSAY_ICAP_SERVICES: 'avscan=key-1, nsfw=key-2',
      ASSAY_ICAP_ALLOW: '10.0.0.0/8,fd00::/8,192.168.1.7',
    });
    assert.equal(on.icap.port, 1344);
    assert.deepEqual(
      [...on.icap.services],
      [
        ['avscan', 'key-1'],
        ['nsfw', 'key-2'],
      ],
    );
    const refused: Array<[Record<string, string>, RegExp]> = [
      [{ ASSAY_ICAP_PORT: '1344' }, /ASSAY_ICAP_SERVICES must name at least one service/],
      [{ ASSAY_ICAP_PORT: 'icap', ASSAY_ICAP_SERVICES: 'a=k' }, /ASSAY_ICAP_PORT must be a port/],
      [{ ASSAY_ICAP_PORT: '1344', ASSAY_ICAP_SERVICES: 'a=k,a=j' }, /names "a" twice/],
      [{ ASSAY_ICAP_PORT: '1344', ASSAY_ICAP_SERVICES: 'a b=k' }, /entry "a b=k"/],
      [{ ASSAY_ICAP_PORT: '1344', ASSAY_ICAP_SERVICES: 'avscan' }, /must be service=keyId/],
      [
        { ASSAY_ICAPS_PORT: '11344', ASSAY_ICAP_SERVICES: 'a=k' },
        /ASSAY_ICAPS_PORT needs ASSAY_TLS_CERT/,
      ],
      [{ ASSAY_ICAP_PORT: '4000', ASSAY_ICAP_SERVICES: 'a=k' }, /must differ/],
      [{ ASSAY_ICAP_ALLOW: '10.0.0.0/33' }, /ASSAY_ICAP_ALLOW entry "10.0.0.0\/33"/],
      [{ ASSAY_ICAP_ALLOW: 'proxy.example' }, /not an IP address or CIDR/],
      [{ ASSAY_ICAP_OVERSIZE: 'allow' }, /ASSAY_ICAP_OVERSIZE must be one of block, pass/],
    ];
    for (const [env, message] of refused) {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, JSON.stringify(env));
          assert.match(error.message, message);
          return true;
        },
      );
    }
  });

  test('defaults', () => {
    const config = loadConfig({});
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 4000);
    assert.equal(config.maxFileSize, 100 * 1024 * 1024);
    assert.equal(config.headerBrand, 'Service');
    assert.deepEqual(config.clamd, { mode: 'managed' });
    assert.equal(config.publicUrl, null);
    assert.equal(config.bootstrapCredentials, null);
    assert.equal(config.findingsStyle, 'content');
    assert.match(config.hostId, /^[0-9a-f]{8}$/);
    assert.ok(config.dataDir.endsWith('/data'));
    assert.equal(config.legacyMaxPostSize, 100 * 1024 * 1024);
    assert.equal(config.legacyBaseUrl, null);
    assert.equal(config.requestTimeoutMs, 300_000);
    assert.equal(config.requestIdleTimeoutMs, 30_000);
    assert.equal(config.syncConcurrency, 16);
    assert.equal(config.clamdDatabaseDir, '/var/lib/clamav');
    assert.equal(config.clamdSelfCheckMs, 3_600_000);
    assert.equal(config.databasePoolSize, 10);
    assert.equal(config.dispatchPoolSize, 4);
  });

  test("clamd's databases: a folder (or none) and the SelfCheck of a clamd you run", () => {
    const config = loadConfig({ ASSAY_CLAMD_DATABASE_DIR: 'none', ASSAY_CLAMD_SELFCHECK: '600' });
    assert.equal(config.clamdDatabaseDir, '');
    assert.equal(config.clamdSelfCheckMs, 600_000);
    assert.throws(() => loadConfig({ ASSAY_CLAMD_SELFCHECK: 'an hour' }), /ASSAY_CLAMD_SELFCHECK/);
  });

  test('how long credentials and engine versions are reused: 500 ms and 1 s by default, 0 to a minute', () => {
    assert.equal(loadConfig({}).credentialCacheMs, 500);
    assert.equal(loadConfig({}).engineVersionsMaxAgeMs, 1_000);
    const set = loadConfig({
      ASSAY_CREDENTIAL_CACHE_MS: '0',
      ASSAY_ENGINE_VERSIONS_MAX_AGE_MS: '60000',
    });
    assert.equal(set.credentialCacheMs, 0);
    assert.equal(set.engineVersionsMaxAgeMs, 60_000);
    for (const name of ['ASSAY_CREDENTIAL_CACHE_MS', 'ASSAY_ENGINE_VERSIONS_MAX_AGE_MS']) {
      assert.throws(() => loadConfig({ [name]: '60001' }), new RegExp(`${name} must be between`));
      assert.throws(() => loadConfig({ [name]: 'half a second' }), new RegExp(name));
    }
  });

  test("the image engine's runtime (onnx by default, or tfjs) and its threads", () => {
    assert.equal(loadConfig({}).nsfw.imageRuntime, 'onnx');
    // 0: sized to the machine when the engine starts (imagePoolShape).
    assert.equal(loadConfig({}).nsfw.imageThreads, 0);
    assert.equal(loadConfig({}).nsfw.workers, 0);
    const set = loadConfig({ ASSAY_NSFW_IMAGE_RUNTIME: 'tfjs', ASSAY_NSFW_IMAGE_THREADS: '2' });
    assert.equal(set.nsfw.imageRuntime, 'tfjs');
    assert.equal(set.nsfw.imageThreads, 2);
    assert.throws(
      () => loadConfig({ ASSAY_NSFW_IMAGE_RUNTIME: 'gpu' }),
      /ASSAY_NSFW_IMAGE_RUNTIME must be one of onnx, tfjs, got "gpu"/,
    );
    assert.throws(() => loadConfig({ ASSAY_NSFW_IMAGE_THREADS: '-1' }), /ASSAY_NSFW_IMAGE_THREADS/);
    assert.throws(() => loadConfig({ ASSAY_NSFW_IMAGE_THREADS: '65' }), /ASSAY_NSFW_IMAGE_THREADS/);
  });

  test('valid values are taken', () => {
    const config = loadConfig({
      ASSAY_PORT: '8080',
      ASSAY_CLAMD: 'tcp://10.1.2.3:3310',
      ASSAY_PUBLIC_URL: 'https://scan.example.com/',
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:se:cret',
      ASSAY_FINDINGS_STYLE: 'av',
      ASSAY_LEGACY_MAX_POST_SIZE: '5000',
      ASSAY_LEGACY_BASE_URL: 'https://legacy.example.com/old/',
    });
    assert.equal(config.port, 8080);
    assert.deepEqual(config.clamd, { mode: 'external', address: 'tcp://10.1.2.3:3310' });
    assert.equal(config.publicUrl, 'https://scan.example.com');
    assert.deepEqual(config.bootstrapCredentials, { keyId: 'key', secret: 'se:cret' });
    assert.equal(config.findingsStyle, 'av');
    assert.equal(config.legacyMaxPostSize, 5000);
    assert.equal(config.legacyBaseUrl, 'https://legacy.example.com/old');
  });

  const bad: Array<[string, string]> = [
    ['ASSAY_PORT', 'eighty'],
    ['ASSAY_PORT', '70000'],
    ['ASSAY_MAX_FILE_SIZE', '-1'],
    ['ASSAY_MAX_FILE_SIZE', '0'],
    ['ASSAY_CLAMD', 'clamd.sock'],
    ['ASSAY_PUBLIC_URL', 'not a url'],
    ['ASSAY_PUBLIC_URL', 'ftp://example.com'],
    ['ASSAY_HEADER_BRAND', 'Bad Brand'],
    ['ASSAY_BOOTSTRAP_CREDENTIALS', 'no-secret'],
    ['ASSAY_BOOTSTRAP_CREDENTIALS', ':secret'],
    ['ASSAY_FINDINGS_STYLE', 'fancy'],
    ['ASSAY_LOG_LEVEL', 'loud'],
    ['ASSAY_RATE_LIMIT', '-1'],
    ['ASSAY_RATE_LIMIT', 'fast'],
    ['ASSAY_RATE_BURST', '0'],
    ['ASSAY_AUTH_FAIL_BURST', 'many'],
    ['ASSAY_TLS_CERT', '/nonexistent/cert.pem'],
    ['ASSAY_TRUST_PROXY', 'proxy.example.com'],
    ['ASSAY_TRUST_PROXY', '10.0.0.0/40'],
    ['ASSAY_TRUST_PROXY', '17'],
    ['ASSAY_TRUST_PROXY', '1, 10.0.0.1'],
    ['ASSAY_PUBLIC_URL', 'https://user:pw@scan.example.com'],
    ['ASSAY_PUBLIC_URL', 'https://scan.example.com/?'],
    ['ASSAY_LEGACY_MAX_POST_SIZE', '0'],
    ['ASSAY_LEGACY_MAX_POST_SIZE', 'big'],
    ['ASSAY_LEGACY_BASE_URL', '/api'],
    ['ASSAY_LEGACY_BASE_URL', 'https://legacy.example.com/?q=1'],
    ['ASSAY_REQUEST_TIMEOUT', '0'],
    ['ASSAY_REQUEST_IDLE_TIMEOUT', 'soon'],
    ['ASSAY_SYNC_CONCURRENCY', '0'],
    ['ASSAY_ACCOUNT_SYNC_CONCURRENCY', '0'],
    ['ASSAY_DATABASE_URL', 'mysql://db/assay'],
    ['ASSAY_DATABASE_URL', 'db.internal/assay'],
    ['ASSAY_DATABASE_POOL_SIZE', '0'],
    ['ASSAY_DISPATCH_POOL_SIZE', '0'],
  ];
  test('a bad database URL is refused without echoing it (it may hold a password)', () => {
    assert.throws(
      () => loadConfig({ ASSAY_DATABASE_URL: 'postgres//assay:hunter2@db/assay' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message.includes('ASSAY_DATABASE_URL') &&
        !error.message.includes('hunter2'),
    );
  });

  for (const [name, value] of bad) {
    test(`${name}=${value} is refused with a message naming the variable`, () => {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (error: unknown) => error instanceof ConfigError && error.message.includes(name),
      );
    });
  }

  test('rate limits, TLS and trusted proxies', () => {
    const defaults = loadConfig({});
    assert.deepEqual(defaults.rateLimit, { rate: 100, burst: 200 });
    assert.deepEqual(defaults.authFailureLimit, { rate: 1, burst: 20 });
    assert.equal(defaults.tls, null);
    assert.deepEqual(defaults.trustProxy, { kind: 'none' });
    const set = loadConfig({
      ASSAY_RATE_LIMIT: '0.5',
      ASSAY_RATE_BURST: '3',
      ASSAY_TRUST_PROXY: '10.0.0.0/8, ::1',
    });
    assert.deepEqual(set.rateLimit, { rate: 0.5, burst: 3 });
    assert.deepEqual(set.trustProxy, { kind: 'addresses', addresses: ['10.0.0.0/8', '::1'] });
    // `true` is deprecated: one hop, never the leftmost (client-written) entry.
    assert.deepEqual(loadConfig({ ASSAY_TRUST_PROXY: 'true' }).trustProxy, {
      kind: 'hops',
      hops: 1,
      deprecatedTrue: true,
    });
    assert.deepEqual(loadConfig({ ASSAY_TRUST_PROXY: '2' }).trustProxy, {
      kind: 'hops',
      hops: 2,
      deprecatedTrue: false,
    });
    assert.deepEqual(loadConfig({ ASSAY_TRUST_PROXY: '0' }).trustProxy, { kind: 'none' });
    assert.throws(
      () => loadConfig({ ASSAY_TLS_KEY: '/etc/hostname' }),
      /ASSAY_TLS_CERT and ASSAY_TLS_KEY must be set together/,
    );
    assert.throws(
      () => loadConfig({ ASSAY_TLS_CERT: '/etc/hostname', ASSAY_TLS_KEY: '/etc/hostname' }),
      /not a usable PEM pair/,
    );
  });

  test('spool location: a directory or an S3 bucket, each checked', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.spoolDir, '');
    assert.equal(defaults.spoolUrl, '');
    assert.equal(defaults.s3Endpoint, '');
    assert.equal(defaults.s3Region, 'us-east-1');
    assert.equal(
      loadConfig({ ASSAY_SPOOL_DIR: '/mnt/shared/spool/' }).spoolDir,
      '/mnt/shared/spool',
    );
    const s3 = loadConfig({
      ASSAY_SPOOL_URL: 's3://assay-spool/eu/prod',
      ASSAY_S3_ENDPOINT: 'https://s3.example.net:9000',
      ASSAY_S3_REGION: 'eu-west-1',
    });
    assert.equal(s3.spoolUrl, 's3://assay-spool/eu/prod');
    assert.equal(s3.s3Endpoint, 'https://s3.example.net:9000');
    assert.equal(s3.s3Region, 'eu-west-1');
    const refused: Array<[Record<string, string>, RegExp]> = [
      [{ ASSAY_SPOOL_URL: 'http://assay-spool/x' }, /^ASSAY_SPOOL_URL must be s3:\/\/bucket/],
      [{ ASSAY_SPOOL_URL: 's3://' }, /^ASSAY_SPOOL_URL has an invalid bucket name ""/],
      [{ ASSAY_SPOOL_URL: 's3://Bad_Bucket/x' }, /^ASSAY_SPOOL_URL has an invalid bucket name/],
      [{ ASSAY_SPOOL_URL: 's3://assay-spool/a/../b' }, /^ASSAY_SPOOL_URL has an invalid prefix/],
      [{ ASSAY_SPOOL_URL: 's3://assay-spool/x?versionId=1' }, /^ASSAY_SPOOL_URL must be s3:/],
      [
        { ASSAY_SPOOL_URL: 's3://assay-spool', ASSAY_SPOOL_DIR: '/mnt/spool' },
        /ASSAY_SPOOL_DIR and ASSAY_SPOOL_URL are exclusive/,
      ],
      [
        { ASSAY_S3_ENDPOINT: 'http://127.0.0.1:9000' },
        /^ASSAY_S3_ENDPOINT is set but ASSAY_SPOOL_URL/,
      ],
      [
        { ASSAY_SPOOL_URL: 's3://assay-spool', ASSAY_S3_ENDPOINT: 'ftp://127.0.0.1' },
        /^ASSAY_S3_ENDPOINT must be an http\(s\) URL/,
      ],
      [
        { ASSAY_SPOOL_URL: 's3://assay-spool', ASSAY_S3_ENDPOINT: 'http://key:secret@127.0.0.1' },
        /^ASSAY_S3_ENDPOINT must not hold credentials/,
      ],
      [{ ASSAY_S3_REGION: 'EU West' }, /^ASSAY_S3_REGION must be a region name/],
    ];
    for (const [env, message] of refused) {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) => error instanceof ConfigError && message.test(error.message),
        JSON.stringify(env),
      );
    }
    // A refused endpoint's credentials are not echoed.
    assert.throws(
      () =>
        loadConfig({ ASSAY_SPOOL_URL: 's3://assay-spool', ASSAY_S3_ENDPOINT: 'http://k:secret@h' }),
      (error: unknown) => error instanceof Error && !error.message.includes('secret'),
    );
  });

  test('`assay serve` with a bad value exits non-zero, naming the variable', () => {
    const result = spawnSync(process.execPath, [...nodeArgsOf('src/main.ts'), 'serve'], {
      env: { ...process.env, ASSAY_PORT: 'nope' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /configuration error: ASSAY_PORT/);
  });
});
