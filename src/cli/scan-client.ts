import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { type HttpAnswer, HttpClient, NetworkError, TimeoutError } from './scan-http.js';
import { baseName, displayPath } from './scan-names.js';
import { describeFsError } from './scan-walk.js';

/** A file result as the server sent it (`id`, `findings`, … or `error`). */
export type FileResult = Record<string, unknown>;

/** A failure of one file (or of the server) with a message for a person. */
export class ScanError extends Error {}

export interface RetryPolicy {
  /** Retries after a 429, 502 or 503, per request. */
  retries: number;
  /** The longest wait before a retry, whatever `Retry-After` asks. */
  maxWaitMs: number;
}

export interface ApiClientOptions {
  baseUrl: string;
  authorization: string;
  retry: RetryPolicy;
  /**
   * `--timeout`: the longest a request may be silent, and may take in all (an upload longer, by
   * UPLOAD_MS_PER_MB).
   */
  timeoutMs: number;
  /** Called before each wait for a retry. */
  onRetry?(what: string, status: number, waitMs: number, attempt: number): void;
}

const RETRIED_STATUSES = new Set([429, 502, 503]);
/** Error codes of a connection that could not be opened (others broke one that was open). */
const CONNECT_FAILURES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
]);
/** Read size per chunk of an upload; a few chunks are in memory at a time. */
const CHUNK_SIZE = 64 * 1024;
/** Polling an async result: first wait, growth per poll, longest wait. */
const POLL_FIRST_MS = 100;
const POLL_GROWTH = 1.5;
const POLL_MAX_MS = 2_000;
/**
 * Time an upload is given beyond `--timeout`, per MB: 4 s (a 256 KB/s link), so that a large file
 * on a slow link is not cut short, while a server that trickles its answer still ends.
 */
export const UPLOAD_MS_PER_MB = 4_000;

/** HTTP Basic: a key and its secret, or a token id with an empty password (the spec's way). */
export function basicAuthorization(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

/**
 * A client of the public v2.2 API, for `assay scan`: only HTTP, so it works against any server of
 * the API. Uploads stream from an open file descriptor (never a whole file in memory).
 */
export class ApiClient {
  private readonly baseUrl: string;
  private readonly http = new HttpClient();

  constructor(private readonly options: ApiClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
  }

  /** Checks that the server answers and takes the credentials, before any file is sent. */
  async ping(): Promise<void> {
    const answer = await this.send('ping', () => this.exchange('GET', '/v2.2/ping'));
    if (answer.status !== 200) throw answerError('the ping', answer);
  }

  /** Uploads one file to `POST /v2.2/files` and returns its result. */
  scan(path: Buffer, metadata: Array<[string, string]>): Promise<FileResult> {
    return this.upload('/v2.2/files', path, metadata);
  }

  /** Uploads one file to `POST /v2.2/files/async` and returns its id, for `result`. */
  async submit(path: Buffer, metadata: Array<[string, string]>): Promise<string> {
    const { id } = await this.upload('/v2.2/files/async', path, metadata);
    // The id goes into a path: nothing but an id's characters.
    if (typeof id !== 'string' || !/^[0-9A-Za-z_-]+$/.test(id)) {
      throw new ScanError('the server accepted the upload but sent no usable id');
    }
    return id;
  }

  /** Polls `GET /v2.2/files/{id}` (404 while unfinished) until the result or `deadline`. */
  async result(id: string, deadline: number): Promise<FileResult> {
    let wait = POLL_FIRST_MS;
    for (;;) {
      const answer = await this.send(id, () => this.exchange('GET', `/v2.2/files/${id}`));
      if (answer.status === 200) return jsonObject(answer);
      if (answer.status !== 404) throw answerError('reading the result', answer);
      if (Date.now() + wait > deadline) {
        throw new ScanError(`no result for ${id} in time (still unfinished; see --poll-timeout)`);
      }
      await sleep(wait);
      wait = Math.min(POLL_MAX_MS, wait * POLL_GROWTH);
    }
  }

  /** Closes the connections kept open between files. */
  close(): void {
    this.http.close();
  }

  /** One upload, the file opened again for each attempt; any 2xx answer is its JSON object. */
  private async upload(
    route: string,
    path: Buffer,
    metadata: Array<[string, string]>,
  ): Promise<FileResult> {
    const answer = await this.send(displayPath(path), async () => {
      const upload = await openUpload(path, metadata);
      try {
        return await this.exchange('POST', route, upload);
      } finally {
        // Also when the server answered before reading it all (a 413, a 429).
        await upload.close();
      }
    });
    if (answer.status < 200 || answer.status > 299) throw answerError('the upload', answer);
    return jsonObject(answer);
  }

  private async exchange(method: 'GET' | 'POST', path: string, upload?: Upload) {
    const headers: Record<string, string> = {
      authorization: this.options.authorization,
      accept: 'application/json',
      'user-agent': 'assay-scan',
    };
    if (upload !== undefined) {
      headers['content-type'] = upload.contentType;
      headers['content-length'] = String(upload.length);
    }
    const { timeoutMs } = this.options;
    const uploadMs = Math.ceil(((upload?.length ?? 0) / 2 ** 20) * UPLOAD_MS_PER_MB);
    try {
      return await this.http.send({
        method,
        url: new URL(`${this.baseUrl}${path}`),
        headers,
        body: upload?.body,
        idleMs: timeoutMs,
        limitMs: timeoutMs + uploadMs,
      });
    } catch (error) {
      if (error instanceof FileReadError) {
        throw new ScanError(`cannot read the file: ${error.message}`);
      }
      if (error instanceof TimeoutError) {
        throw new ScanError(
          `the server at ${this.baseUrl} is too slow: ${error.message} (--timeout)`,
        );
      }
      const { code, message } = error as { code?: unknown; message?: unknown };
      const reason = typeof code === 'string' ? code : String(message ?? error);
      if (!(error instanceof NetworkError) && typeof code !== 'string') throw new ScanError(reason);
      throw new ScanError(
        typeof code === 'string' && CONNECT_FAILURES.has(code)
          ? `cannot reach the server at ${this.baseUrl}: ${reason}`
          : `the connection to ${this.baseUrl} failed: ${reason}`,
      );
    }
  }

  /** Runs `attempt` again after a 429, 502 or 503, waiting as `Retry-After` says (bounded). */
  private async send(what: string, attempt: () => Promise<HttpAnswer>): Promise<HttpAnswer> {
    const { retries, maxWaitMs } = this.options.retry;
    for (let done = 0; ; done += 1) {
      const answer = await attempt();
      if (!RETRIED_STATUSES.has(answer.status) || done >= retries) return answer;
      const retryAfter = answer.headers['retry-after'];
      const waitMs = retryWait(retryAfter ?? null, done, maxWaitMs);
      this.options.onRetry?.(what, answer.status, waitMs, done + 1);
      await sleep(waitMs);
    }
  }
}

/** `Retry-After` in seconds or as an HTTP date; else 1, 2, 4… seconds; never above `maxMs`. */
export function retryWait(header: string | null, retriesSoFar: number, maxMs: number): number {
  let waitMs = 1000 * 2 ** retriesSoFar;
  if (header !== null && /^\s*\d+\s*$/.test(header)) waitMs = Number(header) * 1000;
  else if (header !== null && !Number.isNaN(Date.parse(header))) {
    waitMs = Date.parse(header) - Date.now();
  }
  return Math.max(0, Math.min(maxMs, waitMs));
}

interface Upload {
  body: AsyncIterable<Uint8Array>;
  contentType: string;
  length: number;
  close(): Promise<void>;
}

/**
 * A multipart body (`file` first, as the vendor's clients send it, then `metadata[key]` fields)
 * read from a file descriptor opened now: a file removed afterwards is still read whole, one
 * that changes size while read fails the upload rather than sending a mix. Its exact length is
 * known, so the request has a Content-Length, as some servers require.
 */
async function openUpload(path: Buffer, metadata: Array<[string, string]>): Promise<Upload> {
  let handle: FileHandle;
  try {
    // O_NOFOLLOW: a file swapped for a link since the walk is not followed; O_NONBLOCK: nor does
    // one swapped for a FIFO hang the open.
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw new ScanError(`cannot open the file: ${describeFsError(error)}`);
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close().catch(() => undefined);
  };
  let size: number;
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new ScanError('no longer a regular file');
    size = stats.size;
  } catch (error) {
    await close();
    throw error instanceof ScanError
      ? error
      : new ScanError(`cannot read the file: ${describeFsError(error)}`);
  }
  const boundary = `----assay-scan-${randomBytes(16).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; ` +
      `filename="${quoteFieldValue(baseName(path).toString('utf8'))}"\r\n` +
      'Content-Type: application/octet-stream\r\n\r\n',
  );
  const fields = metadata.map(
    ([key, value]) =>
      `\r\n--${boundary}\r\nContent-Disposition: form-data; ` +
      `name="metadata[${quoteFieldValue(key)}]"\r\n\r\n${value}`,
  );
  const tail = Buffer.from(`${fields.join('')}\r\n--${boundary}--\r\n`);
  async function* body(): AsyncGenerator<Uint8Array> {
    yield head;
    let position = 0;
    while (position < size) {
      const chunk = Buffer.allocUnsafe(Math.min(CHUNK_SIZE, size - position));
      let bytesRead: number;
      try {
        ({ bytesRead } = await handle.read(chunk, 0, chunk.length, position));
        if (
          bytesRead === 0 ||
          (position + bytesRead >= size && (await handle.stat()).size !== size)
        ) {
          throw new Error('it changed size while being read');
        }
      } catch (error) {
        throw new FileReadError(describeFsError(error));
      }
      position += bytesRead;
      yield chunk.subarray(0, bytesRead);
    }
    yield tail;
  }
  return {
    body: body(),
    contentType: `multipart/form-data; boundary=${boundary}`,
    length: head.length + size + tail.length,
    close,
  };
}

/** Reading the file failed during an upload. */
class FileReadError extends Error {}

/** Quotes as browsers do in a multipart header: `"`, CR and LF percent-encoded. */
function quoteFieldValue(value: string): string {
  return value.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/** An answer's error: the status and the server's `{"error": …}` message when it sent one. */
function answerError(what: string, answer: HttpAnswer): ScanError {
  let message = '';
  try {
    const parsed = JSON.parse(answer.body) as unknown;
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed) {
      message = String(parsed.error);
    }
  } catch {
    // Not JSON: the status says enough.
  }
  return new ScanError(
    `${what} failed: HTTP ${answer.status}${message === '' ? '' : `: ${message}`}`,
  );
}

function jsonObject(answer: HttpAnswer): FileResult {
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    throw new ScanError(`the server answered ${answer.status} without a JSON body`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ScanError(`the server answered ${answer.status} with JSON that is not an object`);
  }
  return parsed as FileResult;
}
