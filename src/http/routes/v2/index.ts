import type { FastifyInstance } from 'fastify';
import type { ApiVersion } from '../../../processing/file-result.js';
import { HttpError } from '../../http-error.js';
import { MAX_FORM_BYTES } from '../../request-body.js';
import createFile from './create-file.js';
import createFileAsync from './create-file-async.js';
import fetchFile from './fetch-file.js';
import getAccount from './get-account.js';
import getFile from './get-file.js';
import getTrace from './get-trace.js';
import ping from './ping.js';
import tokens from './tokens.js';

export const API_VERSIONS: readonly ApiVersion[] = ['v2.0', 'v2.1', 'v2.2'];

/** One version's routes; every route in this scope needs credentials. */
export default async function v2Routes(app: FastifyInstance, options: { version: ApiVersion }) {
  app.addHook('onRequest', app.authenticate);
  // An id with a NUL names nothing (PostgreSQL could not even look it up): 404 on either store.
  app.addHook('preHandler', (request, _reply, done) => {
    const params = request.params as Record<string, string | undefined>;
    done(
      Object.values(params).some((value) => value?.includes('\u0000'))
        ? new HttpError(404, 'no such resource: its id holds a NUL')
        : undefined,
    );
  });
  // Uploads reach their route unread (the app's `*` parser) and are read there
  // (multipart-reader.ts); any other body type is refused by its route with 400.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: MAX_FORM_BYTES },
    (_request, body, done) => done(null, new URLSearchParams(String(body))),
  );
  await app.register(ping);
  // Only the version: passing `options` whole would apply its prefix a second time.
  const { version } = options;
  await app.register(createFile, { version });
  await app.register(getFile, { version });
  await app.register(createFileAsync, { version });
  await app.register(fetchFile, { version });
  await app.register(tokens, { version });
  if (version !== 'v2.0') await app.register(getAccount);
  if (version === 'v2.2') await app.register(getTrace);
}
