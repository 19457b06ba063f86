/**
 * Sending one hostile item as a client does (soak/hostile-files.ts and its test): synchronously
 * (POST /v2.2/files), or asynchronously (POST /v2.2/files/async, then GET /v2.2/files/{id} until
 * the result is there), timed from the request to the answer.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { uploadForm } from '../test/helpers/content.js';
import { type Answer, answerOf } from './hostile-corpus.js';

export type Mode = 'sync' | 'async';

export interface Sent {
  answer: Answer;
  ms: number;
}

async function json(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Sends `content` in `mode`; an answer that does not come within `deadlineMs` is `other`. */
export async function sendItem(
  mode: Mode,
  url: string,
  auth: string,
  content: Buffer,
  deadlineMs: number,
): Promise<Sent> {
  const started = performance.now();
  const signal = AbortSignal.timeout(deadlineMs);
  const done = (answer: Answer): Sent => ({ answer, ms: performance.now() - started });
  try {
    if (mode === 'sync') {
      const response = await fetch(`${url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: auth },
        body: uploadForm(content),
        signal,
      });
      return done(answerOf(response.status, await json(response)));
    }
    const accepted = await fetch(`${url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: auth },
      body: uploadForm(content),
      signal,
    });
    const body = await json(accepted);
    const id = (body as { id?: unknown }).id;
    if (accepted.status !== 202 || typeof id !== 'string') {
      return done({ kind: 'other', detail: `async: ${accepted.status} ${JSON.stringify(body)}` });
    }
    for (;;) {
      const response = await fetch(`${url}/v2.2/files/${id}`, {
        headers: { authorization: auth },
        signal,
      });
      const result = await json(response);
      // 404 until the item is done.
      if (response.status !== 404) return done(answerOf(response.status, result));
      await sleep(100, undefined, { signal });
    }
  } catch (error) {
    const reason = signal.aborted ? `no answer within ${deadlineMs} ms` : String(error);
    return done({ kind: 'other', detail: reason });
  }
}
