import { createHash } from 'node:crypto';
import multipart from '@fastify/multipart';
import type { FastifyError, FastifyInstance } from 'fastify';
import type { ConsoleSession } from '../../accounts/console-access.js';
import { isStoreUnavailable } from '../../domain/failures.js';
import { HttpError } from '../http-error.js';
import { uploadPartLimits } from '../multipart-submission.js';
import { MAX_FORM_BYTES } from '../request-body.js';
import { CONSOLE_CSS, CONSOLE_JS } from './assets.js';
import { html } from './html.js';
import { page } from './layout.js';
import accounts from './routes/accounts.js';
import callbacks from './routes/callbacks.js';
import files from './routes/files.js';
import keys from './routes/keys.js';
import operations from './routes/operations.js';
import overview from './routes/overview.js';
import signIn from './routes/sign-in.js';
import upload from './routes/upload.js';
import { SignInRequired, sessionToken } from './session.js';

// No script or style from anywhere else, no framing, no form posting elsewhere.
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

function asset(body: string, type: string) {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"`;
  return { body, type, etag };
}

/**
 * The web console at /console (issue 27): pages rendered here for an account's users and
 * operators, behind a session cookie; no credentials of the API. Its own error page, in HTML.
 */
export default async function consoleRoutes(app: FastifyInstance) {
  const access = app.services.console;
  app.decorateRequest('consoleSession', null);
  app.addHook('onRequest', async (request) => {
    const token = sessionToken(request);
    request.consoleSession = token === '' ? null : await access.session(token);
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.headers(SECURITY_HEADERS);
    // Pages show account data: never kept by a browser or proxy cache.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    // The API's CORS does not apply: no other origin may read a console page.
    for (const name of [
      'access-control-allow-origin',
      'access-control-allow-headers',
      'access-control-allow-methods',
      'access-control-expose-headers',
    ]) {
      reply.removeHeader(name);
    }
    return payload;
  });
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: MAX_FORM_BYTES },
    (_request, body, done) => done(null, new URLSearchParams(String(body))),
  );
  // Bounded like the API's uploads, for any multipart form of the console (not busboy's defaults:
  // 1,000 fields of 1 MiB each, buffered).
  await app.register(multipart, {
    limits: uploadPartLimits(app.services.config.maxFileSize),
  });

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (error instanceof SignInRequired) {
      if (request.method === 'GET') {
        return reply.redirect(`/console/sign-in?next=${encodeURIComponent(request.url)}`, 303);
      }
      return reply
        .code(401)
        .type('text/html')
        .send(errorPage(request.consoleSession, 401, 'Sign in first.'));
    }
    let status = 500;
    let message = 'Something went wrong on our side. It has been logged; try again shortly.';
    if (error instanceof HttpError) {
      status = error.statusCode;
      message = error.message;
      reply.headers(error.headers);
    } else if (isStoreUnavailable(error)) {
      status = 503;
      message = 'The service cannot reach its database right now: try again shortly.';
      reply.header('retry-after', '5');
    } else if (
      typeof error.statusCode === 'number' &&
      error.statusCode >= 400 &&
      error.statusCode < 500
    ) {
      status = error.statusCode;
      message = error.message;
    }
    if (status >= 500) request.log.error({ err: error }, 'console page failed');
    return reply
      .code(status)
      .type('text/html')
      .send(errorPage(request.consoleSession, status, message));
  });

  const css = asset(CONSOLE_CSS, 'text/css; charset=utf-8');
  const js = asset(CONSOLE_JS, 'text/javascript; charset=utf-8');
  for (const [path, file] of [
    ['/assets/console.css', css],
    ['/assets/console.js', js],
  ] as const) {
    app.get(path, async (request, reply) => {
      reply.header('etag', file.etag).header('cache-control', 'no-cache');
      if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
      return reply.type(file.type).send(file.body);
    });
  }
  await app.register(signIn);
  await app.register(overview);
  await app.register(keys);
  await app.register(upload);
  await app.register(accounts);
  await app.register(operations);
  await app.register(files);
  await app.register(callbacks);
}

function errorPage(session: ConsoleSession | null, status: number, message: string): string {
  return page({
    title: status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : 'Something went wrong',
    session,
    body: html`<p class="notice error" role="alert">${message}</p><p><a href="/console">Back to the overview</a></p>`,
  });
}
