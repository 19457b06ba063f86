import { createHmac, timingSafeEqual } from 'node:crypto';

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
