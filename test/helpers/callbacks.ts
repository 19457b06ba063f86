import { createHmac, timingSafeEqual } from 'node:crypto';
import { uploadForm } from './content.js';
import type { TestService } from './service.js';

/** What docs/API.md ("Callbacks") tells receivers to do: recompute the HMAC and compare in constant time. */
export function verifySignature(header: string, body: Buffer, secret: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (match === null) return false;
  const expected = createHmac('sha256', secret).update(`${match[1]}.`).update(body).digest();
  const given = Buffer.from(match[2] ?? '', 'hex');
  const fresh = Math.abs(Date.now() / 1000 - Number(match[1])) < 300;
  return fresh && given.length === expected.length && timingSafeEqual(given, expected);
}

/** The messages of an item's trace, read over HTTP as its owner would. */
export async function traceMessages(baseUrl: string, auth: string, id: string): Promise<string[]> {
  const response = await fetch(`${baseUrl}/v2.2/files/${id}/trace`, {
    headers: { authorization: auth },
  });
  const trace = (await response.json()) as { events: Array<{ message: string }> };
  return trace.events.map((event) => event.message);
}

/**
 * The settings of the callback-limits tests, on the file's shared clamd: fast retries; receivers
 * live on 127.0.0.1, allowed by setting; `more` on top.
 */
export function callbackLimitsEnv(clamd: { readonly socket: string }) {
  return (more: Record<string, string> = {}) => ({
    ASSAY_CLAMD: clamd.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ASSAY_CALLBACK_RETRY_BASE_MS: '100',
    // Bursts of synchronous uploads set up the deliveries: above the default caps on sync scans.
    ASSAY_SYNC_CONCURRENCY: '32',
    ASSAY_ACCOUNT_SYNC_CONCURRENCY: '32',
    ...more,
  });
}

/** A synchronous v2.2 upload of `content` with text `fields` (a callback among them). */
export function uploadWithFields(
  svc: TestService,
  content: string,
  fields: Record<string, string>,
) {
  return fetch(`${svc.url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: uploadForm(content, fields),
  });
}
