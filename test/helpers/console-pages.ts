import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ConsoleClient, mainText } from './console.js';
import { uploadForm } from './content.js';
import type { TestService } from './service.js';

// What the console's list pages tests read: ids, rows and the next page's link of a page.

/** Uploads through the v2.2 API (`files` or `files/async`); the item's id. */
export async function upload(
  svc: Pick<TestService, 'url' | 'auth'>,
  content: Buffer | string,
  fields: Record<string, string> = {},
  route = 'files',
): Promise<string> {
  const answer = await fetch(`${svc.url}/v2.2/${route}`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: uploadForm(content, fields),
  });
  assert.ok(answer.status === 201 || answer.status === 202, `upload answered ${answer.status}`);
  return ((await answer.json()) as { id: string }).id;
}

/** Polls `done` every 100 ms until it holds. */
export async function waitFor(what: string, done: () => Promise<boolean>, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** The ids of the files a list page links to, in page order. */
export function listedIds(page: string): string[] {
  return [...page.matchAll(/<a href="\/console\/files\/([0-9A-Za-z-]+)"[^>]*>/g)].map(
    (match) => match[1] ?? '',
  );
}

/** A page's text as read: `<wbr>` (where a long id or URL may wrap) is no space. */
export function readable(page: string): string {
  return mainText(page.replaceAll('<wbr>', ''));
}

/** Each table body row's text. */
export function rowsOf(page: string): string[] {
  const body = /<tbody[^>]*>([\s\S]*?)<\/tbody>/.exec(page)?.[1] ?? '';
  return [...body.matchAll(/<tr[^>]*>([\s\S]*?)<\/tr>/g)].map((match) => readable(match[1] ?? ''));
}

/** The "next page" link's path, or null on the last page. */
export function nextLink(page: string): string | null {
  const href = /<a href="([^"]+)" rel="next">/.exec(page)?.[1];
  return href === undefined ? null : href.replace(/&amp;/g, '&');
}

/** A console page's status and HTML. */
export async function text(
  client: ConsoleClient,
  path: string,
): Promise<{ status: number; page: string }> {
  const answer = await client.get(path);
  return { status: answer.status, page: await answer.text() };
}
