import type { FastifyInstance } from 'fastify';
import { fileNameOfUrl } from '../../../domain/file-name.js';
import type { AddressPolicy } from '../../../outbound/address-policy.js';
import { redactUrl } from '../../../outbound/target.js';
import { newLegacyId, pendingResult } from '../../../processing/legacy-result.js';
import { HttpError } from '../../http-error.js';
import { parseCallbackUrl, parseHttpUrl } from '../../multipart-submission.js';
import { legacySubmitterOf } from './legacy-access.js';
import { legacyArguments, sendLegacy } from './legacy-reply.js';

/** An optional URL field: absent or empty is none. */
function optionalUrl(form: URLSearchParams, name: string): string | null {
  const value = form.get(name);
  return value === null || value === '' ? null : parseHttpUrl(name, value);
}

function optionalCallback(form: URLSearchParams, name: string, policy: AddressPolicy) {
  const value = form.get(name);
  return value === null || value === '' ? null : parseCallbackUrl(name, value, policy);
}

/**
 * POST /api/scan/fetch (form fields `url`, `callback`, `post_callback`): 200 with `pending` at
 * once; the download runs in the background through the SSRF guard, limited only by what the
 * engine is set up to scan. When done, `callback` gets a bare GET and `post_callback` the result.
 */
export default async function scanFetch(app: FastifyInstance) {
  const { intake, outbound } = app.services;

  app.post('/fetch', async (request, reply) => {
    const args = legacyArguments(request);
    const principal = legacySubmitterOf(request);
    if (!(request.body instanceof URLSearchParams)) {
      throw new HttpError(400, 'the request must be application/x-www-form-urlencoded with a url');
    }
    const location = optionalUrl(request.body, 'url');
    if (location === null) throw new HttpError(400, 'url is required: the URL of the content');
    const callback = optionalCallback(request.body, 'callback', outbound.fetch.policy);
    const postCallback = optionalCallback(request.body, 'post_callback', outbound.fetch.policy);
    const id = await intake.acceptFetch(
      principal,
      location,
      {
        apiVersion: 'v1.0',
        metadata: {},
        callback: null,
        legacy: { callback, postCallback, format: args.format, checksum: null },
        fileName: fileNameOfUrl(location),
      },
      `received: v1.0 fetch of ${redactUrl(location)}`,
      newLegacyId(),
    );
    return sendLegacy(reply, 200, pendingResult(id, null), args);
  });
}
