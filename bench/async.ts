/**
 * Asynchronous processing of 4 KB uploads to POST /files/async, in two phases so that measuring
 * does not load the service it measures: one client at a time polls GET /files/{id} every 2 ms
 * (submit-to-result), then four clients submit without polling and a receiver on this machine
 * times each callback's arrival (submit-to-callback).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { percentile } from './stats.js';

const BOUNDARY = 'assay-bench-async';

function form(content: Buffer, callback: string): Uint8Array<ArrayBuffer> {
  // A fresh concat is never a shared buffer, so it can be typed as fetch's body wants.
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n`,
    ),
    content,
    Buffer.from(
      `\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="callback"\r\n\r\n${callback}`,
    ),
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]) as Uint8Array<ArrayBuffer>;
}

export async function benchAsync(
  url: string,
  authorization: string,
  jobs: number,
  concurrency: number,
) {
  const arrivals = new Map<string, number>();
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const { id } = JSON.parse(Buffer.concat(chunks).toString()) as { id: string };
      if (!arrivals.has(id)) arrivals.set(id, performance.now());
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const callback = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const submittedAt = new Map<string, number>();
  const toResult: number[] = [];
  const toAccepted: number[] = [];
  const burstAccepted: number[] = [];
  const submit = async (
    withCallback: string,
    toAccepted: number[],
  ): Promise<{ id: string; started: number }> => {
    const started = performance.now();
    const response = await fetch(`${url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
      body: form(randomBytes(4096), withCallback),
    });
    if (response.status !== 202) throw new Error(`async submit answered ${response.status}`);
    const { id } = (await response.json()) as { id: string };
    toAccepted.push(performance.now() - started);
    return { id, started };
  };
  const polled = Math.min(jobs, 200);
  for (let i = 0; i < polled; i++) {
    const { id, started } = await submit(`${callback}?polled`, toAccepted);
    for (;;) {
      const read = await fetch(`${url}/v2.2/files/${id}`, { headers: { authorization } });
      await read.arrayBuffer();
      if (read.status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    toResult.push(performance.now() - started);
    submittedAt.set(id, started);
  }
  // Wait for the polled jobs' callbacks: their latency is the unloaded delivery latency.
  const settle = performance.now() + 10_000;
  while ([...submittedAt.keys()].some((id) => !arrivals.has(id)) && performance.now() < settle) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const callbackLatency = (ids: Map<string, number>) =>
    [...ids]
      .filter(([id]) => arrivals.has(id))
      .map(([id, started]) => (arrivals.get(id) ?? started) - started)
      .sort((a, b) => a - b);
  const unloaded = callbackLatency(submittedAt);
  const accepted = [...toAccepted].sort((a, b) => a - b);
  submittedAt.clear();
  arrivals.clear();
  let next = 0;
  const worker = async () => {
    while (next++ < jobs) {
      const { id, started } = await submit(callback, burstAccepted);
      submittedAt.set(id, started);
    }
  };
  const burstStarted = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const burstSeconds = (performance.now() - burstStarted) / 1000;
  burstAccepted.sort((a, b) => a - b);
  const deadline = performance.now() + 30_000;
  while ([...submittedAt.keys()].some((id) => !arrivals.has(id)) && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  receiver.close();
  const toCallback = [...arrivals]
    .map(([id, at]) => at - (submittedAt.get(id) ?? at))
    .sort((a, b) => a - b);
  toResult.sort((a, b) => a - b);
  const ms = (value: number) => `${value.toFixed(1)} ms`;
  return [
    `async 4 KB, ${polled} jobs one at a time, polled: submit-to-result p50 ${ms(percentile(toResult, 50))}, p99 ${ms(percentile(toResult, 99))}`,
    `  of which the 202 (content spooled with fsync, job committed): p50 ${ms(percentile(accepted, 50))}, p99 ${ms(percentile(accepted, 99))}`,
    `  their callbacks: ${unloaded.length}/${polled} arrived; submit-to-callback p50 ${ms(percentile(unloaded, 50))}, p99 ${ms(percentile(unloaded, 99))}`,
    `async 4 KB, a burst of ${jobs} at concurrency ${concurrency}: ${(jobs / burstSeconds).toFixed(1)} accepted/s; 202 p50 ${ms(percentile(burstAccepted, 50))}, p99 ${ms(percentile(burstAccepted, 99))}`,
    `async 4 KB, a burst of ${jobs} at concurrency ${concurrency} (CPU-bound: client, service, clamd on 2 cores): ${toCallback.length}/${jobs} callbacks arrived; submit-to-callback p50 ${ms(percentile(toCallback, 50))}, p99 ${ms(percentile(toCallback, 99))}`,
  ];
}
