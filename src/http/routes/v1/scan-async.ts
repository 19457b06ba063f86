import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ContentTooLargeError } from '../../../processing/errors.js';
import { newLegacyId, pendingResult } from '../../../processing/legacy-result.js';
import { HttpError } from '../../http-error.js';
import { declaredLength } from '../../multipart-submission.js';
import { legacySubmitterOf, rawBodyOf, refuseDeclaredOversize } from './legacy-access.js';
import { legacyArguments, sendLegacy } from './legacy-reply.js';

/** Hashes content on its way through, for the checksum of the pending answer. */
async function* hashed(
  source: AsyncIterable<Buffer>,
  hash: ReturnType<typeof createHash>,
): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    hash.update(chunk);
    yield chunk;
  }
}

/**
 * POST /api/scan/async: the raw body is spooled to disk and the job committed before the answer,
 * 200 with `pending`; the result follows at /api/scan/status/<request_id>.
 */
export default async function scanAsync(app: FastifyInstance) {
  const { config, intake } = app.services;
  const maxBytes = config.legacyMaxPostSize;

  app.post('/async', async (request, reply) => {
    const args = legacyArguments(request);
    const principal = legacySubmitterOf(request);
    refuseDeclaredOversize(request, maxBytes);
    // The quota is decided on the declared length before a byte is stored, and again as it streams.
    const upload = await intake.beginUpload(
      principal,
      declaredLength(request),
      maxBytes,
      newLegacyId(),
    );
    try {
      const sha1 = createHash('sha1');
      try {
        await upload.store(hashed(rawBodyOf(request), sha1));
      } catch (error) {
        if (error instanceof ContentTooLargeError) {
          throw new HttpError(
            413,
            `the content exceeds the maximum POST size of ${maxBytes} bytes`,
          );
        }
        throw error;
      }
      const checksum = sha1.digest('hex');
      await upload.commit(
        {
          apiVersion: 'v1.0',
          metadata: {},
          callback: null,
          legacy: { callback: null, postCallback: null, format: args.format, checksum },
        },
        (size) => `received: v1.0 upload of ${size} bytes`,
      );
      return sendLegacy(reply, 200, pendingResult(upload.id, checksum), args);
    } finally {
      await upload.end();
    }
  });
}
