import type { FastifyRequest } from 'fastify';
import type { Principal } from '../../../accounts/account-service.js';
import { HttpError } from '../../http-error.js';
import { principalOf } from '../../plugins/authentication.js';
import { fromClient } from '../../request-body.js';

/** v1.0 predates temporary tokens: they are understood and refused (406), before any body. */
export async function refuseTokens(request: FastifyRequest): Promise<void> {
  if (principalOf(request).tokenId !== null) {
    throw new HttpError(
      406,
      'temporary tokens are not accepted on v1.0: use an API key and secret',
    );
  }
}

/**
 * The principal of a v1.0 scan. v1.0 is a malware API: a key without MALWARE has that engine
 * disabled (406). A spent balance is 406 too: 401 would say the credentials are wrong.
 */
export function legacySubmitterOf(request: FastifyRequest): Principal {
  const principal = principalOf(request);
  if (!principal.detectionCategories.includes('MALWARE')) {
    throw new HttpError(406, 'the malware engine is disabled for this key: nothing was scanned');
  }
  if (principal.balanceExhausted) {
    throw new HttpError(406, 'the account has no balance left: nothing was scanned');
  }
  return principal;
}

/** Refuses a declared body over the v1.0 POST limit before reading a byte of it. */
export function refuseDeclaredOversize(request: FastifyRequest, maxBytes: number): void {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    throw new HttpError(413, `the content exceeds the maximum POST size of ${maxBytes} bytes`);
  }
}

/** The raw request body, as it streams in: v1.0 content is the body itself. */
export function rawBodyOf(request: FastifyRequest): AsyncIterable<Buffer> {
  return fromClient(request.raw as AsyncIterable<Buffer>, 'the request body could not be read');
}
