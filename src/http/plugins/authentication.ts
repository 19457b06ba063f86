import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal } from '../../accounts/account-service.js';
import { appliedRateLimit, type RateDecision } from '../../accounts/rate-limiter.js';
import { BalanceSpentError } from '../../processing/errors.js';
import { HttpError } from '../http-error.js';
import { failureBucketOf } from './client-address.js';

const CHALLENGE = { 'www-authenticate': 'Basic realm="Assay", charset="UTF-8"' };

function unauthorized(message: string): HttpError {
  return new HttpError(401, message, CHALLENGE);
}

/** Splits `Authorization: Basic base64(user:password)`; null when absent or malformed. */
export function parseBasic(header: string | undefined): { user: string; password: string } | null {
  if (header === undefined) return null;
  const match = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (match?.[1] === undefined) return null;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/**
 * Decorates requests with `principal` and provides `authenticate`, the onRequest hook of every
 * protected scope: it runs before any body is read, so an unauthenticated or rate-limited upload
 * costs nothing. Each key has a token bucket (a token draws on its key's); failed attempts draw on
 * a bucket of the client's address (its /64 for IPv6), checked before the credentials so guessing
 * cannot go fast.
 */
export const authentication = fp(async (app: FastifyInstance) => {
  const { rateLimit } = app.services.config;
  const limits = app.services.requestLimits;
  const { metrics } = app.services;

  app.decorateRequest('principal', null);
  app.decorate(
    'authenticate',
    async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const client = failureBucketOf(request.ip);
      const failures = await limits.failuresAllowed(client);
      if (!failures.allowed) {
        metrics.requestRefused('authentication-failure-limit');
        throw tooManyRequests(failures, 'too many failed authentications from this address');
      }
      const credentials = parseBasic(request.headers.authorization);
      const principal: Principal | null =
        credentials === null
          ? null
          : await app.services.accounts.authenticate(credentials.user, credentials.password);
      if (principal === null) {
        // A request without credentials is a client asking for the challenge, not a guess.
        if (credentials !== null) {
          metrics.authenticationFailed();
          await limits.recordFailure(client);
        }
        throw unauthorized(
          credentials === null
            ? 'authentication required: HTTP Basic with an API key and secret'
            : 'invalid credentials, or the key is disabled',
        );
      }
      const limit = appliedRateLimit(principal.rateLimit ?? rateLimit, principal.accountRateLimit);
      const decision = await limits.takeKeyRequest(principal.keyId, limit);
      if (limit.rate > 0) {
        reply.header('x-ratelimit-limit', decision.limit);
        reply.header('x-ratelimit-remaining', decision.remaining);
      }
      if (!decision.allowed) {
        metrics.requestRefused('key-rate-limit');
        throw tooManyRequests(decision, 'rate limit exceeded for this key');
      }
      request.principal = principal;
    },
  );
});

function tooManyRequests(decision: RateDecision, message: string): HttpError {
  return new HttpError(429, `${message}; retry after ${decision.retryAfterSeconds} s`, {
    'retry-after': String(decision.retryAfterSeconds),
  });
}

declare module 'fastify' {
  interface FastifyInstance {
    authenticate: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

/** The principal of an authenticated route; a route without the hook is a programming error. */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === null) throw new Error('route is missing the authenticate hook');
  return request.principal;
}

/** The principal of a request that submits content: refused (403) when its balance is spent. */
export function submitterOf(request: FastifyRequest): Principal {
  const principal = principalOf(request);
  // Refused before the body is read; the credit itself is taken when the item is accepted.
  if (principal.balanceExhausted) throw new BalanceSpentError();
  if (principal.detectionCategories.length === 0) {
    throw new HttpError(
      403,
      'this key has no detection category enabled: nothing would examine it',
    );
  }
  return principal;
}

/** The principal of an administrative request: API keys only, never a temporary token. */
export function keyHolderOf(request: FastifyRequest): Principal {
  const principal = principalOf(request);
  if (principal.tokenId !== null) {
    throw new HttpError(403, 'temporary tokens may not use this resource; use an API key');
  }
  return principal;
}
