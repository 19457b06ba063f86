import type { Principal } from '../accounts/account-service.js';
import { appliedRateLimit } from '../accounts/rate-limiter.js';
import { isStoreUnavailable } from '../domain/failures.js';
import { fileNameOfUrl } from '../domain/file-name.js';
import type { StoredFile } from '../domain/records.js';
import type { IcapOutcome } from '../metrics/icap-metrics.js';
import {
  BalanceSpentError,
  ContentNotExaminedError,
  ContentTooLargeError,
  EmptyContentError,
  EngineUnavailableError,
} from '../processing/errors.js';
import { event } from '../processing/process-content.js';
import type { BodyCopy } from './body-copies.js';
import { ChunkedBody } from './chunked-body.js';
import { answerFailure, type Exchange, send } from './icap-connection.js';
import type { IcapContext } from './icap-context.js';
import { httpHeader, httpTarget } from './icap-request.js';
import {
  blockedResponse,
  CRLF,
  chunkHeader,
  findingHeaders,
  type HeaderList,
  type IcapFailure,
  icapHead,
  LAST_CHUNK,
} from './icap-response.js';
import { IcapClosedError, IcapProtocolError } from './socket-reader.js';

const CONTINUE = Buffer.from('ICAP/1.0 100 Continue\r\n\r\n');

export interface ExchangeResult {
  outcome: IcapOutcome;
  bytes: number;
  keepOpen: boolean;
}

/**
 * A REQMOD or RESPMOD: the body streams to the engines as it arrives (a copy goes to disk only when
 * the client did not allow 204 and may need it back), and nothing is answered before the verdict.
 * Clean: 204, or 206 using the original body, or the message unmodified from its copy. Flagged: a
 * 403 page with the findings' headers. No verdict (an engine down, a limit, content not examined):
 * an ICAP error, never a pass. Each scanned body is an ordinary result of the service's key.
 */
export async function scanExchange(
  exchange: Exchange,
  context: IcapContext,
  client: string,
): Promise<ExchangeResult> {
  const { request } = exchange;
  if (request.body === null) {
    // Nothing to scan (a GET's REQMOD, a 304's RESPMOD): clean, and no result.
    await answerClean(exchange, context, null, null);
    return { outcome: 'no-body', bytes: 0, keepOpen: true };
  }
  const keyId = context.settings.services.get(request.service) as string;
  const admitted = await admit(context, keyId);
  if ('status' in admitted) {
    await answerFailure(exchange.socket, context, admitted, true);
    return { outcome: 'refused', bytes: 0, keepOpen: false };
  }
  const { principal, release } = admitted;
  const body = new ChunkedBody(exchange.reader, context.idleMs, request.preview !== null, () =>
    send(exchange.socket, CONTINUE),
  );
  let copy: BodyCopy | null = null;
  try {
    // Made inside the slot's try: a copy that cannot be made (a full disk) gives the slot back.
    copy = request.allow204 || request.allow206 ? null : await context.copies.create();
    return await scanBody(exchange, context, client, principal, body, copy);
  } finally {
    release();
    await copy?.discard();
  }
}

/** The key's principal, its rate limit and a synchronous-scan slot; else the ICAP error. */
async function admit(
  context: IcapContext,
  keyId: string,
): Promise<{ principal: Principal; release: () => void } | IcapFailure> {
  let principal: Principal | null;
  try {
    principal = await context.accounts.principalForKey(keyId);
  } catch (error) {
    context.logger.warn({ err: error }, 'could not read the key of an ICAP service');
    return { status: 503, reason: 'the service cannot read its key right now: retry later' };
  }
  if (principal === null) {
    return { status: 500, reason: 'the key of this ICAP service is missing or disabled' };
  }
  if (principal.balanceExhausted) {
    return { status: 500, reason: new BalanceSpentError().message };
  }
  if (principal.detectionCategories.length === 0) {
    return {
      status: 500,
      reason: 'the key of this ICAP service has no detection category enabled',
    };
  }
  const limit = appliedRateLimit(
    principal.rateLimit ?? context.rateLimit,
    principal.accountRateLimit,
  );
  const decision = await context.requestLimits.takeKeyRequest(principal.keyId, limit);
  if (!decision.allowed) {
    return {
      status: 503,
      reason: `rate limit exceeded for this service's key; retry after ${decision.retryAfterSeconds} s`,
    };
  }
  const release = context.syncScans.tryAcquire(principal.accountId);
  if (typeof release !== 'function') {
    return {
      status: 503,
      reason:
        release.refusedBy === 'service'
          ? `busy: ${context.syncScans.capacity} scans are in progress`
          : `busy: this key's account has ${context.syncScans.perAccount} scans in progress`,
    };
  }
  return { principal, release };
}

async function scanBody(
  exchange: Exchange,
  context: IcapContext,
  client: string,
  principal: Principal,
  body: ChunkedBody,
  copy: BodyCopy | null,
): Promise<ExchangeResult> {
  const { request } = exchange;
  const url = httpTarget(request.requestHead);
  const fileName = (url === null ? null : fileNameOfUrl(url)) ?? null;
  const pieces = async function* () {
    for (;;) {
      const piece = await body.read();
      if (piece === null) return;
      await copy?.write(piece);
      yield piece;
    }
  };
  let file: StoredFile;
  try {
    file = await context.processor.processSync(principal, async () => {
      const scanned = await context.processor.scan(pieces(), {
        categories: principal.detectionCategories,
        accountId: principal.accountId,
      });
      return {
        scanned,
        submission: {
          principal,
          version: 'v2.2',
          metadata: { icap_service: request.service, icap_method: request.method },
          callback: null,
          fileName,
        },
        events: [event(`ICAP ${request.method} to service ${request.service} from ${client}`)],
      };
    });
  } catch (error) {
    return answerWithoutVerdict(exchange, context, body, copy, error, fileName ?? '');
  }
  if (!body.complete) {
    // The engines had it all: only a final chunk can still be unread.
    await body.drain();
  }
  const findings = file.findings ?? [];
  if (findings.length === 0) {
    await answerClean(exchange, context, body, copy, file.id);
    return { outcome: 'clean', bytes: body.bytes, keepOpen: true };
  }
  await answerBlocked(exchange, context, {
    title: 'Blocked: the content was flagged',
    detail: `Findings: ${findings.join(', ')}.`,
    resultId: file.id,
    extra: findingHeaders(findings, fileName ?? ''),
  });
  return { outcome: 'flagged', bytes: body.bytes, keepOpen: true };
}

/** No verdict: an empty body is clean; too large is blocked (or passed); anything else an error. */
async function answerWithoutVerdict(
  exchange: Exchange,
  context: IcapContext,
  body: ChunkedBody,
  copy: BodyCopy | null,
  error: unknown,
  fileName: string,
): Promise<ExchangeResult> {
  if (error instanceof IcapClosedError || error instanceof IcapProtocolError) throw error;
  if (error instanceof EmptyContentError && body.complete) {
    await answerClean(exchange, context, body, copy);
    return { outcome: 'clean', bytes: 0, keepOpen: true };
  }
  if (error instanceof ContentTooLargeError) {
    if (context.settings.oversize === 'pass') {
      await answerClean(exchange, context, body, copy, null, [
        ['X-Assay-Unscanned', `too large: over ${error.limit} bytes, passed unscanned`],
      ]);
      return { outcome: 'oversize-passed', bytes: body.bytes, keepOpen: body.complete };
    }
    await answerBlocked(exchange, context, {
      title: 'Blocked: the content is too large to be scanned',
      detail: `The content exceeds the limit of ${error.limit} bytes, so it was not scanned.`,
      resultId: null,
      extra: [
        ['X-Assay-Unscanned', `too large: over ${error.limit} bytes, blocked`],
        // The rest of the body is not read: the connection cannot serve another request.
        ['Connection', 'close'],
      ],
    });
    return { outcome: 'oversize-blocked', bytes: body.bytes, keepOpen: false };
  }
  const failure = failureOf(error, fileName);
  if (failure.status === 500 && !(error instanceof ContentNotExaminedError)) {
    context.logger.error({ err: error }, 'an ICAP scan failed');
  }
  await answerFailure(exchange.socket, context, failure, !body.complete);
  return { outcome: 'error', bytes: body.bytes, keepOpen: body.complete };
}

function failureOf(error: unknown, fileName: string): IcapFailure {
  const named = fileName === '' ? 'the content' : `"${fileName}"`;
  if (error instanceof EngineUnavailableError) return { status: 503, reason: error.message };
  if (error instanceof ContentNotExaminedError) {
    return { status: 500, reason: `${named} could not be examined: ${error.message}` };
  }
  if (error instanceof BalanceSpentError) return { status: 500, reason: error.message };
  if (error instanceof EmptyContentError) {
    return { status: 400, reason: 'the body ended before its last chunk' };
  }
  if (isStoreUnavailable(error)) {
    return { status: 503, reason: 'the service cannot record results right now: retry later' };
  }
  return { status: 500, reason: 'the scan failed; nothing was passed' };
}

/**
 * Clean: 204 where allowed (or the body ended in its preview), else 206 using the original body
 * where offered, else the message unmodified, its body read back from the copy and then, for
 * content passed unscanned while it was still arriving, from the client.
 */
async function answerClean(
  exchange: Exchange,
  context: IcapContext,
  body: ChunkedBody | null,
  copy: BodyCopy | null,
  resultId: string | null = null,
  extra: HeaderList = [],
): Promise<void> {
  const { request, socket } = exchange;
  const common: Array<readonly [string, string]> = [
    ['ISTag', await context.tag.current()],
    ...(resultId === null ? [] : ([['X-Assay-Result-Id', resultId]] as const)),
    ...extra,
    ['Date', new Date().toUTCString()],
  ];
  if (request.allow204 || body?.endedInPreview === true) {
    if (body !== null && !body.complete) await body.drain();
    exchange.answered = true;
    await send(socket, icapHead(204, [...common, ['Encapsulated', 'null-body=0']]));
    return;
  }
  const heads = originalHeads(request);
  if (request.allow206 && body !== null) {
    if (!body.complete) await body.drain();
    exchange.answered = true;
    await send(
      socket,
      Buffer.concat([
        icapHead(206, [...common, ['Encapsulated', encapsulated(request.method, heads, true)]]),
        ...heads.map((part) => part.head),
        Buffer.from('0; use-original-body=0\r\n\r\n'),
      ]),
    );
    return;
  }
  exchange.answered = true;
  await send(
    socket,
    Buffer.concat([
      icapHead(200, [
        ...common,
        ['Encapsulated', encapsulated(request.method, heads, body !== null)],
      ]),
      ...heads.map((part) => part.head),
    ]),
  );
  if (body === null) return;
  if (copy !== null) {
    for await (const piece of copy.pieces()) await sendChunk(socket, piece);
  }
  // Passed unscanned (too large): the rest goes on as it arrives.
  for (let piece = await body.read(); piece !== null; piece = await body.read()) {
    await sendChunk(socket, piece);
  }
  await send(socket, LAST_CHUNK);
}

async function sendChunk(socket: Exchange['socket'], piece: Buffer): Promise<void> {
  if (piece.length === 0) return;
  await send(socket, Buffer.concat([chunkHeader(piece.length), piece, CRLF]));
}

/** The heads sent back unmodified: RESPMOD's response head, REQMOD's request head. */
function originalHeads(request: Exchange['request']): Array<{ name: string; head: Buffer }> {
  if (request.method === 'REQMOD') {
    return request.requestHead === null ? [] : [{ name: 'req-hdr', head: request.requestHead }];
  }
  return request.responseHead === null ? [] : [{ name: 'res-hdr', head: request.responseHead }];
}

function encapsulated(
  method: Exchange['request']['method'],
  heads: Array<{ name: string; head: Buffer }>,
  hasBody: boolean,
): string {
  const entries: string[] = [];
  let offset = 0;
  for (const { name, head } of heads) {
    entries.push(`${name}=${offset}`);
    offset += head.length;
  }
  const bodyName = method === 'REQMOD' ? 'req-body' : 'res-body';
  entries.push(`${hasBody ? bodyName : 'null-body'}=${offset}`);
  return entries.join(', ');
}

/** A replaced response: 403 and a short page, JSON when the client's request asked for it. */
async function answerBlocked(
  exchange: Exchange,
  context: IcapContext,
  what: { title: string; detail: string; resultId: string | null; extra: HeaderList },
): Promise<void> {
  const accept = httpHeader(exchange.request.requestHead, 'accept') ?? '';
  const page = blockedResponse(
    what,
    /application\/json/i.test(accept) && !/text\/html/i.test(accept),
  );
  exchange.answered = true;
  await send(
    exchange.socket,
    Buffer.concat([
      icapHead(200, [
        ['ISTag', await context.tag.current()],
        ['Encapsulated', `res-hdr=0, res-body=${page.head.length}`],
        ...(what.resultId === null ? [] : ([['X-Assay-Result-Id', what.resultId]] as const)),
        ...what.extra,
        ['Date', new Date().toUTCString()],
      ]),
      page.head,
      chunkHeader(page.body.length),
      page.body,
      CRLF,
      LAST_CHUNK,
    ]),
  );
}
