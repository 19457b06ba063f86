import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  MAX_HOSTS_BYTES,
  NameResolver,
  type NameResolverOptions,
  parseHosts,
} from '../../src/outbound/name-resolver.js';
import { OutboundError } from '../../src/outbound/target.js';
import { tempDir } from '../helpers/service.js';

// @run-alone: times the resolver on a megabyte of hostile input (linear, under a bound)

/** A name server on loopback: answers `answer.test` with 127.0.0.9 (A only), NXDOMAIN otherwise. */
function answeringServer(): Promise<{ socket: dgram.Socket; queries: string[] }> {
  const socket = dgram.createSocket('udp4');
  const queries: string[] = [];
  socket.on('message', (query, peer) => {
    let offset = 12;
    const labels: string[] = [];
    while (offset < query.length && query[offset] !== 0) {
      const length = query[offset] ?? 0;
      labels.push(query.subarray(offset + 1, offset + 1 + length).toString());
      offset += length + 1;
    }
    const questionEnd = offset + 5;
    const type = query.readUInt16BE(offset + 1);
    const name = labels.join('.').toLowerCase();
    queries.push(`${name}/${type}`);
    const known = name === 'answer.test';
    const answer = known && type === 1;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    header.writeUInt16BE(known ? 0x8180 : 0x8183, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answer ? 1 : 0, 6);
    const record = Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 9]);
    const parts = [header, query.subarray(12, questionEnd), ...(answer ? [record] : [])];
    socket.send(Buffer.concat(parts), peer.port, peer.address);
  });
  return new Promise((resolve) => socket.bind(0, '127.0.0.1', () => resolve({ socket, queries })));
}

/** A name server on loopback that reads every query and never answers. */
function silentServer(): Promise<{ socket: dgram.Socket; queries: string[] }> {
  const socket = dgram.createSocket('udp4');
  const queries: string[] = [];
  socket.on('message', (query) => queries.push(query.toString('hex')));
  return new Promise((resolve) => socket.bind(0, '127.0.0.1', () => resolve({ socket, queries })));
}

let hostsPath = '';
let answering: { socket: dgram.Socket; queries: string[] };
let silent: { socket: dgram.Socket; queries: string[] };
before(async () => {
  hostsPath = join(tempDir('assay-hosts-'), 'hosts');
  writeFileSync(
    hostsPath,
    [
      '# a comment line',
      '127.0.0.1\tlocalhost',
      '127.0.0.7 Hosted.Test. alias.test # trailing comment',
      '::1 hosted.test',
      'not-an-address ignored.test',
      '',
    ].join('\n'),
  );
  answering = await answeringServer();
  silent = await silentServer();
});
after(() => {
  answering.socket.close();
  silent.socket.close();
});

function resolver(server: dgram.Socket, overrides: Partial<NameResolverOptions> = {}) {
  return new NameResolver({
    tryTimeoutMs: 200,
    tries: 1,
    deadlineMs: 2_000,
    maxInFlight: 8,
    hostsPath,
    servers: [`127.0.0.1:${(server.address() as AddressInfo).port}`],
    ...overrides,
  });
}

function code(pattern: string) {
  return (error: unknown) => {
    assert.equal((error as { code?: string }).code, pattern, String(error));
    return true;
  };
}

describe('NameResolver', () => {
  test('/etc/hosts first, case-insensitive, every address of the name; no DNS query', async () => {
    const before = silent.queries.length;
    const names = resolver(silent.socket);
    assert.deepEqual(await names.resolve('HOSTED.test'), [
      { address: '127.0.0.7', family: 4 },
      { address: '::1', family: 6 },
    ]);
    assert.deepEqual(await names.resolve('alias.test.'), [{ address: '127.0.0.7', family: 4 }]);
    assert.equal(silent.queries.length, before);
  });

  test('other names go to DNS: an answer, and NXDOMAIN as "no such host"', async () => {
    const names = resolver(answering.socket);
    assert.deepEqual(await names.resolve('answer.test'), [{ address: '127.0.0.9', family: 4 }]);
    await assert.rejects(names.resolve('missing.test'), code('ENOTFOUND'));
    assert.ok(answering.queries.includes('answer.test/1'));
    assert.ok(answering.queries.includes('answer.test/28'));
  });

  test('a silent server: the lookup ends at its own deadline, whatever c-ares would wait', async () => {
    const names = resolver(silent.socket, { tryTimeoutMs: 10_000, tries: 4, deadlineMs: 300 });
    const started = Date.now();
    await assert.rejects(names.resolve('never.test'), code('ETIMEOUT'));
    assert.ok(Date.now() - started < 2_000, `${Date.now() - started} ms`);
    assert.equal(names.lookupsInFlight, 0);
  });

  test('at most maxInFlight lookups: the next fails at once; /etc/hosts names still answer', async () => {
    const names = resolver(silent.socket, {
      tryTimeoutMs: 10_000,
      deadlineMs: 1_500,
      maxInFlight: 3,
    });
    const pending = [1, 2, 3].map((i) => names.resolve(`stalled-${i}.test`).catch(String));
    // Each checks /etc/hosts (a file read) before it counts.
    for (let waited = 0; names.lookupsInFlight < 3 && waited < 1_000; waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(names.lookupsInFlight, 3);
    const started = Date.now();
    await assert.rejects(names.resolve('one-too-many.test'), (error: unknown) => {
      assert.ok(error instanceof OutboundError);
      assert.match(error.message, /too many DNS lookups under way \(3\)/);
      return true;
    });
    assert.deepEqual(await names.resolve('hosted.test'), [
      { address: '127.0.0.7', family: 4 },
      { address: '::1', family: 6 },
    ]);
    assert.ok(Date.now() - started < 500);
    await Promise.all(pending);
    assert.equal(names.lookupsInFlight, 0);
  });

  test('an abort cancels the lookup at once', async () => {
    const names = resolver(silent.socket, { tryTimeoutMs: 10_000, deadlineMs: 10_000 });
    const controller = new AbortController();
    const started = Date.now();
    const lookup = names.resolve('aborted.test', controller.signal);
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(lookup, code('ECANCELLED'));
    assert.ok(Date.now() - started < 1_000);
    assert.equal(names.lookupsInFlight, 0);
  });

  test('a hosts file is read up to MAX_HOSTS_BYTES: what lies beyond is not a host entry', async () => {
    const big = join(tempDir('assay-hosts-'), 'hosts');
    const filler = `${'#'.repeat(1000)}\n`.repeat(Math.ceil(MAX_HOSTS_BYTES / 1001));
    writeFileSync(big, `127.0.0.5 first.test\n${filler}127.0.0.6 beyond.test\n`);
    const names = resolver(answering.socket, { hostsPath: big });
    assert.deepEqual(await names.resolve('first.test'), [{ address: '127.0.0.5', family: 4 }]);
    await assert.rejects(names.resolve('beyond.test'), code('ENOTFOUND'));
  });
});

describe('parseHosts', () => {
  test('fields, comments, tabs, bad addresses, duplicates', () => {
    const table = parseHosts(
      ' 10.0.0.1  a.test\tB.test # c.test\n10.0.0.1 a.test\nbad d.test\nfe80::1%eth0 e.test\r\n',
    );
    assert.deepEqual(Object.fromEntries(table), {
      'a.test': [{ address: '10.0.0.1', family: 4 }],
      'b.test': [{ address: '10.0.0.1', family: 4 }],
      'e.test': [{ address: 'fe80::1%eth0', family: 6 }],
    });
  });

  test('linear on hostile input: a megabyte of one line, of blanks, of names', () => {
    const inputs = [
      ' '.repeat(MAX_HOSTS_BYTES),
      `1.2.3.4${' x'.repeat(MAX_HOSTS_BYTES / 2)}`,
      '\n'.repeat(MAX_HOSTS_BYTES),
      '#'.repeat(MAX_HOSTS_BYTES),
    ];
    for (const input of inputs) {
      const started = performance.now();
      parseHosts(input);
      assert.ok(performance.now() - started < 1_000, `${performance.now() - started} ms`);
    }
  });
});
