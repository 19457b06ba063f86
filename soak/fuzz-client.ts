/**
 * Sends protocol-fuzz cases (soak/protocol-fuzz.ts) on raw sockets, reads what comes back, and
 * judges it: an answer below 500, or a documented 503 (v1.0: 502) with Retry-After; every error
 * in the service's shape (`{"error"}`, v1.0's `oops` in the format its query asks for) with the
 * service's headers; a connection closed unanswered only where the request could not be finished;
 * never a connection left hanging. Used by soak/fuzz.ts and test/scripts/protocol-fuzz.test.ts.
 */
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from '../bench/stats.js';
import type { Category, FuzzCase } from './fuzz-requests.js';

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface Outcome {
  answers: Answer[];
  /** Bytes after the last complete answer. */
  rest: Buffer;
  /** Why the bytes are not HTTP answers, if they are not. */
  malformed: string | null;
  /** `closed`: by the server (or reset); `answered`: all answers read; `deadline`: still open. */
  end: 'closed' | 'answered' | 'deadline';
  reset: boolean;
  /** From connecting to the first answer (or to the end, without one). */
  ms: number;
}

/** The complete answers at the start of `data` (interim 1xx skipped). */
export function parseAnswers(
  data: Buffer,
  method: string,
  closed: boolean,
): { answers: Answer[]; rest: Buffer; malformed: string | null } {
  const answers: Answer[] = [];
  let at = 0;
  while (at < data.length) {
    const end = data.indexOf('\r\n\r\n', at);
    if (end === -1) break;
    const [line = '', ...lines] = data.subarray(at, end).toString('latin1').split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(line);
    if (status === null) {
      return {
        answers,
        rest: data.subarray(at),
        malformed: `not an HTTP answer: ${line.slice(0, 80)}`,
      };
    }
    const headers: Record<string, string> = {};
    for (const header of lines) {
      const colon = header.indexOf(':');
      const name = header.slice(0, colon).trim().toLowerCase();
      const value = header.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const code = Number(status[1]);
    const start = end + 4;
    if (code < 200) {
      at = start;
      continue;
    }
    // Answers after the first are to pipelined GETs. A HEAD the parser refused is not answered
    // as a HEAD: its error has a body, the rest of what came before the close.
    const declared = Number(headers['content-length'] ?? Number.NaN);
    const refusedHead = closed && code >= 400 && data.length - start === declared;
    const head = answers.length === 0 && method === 'HEAD' && !refusedHead;
    const bodiless = head || code === 204 || code === 304;
    let length: number;
    if (bodiless) length = 0;
    else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const decoded = dechunk(data.subarray(start));
      if (decoded === null) break;
      answers.push({ status: code, headers, body: decoded.body });
      at = start + decoded.used;
      continue;
    } else if (headers['content-length'] !== undefined) length = declared;
    else if (closed) length = data.length - start;
    else break;
    if (data.length < start + length) break;
    answers.push({ status: code, headers, body: data.subarray(start, start + length) });
    at = start + length;
  }
  return { answers, rest: data.subarray(at), malformed: null };
}

function dechunk(data: Buffer): { body: Buffer; used: number } | null {
  const pieces: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    if (eol === -1) return null;
    const size = Number.parseInt(data.subarray(at, eol).toString('latin1'), 16);
    if (size === 0)
      return data.length >= eol + 4 ? { body: Buffer.concat(pieces), used: eol + 4 } : null;
    if (data.length < eol + 2 + size + 2) return null;
    pieces.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** Whether the client asked the service to close after answering (HTTP/1.0 or `close`). */
function asksToClose(c: FuzzCase): boolean {
  const head = c.writes[0]?.data.subarray(0, 64 * 1024).toString('latin1') ?? '';
  return /\r\nconnection: *close\r\n/i.test(head) || /^[^\r\n]* HTTP\/1\.0\r\n/.test(head);
}

/** Sends a case to 127.0.0.1:`port` and reads until it is answered, closed or its deadline. */
export function sendCase(c: FuzzCase, port: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let firstAt: number | null = null;
    let reset = false;
    let written = false;
    let settled = false;
    let deadline: NodeJS.Timeout | undefined;
    const closes = asksToClose(c);
    const finish = (end: Outcome['end']) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      const parsed = parseAnswers(Buffer.concat(chunks), c.method, end === 'closed');
      if (firstAt === null && parsed.answers.length > 0) firstAt = performance.now();
      resolve({ ...parsed, end, reset, ms: (firstAt ?? performance.now()) - started });
    };
    const check = () => {
      const parsed = parseAnswers(Buffer.concat(chunks), c.method, false);
      if (parsed.answers.length > 0) firstAt ??= performance.now();
      if (parsed.malformed !== null) finish('answered');
      else if (written && parsed.answers.length >= c.maxAnswers && !closes) finish('answered');
      else if (written && parsed.answers.length >= c.maxAnswers) {
        // Asked to close: wait a moment for the close, to see that nothing follows the answer.
        clearTimeout(deadline);
        deadline = setTimeout(() => finish('answered'), 1000);
      }
    };
    socket.on('data', (data) => {
      chunks.push(data);
      check();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') reset = true;
    });
    socket.on('close', () => finish('closed'));
    socket.on('connect', async () => {
      for (const write of c.writes) {
        if (write.delayMs > 0) await sleep(write.delayMs);
        if (socket.destroyed || settled) return;
        socket.write(write.data);
      }
      if (c.halfClose) socket.end();
      written = true;
      deadline = setTimeout(() => finish('deadline'), c.waitMs);
      check();
    });
  });
}

/**
 * What the parser refuses before there is a request (bytes that are not HTTP, a head too large):
 * v1.0's format only when the refused bytes start with a v1.0 request line, otherwise v2.x JSON
 * (docs/API.md, "Errors raised outside a route").
 */
const PARSER_REFUSALS = [
  'the request is not valid HTTP',
  'the request head (its URL or headers) is too large',
];

/** Whether a target's path is v1.0's; a target in absolute form is routed by its path. */
function isLegacy(path: string): boolean {
  const local = path.replace(/^https?:\/\/[^/?#]*/i, '');
  return local === '/api/scan' || local.startsWith('/api/scan/');
}

/** The v1.0 format the service reads from a target's query: json when absent or unknown. */
function legacyFormat(query: string): string {
  const raw = (new URLSearchParams(query).get('format') ?? 'json').trim().toLowerCase();
  return ['xml', 'yaml'].includes(raw) ? raw : 'json';
}

function parsed(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** `{"error": "…"}`, with one of `messages` if given. */
function isError(text: string, messages?: string[]): boolean {
  const error = parsed(text)?.error;
  return typeof error === 'string' && error !== '' && (messages?.includes(error) ?? true);
}

const isOops = (text: string) => {
  const body = parsed(text);
  return body?.status === 'oops' && typeof body.reason === 'string';
};

/** What is wrong with one answer (none: []). */
export function checkAnswer(
  answer: Answer,
  request: { method: string; target: string; echoes?: Record<string, string> },
): string[] {
  const problems: string[] = [];
  const { status, headers, body } = answer;
  const at = request.target.indexOf('?');
  const path = at === -1 ? request.target : request.target.slice(0, at);
  const legacy = isLegacy(path);
  if (headers['x-service-request-id'] === undefined) {
    problems.push(`${status} without X-Service-Request-Id: not written by the service`);
  }
  if (status >= 500) {
    const documented = status === 503 || (legacy && status === 502);
    if (!documented) problems.push(`status ${status}`);
    else if (headers['retry-after'] === undefined) problems.push(`${status} without Retry-After`);
  }
  if (status >= 400 && request.method !== 'HEAD') {
    const text = body.toString('utf8');
    const type = headers['content-type'] ?? '';
    const format = legacy ? legacyFormat(at === -1 ? '' : request.target.slice(at + 1)) : 'v2';
    let shaped = false;
    if (format === 'xml') {
      shaped =
        type.startsWith('application/xml') && /<response><status>oops<\/status><reason>/.test(text);
    } else if (format === 'yaml') {
      shaped = type.startsWith('application/yaml') && /^status: "oops"\nreason: "/.test(text);
    } else {
      shaped = type.startsWith('application/json') && (legacy ? isOops(text) : isError(text));
    }
    if (!shaped && legacy && [400, 431].includes(status) && type.startsWith('application/json')) {
      shaped = isError(text, PARSER_REFUSALS);
    }
    if (!shaped) {
      problems.push(
        `${status} not in the ${legacy ? `v1.0 ${format}` : 'JSON'} error shape: ${type} ${JSON.stringify(text.slice(0, 200))}`,
      );
    }
  }
  if (status === 201 && request.echoes !== undefined) {
    const metadata =
      (JSON.parse(body.toString('utf8')) as { metadata?: Record<string, string> }).metadata ?? {};
    for (const [key, value] of Object.entries(request.echoes)) {
      if (metadata[key] !== value) {
        problems.push(
          `metadata ${JSON.stringify(key)}: sent ${JSON.stringify(value).slice(0, 100)}, got ${JSON.stringify(metadata[key] ?? null).slice(0, 100)}`,
        );
      }
    }
  }
  return problems;
}

/** What is wrong with a case's outcome (none: []). */
export function judge(c: FuzzCase, o: Outcome): string[] {
  const problems: string[] = [];
  if (o.malformed !== null) problems.push(o.malformed);
  if (o.answers.length === 0 && o.end === 'deadline') {
    problems.push(`no answer within ${c.waitMs} ms, connection still open: a hang`);
  } else if (o.answers.length === 0 && !c.mayClose) {
    problems.push(`closed without an answer${o.reset ? ' (reset)' : ''}`);
  }
  if (o.answers.length > c.maxAnswers)
    problems.push(`${o.answers.length} answers to ${c.maxAnswers} requests`);
  if (o.end === 'closed' && o.malformed === null && o.rest.length > 0) {
    problems.push(
      `an answer cut short: ${JSON.stringify(o.rest.subarray(0, 120).toString('latin1'))}`,
    );
  }
  for (const [i, answer] of o.answers.entries()) {
    const request = i === 0 ? c : { method: 'GET', target: '' };
    problems.push(...checkAnswer(answer, request));
  }
  return problems;
}

/** What a case came to, for the tallies: its first answer's status, `closed` or `hang`. */
export function outcomeLabel(o: Outcome): string {
  const first = o.answers[0];
  if (first !== undefined) return String(first.status);
  return o.end === 'deadline' ? 'hang' : 'closed';
}

export interface CaseRecord {
  fuzzCase: FuzzCase;
  label: string;
  ms: number;
  problems: string[];
}

/**
 * Runs `count` cases, `concurrency` at a time, the i-th to `portOf(i)`, none begun after `until`;
 * each record is pushed to `records` (to follow progress) as its case ends.
 */
export async function runCases(
  count: number,
  concurrency: number,
  caseOf: (index: number) => FuzzCase,
  portOf: (index: number) => number,
  until = Number.POSITIVE_INFINITY,
  records: CaseRecord[] = [],
): Promise<CaseRecord[]> {
  let next = 0;
  const worker = async () => {
    while (next < count && performance.now() < until) {
      const index = next++;
      const fuzzCase = caseOf(index);
      const outcome = await sendCase(fuzzCase, portOf(index));
      records.push({
        fuzzCase,
        label: outcomeLabel(outcome),
        ms: outcome.ms,
        problems: judge(fuzzCase, outcome),
      });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return records;
}

/** A table per category: cases, what they came to, p50 and p99 of the time to an answer. */
export function tally(records: CaseRecord[], categories: readonly Category[]): string[] {
  const rows = ['| category | requests | p50 ms | p99 ms | statuses |', '|---|---|---|---|---|'];
  for (const category of categories) {
    const of = records.filter((r) => r.fuzzCase.category === category);
    const labels = new Map<string, number>();
    for (const r of of) labels.set(r.label, (labels.get(r.label) ?? 0) + 1);
    const statuses = [...labels]
      .sort()
      .map(([label, n]) => `${label}: ${n}`)
      .join(', ');
    const ms = of.map((r) => r.ms).sort((a, b) => a - b);
    rows.push(
      `| ${category} | ${of.length} | ${percentile(ms, 50).toFixed(0)} | ${percentile(ms, 99).toFixed(0)} | ${statuses} |`,
    );
  }
  return rows;
}

/** One line per failed case, with what replays it. */
export function failures(records: CaseRecord[], limit = 30): string[] {
  return records
    .filter((r) => r.problems.length > 0)
    .slice(0, limit)
    .map(
      (r) =>
        `${r.fuzzCase.category} / ${r.fuzzCase.kind} (seed ${r.fuzzCase.seed}, ${r.fuzzCase.method.slice(0, 20)} ${r.fuzzCase.target.slice(0, 80)}): ${r.problems.join('; ')}`,
    );
}
