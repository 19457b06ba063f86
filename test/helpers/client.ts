import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

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
    assert.equal(response.status, 404, 'unfinished items answer 404');
    await response.arrayBuffer();
    await sleep(20);
  }
  throw new Error(`no result for ${id} within ${timeoutMs} ms`);
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
