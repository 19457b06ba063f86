import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TOKEN_TIMEOUT } from '../../../accounts/account-service.js';
import type { Token } from '../../../domain/records.js';
import type { ApiVersion } from '../../../processing/file-result.js';
import { HttpError } from '../../http-error.js';
import type { TokenBody } from '../../openapi/schemas.js';
import { keyHolderOf } from '../../plugins/authentication.js';
import { resourceLocation } from './locations.js';

function renderToken(token: Token): TokenBody {
  return { id: token.id, creation_date: token.creationDate, expiration_date: token.expirationDate };
}

/** `timeout` (form-encoded, integer seconds): absent means the default; anything odd is a 400. */
function timeoutOf(request: FastifyRequest): number {
  const raw = request.body instanceof URLSearchParams ? request.body.get('timeout') : null;
  if (raw === null || raw === '') return TOKEN_TIMEOUT.default;
  const seconds = /^\d{1,6}$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
  if (!(seconds >= TOKEN_TIMEOUT.min && seconds <= TOKEN_TIMEOUT.max)) {
    throw new HttpError(
      400,
      `timeout must be a whole number of seconds from ${TOKEN_TIMEOUT.min} to ${TOKEN_TIMEOUT.max}`,
    );
  }
  return seconds;
}

/**
 * Temporary tokens: POST /auth/tokens (`/auth/tokens/` too, as every path), GET and DELETE
 * /auth/tokens/{id}. Only API keys manage tokens; a token cannot mint another.
 */
export default async function tokens(app: FastifyInstance, options: { version: ApiVersion }) {
  const { accounts, config } = app.services;

  app.post('/auth/tokens', async (request, reply) => {
    const principal = keyHolderOf(request);
    const token = await accounts.createToken(principal, timeoutOf(request));
    const location = resourceLocation(
      request,
      config.publicUrl,
      options.version,
      `auth/tokens/${token.id}`,
    );
    return reply.code(201).header('location', location).send(renderToken(token));
  });

  app.get<{ Params: { id: string } }>('/auth/tokens/:id', async (request) => {
    const principal = keyHolderOf(request);
    const token = await accounts.findToken(principal.accountId, request.params.id);
    if (token === null) throw new HttpError(404, 'no such token');
    return renderToken(token);
  });

  app.delete<{ Params: { id: string } }>('/auth/tokens/:id', async (request, reply) => {
    const principal = keyHolderOf(request);
    if (!(await accounts.revokeToken(principal.accountId, request.params.id))) {
      throw new HttpError(404, 'no such token');
    }
    return reply.code(204).send();
  });
}
