import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent, uploadForm } from './content.js';
import type { LocalServer } from './local-server.js';

/** One async upload as a client saw it. */
export interface Submitted {
  id: string;
  infected: boolean;
  /** When its 202 came. */
  acceptedAt: number;
}

/** What a load of async uploads met: accepted items, retried refusals, anything unexpected. */
export interface LoadReport {
  accepted: Submitted[];
  /** 503/507 answers with Retry-After (retried by the client, as clients do). */
  refused: number;
  /** Anything else: a 500, a refused connection, a 503 without Retry-After. */
  unexpected: string[];
}

/**
 * Async uploads with callbacks, as the audits' clients sent them: `rate` a second over
 * `concurrency` clients until `until()` says stop, a quarter of them EICAR. A 503 or 507 with
 * Retry-After is retried after it (a client's duty); anything else is noted as unexpected.
 */
export async function asyncUploadLoad(options: {
  urls: () => string[];
  auth: string;
  callback: string;
  concurrency: number;
  rate: number;
  until: () => boolean;
}): Promise<LoadReport> {
  const report: LoadReport = { accepted: [], refused: 0, unexpected: [] };
  let sent = 0;
  const interval = (1000 * options.concurrency) / options.rate;
  const client = async (index: number) => {
    while (!options.until()) {
      const started = Date.now();
      const infected = sent++ % 4 === 3;
      const content = infected
        ? Buffer.concat([randomContent(512), Buffer.from(eicar())])
        : randomContent(2048);
      const urls = options.urls();
      const url = urls[(index + sent) % urls.length] ?? '';
      for (;;) {
        let status = 0;
        let body = '';
        let retryAfter = 0;
        try {
          const response = await fetch(`${url}/v2.2/files/async`, {
            method: 'POST',
            headers: { authorization: options.auth },
            body: uploadForm(content, { callback: options.callback }),
          });
          status = response.status;
          body = await response.text();
          retryAfter = Number(response.headers.get('retry-after'));
        } catch (error) {
          body = String((error as Error).cause ?? error);
        }
        if (status === 202) {
          const { id } = JSON.parse(body) as { id: string };
          report.accepted.push({ id, infected, acceptedAt: Date.now() });
          break;
        }
        if ((status === 503 || status === 507) && retryAfter > 0) {
          report.refused += 1;
          await sleep(Math.min(retryAfter, 2) * 1000);
          continue;
        }
        report.unexpected.push(`${status} ${body.slice(0, 200)}`);
        await sleep(500);
        if (options.until()) break;
      }
      await sleep(Math.max(0, interval - (Date.now() - started)));
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, index) => client(index)));
  return report;
}

/** Per accepted item, what the callback receiver saw: delivery ids and requests. */
export function deliveriesOf(receiver: LocalServer): Map<string, Set<string>> {
  const byItem = new Map<string, Set<string>>();
  for (const request of receiver.requests) {
    const { id } = JSON.parse(request.body.toString()) as { id: string };
    const deliveries = byItem.get(id) ?? new Set<string>();
    deliveries.add(String(request.headers['x-assay-delivery']));
    byItem.set(id, deliveries);
  }
  return byItem;
}
