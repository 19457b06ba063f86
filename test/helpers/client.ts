import assert from 'node:assert/strict';
import { type IncomingHttpHeaders, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { uploadForm } from './content.js';

/**
 * Polls a result as clients do: 404 while unfinished (anything else fails the test), then the
 * result; throws when none comes within `timeoutMs`.
 */
export async function pollResult(
  url: string,
  auth: string,
  id: string,
  timeoutMs = 15_000,
  version = 'v2.2',
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const response = await fetch(`${url}/${version}/files/${id}`, {
      headers: { authorization: auth },
    });
    if (response.status === 200) return (await response.json()) as Record<string, unknown>;
    const body = await response.text();
    assert.equal(response.status, 404, `unfinished items answer 404, not: ${body}`);
    await sleep(20);
  }
  throw new Error(`no result for ${id} within ${timeoutMs} ms`);
}

/** An async upload of `content` with text `fields`; returns the answer and its JSON body. */
export async function submitAsync(
  url: string,
  auth: string,
  content: Buffer | string,
  fields = {},
  version = 'v2.2',
) {
  const response = await fetch(`${url}/${version}/files/async`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content, fields),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

/** The messages of an item's v2.2 trace, oldest first. */
export async function traceOf(url: string, auth: string, id: string): Promise<string[]> {
  const response = await fetch(`${url}/v2.2/files/${id}/trace`, {
    headers: { authorization: auth },
  });
  const trace = (await response.json()) as { events: Array<{ message: string }> };
  return trace.events.map((event) => event.message);
}

/** A v2.2 fetch of `location`, which must be accepted (202); returns the item's id. */
export async function submitFetch(url: string, auth: string, location: string): Promise<string> {
  const response = await fetch(`${url}/v2.2/files/fetch`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ location }).toString(),
  });
  assert.equal(response.status, 202);
  return ((await response.json()) as { id: string }).id;
}

/** Waits until `check` holds (polling every 20 ms); throws naming `what` past `timeoutMs`. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`);
    await sleep(20);
  }
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * One request over node:http, where fetch cannot go: from a chosen local address (on loopback,
 * 127.0.0.2 is another client than 127.0.0.1) or with a Host header of the test's choosing.
 */
export function httpRequest(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    localAddress?: string;
  } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        localAddress: options.localAddress,
      },
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
    req.end(options.body);
  });
}
