/**
 * The soak's mixed load: every kind of traffic Assay takes, each from its own loop of clients at
 * its own pace, until told to stop. Every request is recorded (kind, status, latency), and every
 * item whose result is promised (async uploads and fetches) with what its verdict must be, for the
 * checks at the end (checks.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../src/engines/test-content.js';
import { uploadForm } from '../test/helpers/content.js';
import { photoLike } from '../test/helpers/images.js';

/** What an item's result must say: flagged (malware), clean, or an error (never a clean `[]`). */
export type Expected = 'flagged' | 'clean' | 'error' | 'any';

export interface Accepted {
  id: string;
  kind: string;
  expected: Expected;
  /** The account's authorization, to read the result back. */
  auth: string;
  callback: boolean;
  at: number;
  /** What was sent (size and SHA-256), when the client knows it: for a wrong verdict's report. */
  sent?: string;
}

export interface RequestRecord {
  kind: string;
  status: number;
  ms: number;
  at: number;
}

export interface LoadState {
  requests: RequestRecord[];
  accepted: Accepted[];
  /** Synchronous answers with the wrong verdict: malware not flagged, content not scanned as []. */
  wrongAnswers: string[];
  /** Answers no client should get: a 5xx other than 503/507, a refused connection, a bad body. */
  unexpected: string[];
  /** The fault under way (chaos.ts), if any: a process killed cannot answer, so no answer is expected. */
  fault: { name: string | null; killsProcesses: boolean };
  /** Requests that got no answer while a process was down. */
  unansweredDuringFaults: number;
}

export interface LoadTargets {
  /** Base URLs that serve the API (one per api process). */
  urls: string[];
  accounts: string[];
  /** Where callbacks go (receiver.ts), and where fetches read from. */
  callbackUrl: string;
  contentUrl: string;
}

const MiB = 1024 * 1024;

/** Text for the language engine, an obscenity in it. */
const PROSE = 'The committee met again today. Honestly, this whole shit show has to stop.\n'.repeat(
  200,
);

/** Sizes of uploads: mostly small, sometimes large, now and then 20 MB (1 byte to 20 MB). */
function uploadSize(n: number): number {
  if (n % 97 === 0) return 20 * MiB;
  if (n % 23 === 0) return 1 + ((n * 7919) % (4 * MiB));
  if (n % 5 === 0) return 1;
  return 1 + ((n * 7919) % 64_000);
}

function content(n: number, infected: boolean): Buffer {
  const body = randomBytes(uploadSize(n));
  if (!infected) return body;
  return Buffer.concat([body.subarray(0, 1024), Buffer.from(eicar())]);
}

async function timed(
  state: LoadState,
  kind: string,
  send: () => Promise<Response>,
): Promise<{ status: number; text: string }> {
  const started = performance.now();
  let status = 0;
  let text = '';
  let retryAfter: string | null = null;
  try {
    const response = await send();
    status = response.status;
    retryAfter = response.headers.get('retry-after');
    text = await response.text();
  } catch (error) {
    text = String((error as Error).cause ?? error);
  }
  state.requests.push({ kind, status, ms: performance.now() - started, at: Date.now() });
  // A part that is down answers 503 (or 507, the spool full; v1.0: 502) with Retry-After: what
  // the API documents, and clients retry. A process that was killed answers nothing until back.
  const outage = kind === 'v1.0' ? status === 502 : status === 503 || status === 507;
  if (status === 0 && state.fault.killsProcesses) state.unansweredDuringFaults += 1;
  else if (status === 0 || (status >= 500 && !(outage && retryAfter !== null))) {
    state.unexpected.push(`${kind}: ${status} ${text.slice(0, 200)}`);
  }
  return { status, text };
}

/** Checks a synchronous v2 answer against what it must say. */
function verify(
  state: LoadState,
  kind: string,
  answer: { status: number; text: string },
  expected: Expected,
) {
  if (answer.status === 0) return; // no answer: timed() judged it
  if (answer.status !== 201) {
    // An item that was not examined must not pass: a clear error, never a result.
    if (expected === 'flagged' || expected === 'clean') {
      if (answer.status !== 503 && answer.status !== 507 && answer.status !== 429) {
        state.wrongAnswers.push(`${kind}: ${answer.status} ${answer.text.slice(0, 120)}`);
      }
    }
    return;
  }
  const { findings = [] } = JSON.parse(answer.text) as { findings?: string[] };
  if (expected === 'flagged' && findings.length === 0)
    state.wrongAnswers.push(`${kind}: not flagged`);
  if (expected === 'clean' && findings.length > 0) state.wrongAnswers.push(`${kind}: ${findings}`);
  if (expected === 'error' && findings.length === 0)
    state.wrongAnswers.push(`${kind}: [] for content not scanned`);
}

/** Runs `body` every `intervalMs` (less its own time) until `stopped()`. */
async function loop(
  stopped: () => boolean,
  intervalMs: number,
  body: (n: number) => Promise<void>,
): Promise<void> {
  for (let n = 1; !stopped(); n++) {
    const started = Date.now();
    await body(n);
    await sleep(Math.max(0, intervalMs - (Date.now() - started)));
  }
}

/** The load's loops; resolves when `stopped()` has said stop and every loop has ended. */
export async function runLoad(
  targets: LoadTargets,
  state: LoadState,
  stopped: () => boolean,
): Promise<void> {
  const url = (n: number) => targets.urls[n % targets.urls.length] as string;
  const auth = (n: number) => targets.accounts[n % targets.accounts.length] as string;
  const image = await photoLike(800, 600, 7);
  const accept = (
    kind: string,
    text: string,
    n: number,
    expected: Expected,
    callback = false,
    sent?: Buffer,
  ) => {
    const { id } = JSON.parse(text) as { id: string };
    state.accepted.push({
      id,
      kind,
      expected,
      auth: auth(n),
      callback,
      at: Date.now(),
      ...(sent && {
        sent: `${sent.length} bytes, sha256 ${createHash('sha256').update(sent).digest('hex')}`,
      }),
    });
  };
  const loops: Array<Promise<void>> = [
    // Sync uploads, 1 byte to 20 MB, one in six malware.
    ...[0, 1].map((client) =>
      loop(stopped, 150, async (n) => {
        const i = n * 2 + client;
        const infected = i % 6 === 0;
        const answer = await timed(state, 'sync', () =>
          fetch(`${url(i)}/v2.2/files`, {
            method: 'POST',
            headers: { authorization: auth(i) },
            body: uploadForm(content(i, infected)),
          }),
        );
        verify(state, 'sync', answer, infected ? 'flagged' : 'any');
      }),
    ),
    // Async uploads with callbacks to the receiver (which fails or hangs now and then).
    ...[0, 1].map((client) =>
      loop(stopped, 200, async (n) => {
        const i = n * 2 + client;
        const infected = i % 4 === 0;
        const body = content(i, infected);
        const { status, text } = await timed(state, 'async', () =>
          fetch(`${url(i)}/v2.2/files/async`, {
            method: 'POST',
            headers: { authorization: auth(i) },
            body: uploadForm(body, {
              callback: `${targets.callbackUrl}/item/${i}`,
            }),
          }),
        );
        if (status === 202) accept('async', text, i, infected ? 'flagged' : 'clean', true, body);
      }),
    ),
    // Fetches from the content server: some slow, some failing (those must end in an error).
    loop(stopped, 500, async (n) => {
      const path = n % 7 === 0 ? 'missing' : n % 5 === 0 ? 'slow' : n % 3 === 0 ? 'eicar' : 'clean';
      const { status, text } = await timed(state, 'fetch', () =>
        fetch(`${url(n)}/v2.2/files/fetch`, {
          method: 'POST',
          headers: {
            authorization: auth(n),
            'content-type': 'application/x-www-form-urlencoded',
          },
          body: new URLSearchParams({ location: `${targets.contentUrl}/${path}/${n}` }).toString(),
        }),
      );
      const expected = path === 'missing' ? 'error' : path === 'eicar' ? 'flagged' : 'clean';
      if (status === 202) accept('fetch', text, n, expected);
    }),
    // Images and text for the NSFW engines (sync), and a truncated image: an error, never [].
    loop(stopped, 1000, async (n) => {
      const truncated = n % 4 === 0;
      const body =
        n % 2 === 1 ? Buffer.from(PROSE) : truncated ? image.subarray(0, image.length / 2) : image;
      const kind = n % 2 === 1 ? 'text' : 'image';
      const answer = await timed(state, kind, () =>
        fetch(`${url(n)}/v2.2/files`, {
          method: 'POST',
          headers: { authorization: auth(n) },
          body: uploadForm(body),
        }),
      );
      // The text has an obscenity; the whole image is neutral; the truncated one is an error.
      verify(state, kind, answer, kind === 'text' ? 'flagged' : truncated ? 'error' : 'clean');
    }),
    // v1.0: the raw body scanned synchronously.
    loop(stopped, 500, async (n) => {
      await timed(state, 'v1.0', () =>
        fetch(`${url(n)}/api/scan/`, {
          method: 'POST',
          headers: { authorization: auth(n) },
          body: new Uint8Array(content(n, n % 3 === 0).subarray(0, 100_000)),
        }),
      );
    }),
    // Tokens: one made, used for an upload, and deleted.
    loop(stopped, 2000, async (n) => {
      const made = await timed(state, 'token', () =>
        fetch(`${url(n)}/v2.2/auth/tokens`, {
          method: 'POST',
          headers: {
            authorization: auth(n),
            'content-type': 'application/x-www-form-urlencoded',
          },
          body: 'timeout=60',
        }),
      );
      if (made.status !== 201) return;
      const { id } = JSON.parse(made.text) as { id: string };
      // A token is Basic with its id as the user and no password.
      const bearer = `Basic ${Buffer.from(`${id}:`).toString('base64')}`;
      await timed(state, 'token', () =>
        fetch(`${url(n)}/v2.2/files`, {
          method: 'POST',
          headers: { authorization: bearer },
          body: uploadForm(content(n, false)),
        }),
      );
      await timed(state, 'token', () =>
        fetch(`${url(n)}/v2.2/auth/tokens/${id}`, {
          method: 'DELETE',
          headers: { authorization: auth(n) },
        }),
      );
    }),
  ];
  await Promise.all(loops);
}
