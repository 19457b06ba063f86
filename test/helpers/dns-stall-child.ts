/**
 * Run inside a private network namespace (see test/outbound/dns-stall.test.ts), where only
 * loopback exists: the namespace, not the loopback-only guard, keeps packets in. Binds the
 * namespace's resolver address and never answers, starts `UNRESOLVABLE` fetches of names no
 * one will resolve, then times a fetch of a name from /etc/hosts. Prints one JSON line.
 */
import dgram from 'node:dgram';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AddressPolicy } from '../../src/outbound/address-policy.js';
import { fetchContent } from '../../src/outbound/guarded-http.js';

const UNRESOLVABLE = Number(process.env.UNRESOLVABLE ?? '40');

const silent = dgram.createSocket('udp4');
let queries = 0;
silent.on('message', () => {
  queries += 1; // read, never answered
});
await new Promise<void>((resolve) => silent.bind(53, '127.0.0.53', resolve));

const server = createServer((_request, response) => response.end('hosted'));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as AddressInfo;

const options = {
  policy: AddressPolicy.fromSetting('127.0.0.1/32'),
  connectTimeoutMs: 5_000,
  totalTimeoutMs: 60_000,
  userAgent: 'dns-stall-test',
  maxBytes: 1024,
};
const stalled = Array.from({ length: UNRESOLVABLE }, (_, i) =>
  fetchContent(`http://unresolvable-${i}.example/`, options).then(
    () => 'fetched',
    (error: Error) => error.message,
  ),
);
// Let every lookup start (and take its thread, where lookups use threads).
await sleep(300);
const started = performance.now();
let hosted: string;
try {
  const result = await fetchContent(`http://hosted.test:${port}/`, {
    ...options,
    totalTimeoutMs: Number(process.env.HOSTED_TIMEOUT_MS ?? '60000'),
  });
  const chunks: Buffer[] = [];
  for await (const chunk of result.body) chunks.push(chunk);
  hosted = Buffer.concat(chunks).toString();
} catch (error) {
  hosted = `failed: ${error instanceof Error ? error.message : String(error)}`;
}
const hostedMs = Math.round(performance.now() - started);
const settled = await Promise.race([Promise.all(stalled), sleep(20_000).then(() => null)]);
process.stdout.write(
  `${JSON.stringify({ hosted, hostedMs, queries, stalled: settled?.slice(0, 2) ?? 'still waiting' })}\n`,
);
process.exit(0);
