import type { FastifyInstance } from 'fastify';
import { MAX_FORM_BYTES } from '../../request-body.js';
import { refuseTokens } from './legacy-access.js';
import { legacyErrorHandler } from './legacy-reply.js';
import postRequired from './post-required.js';
import scan from './scan.js';
import scanAsync from './scan-async.js';
import scanFetch from './scan-fetch.js';
import scanStatus from './scan-status.js';

/**
 * The deprecated v1.0 API, on the v2.x engines, keys and store. Every answer, errors included,
 * is a v1.0 document in the requested format.
 */
export default async function v1Routes(app: FastifyInstance) {
  app.setErrorHandler(legacyErrorHandler);
  // A known path with another method is v1.0's 400 with `Allow`, as on the scan resources.
  app.setNotFoundHandler((request) => {
    throw app.unroutedError(request);
  });

  // Scan and async: the raw body is the content, whatever its declared type.
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_request, _payload, done) => done(null));
    await raw.register(postRequired);
    await raw.register(async (authenticated) => {
      authenticated.addHook('onRequest', app.authenticate);
      authenticated.addHook('onRequest', refuseTokens);
      await authenticated.register(scan);
      await authenticated.register(scanAsync);
    });
  });

  // Fetch: form fields; any other body reaches the route unread, which answers 400.
  await app.register(async (form) => {
    form.addHook('onRequest', app.authenticate);
    form.addHook('onRequest', refuseTokens);
    form.removeAllContentTypeParsers();
    form.addContentTypeParser('*', (_request, _payload, done) => done(null));
    form.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: MAX_FORM_BYTES },
      (_request, body, done) => done(null, new URLSearchParams(String(body))),
    );
    await form.register(scanFetch);
  });

  await app.register(async (status) => {
    status.addHook('onRequest', app.authenticate);
    status.addHook('onRequest', refuseTokens);
    await status.register(scanStatus);
  });
}
