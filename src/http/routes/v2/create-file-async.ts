import type { FastifyInstance } from 'fastify';
import { newId } from '../../../accounts/credentials.js';
import { EmptyContentError } from '../../../processing/errors.js';
import { type ApiVersion, hasMetadata } from '../../../processing/file-result.js';
import { SpoolTooLargeError } from '../../../store/spool.js';
import { HttpError } from '../../http-error.js';
import { checkUploadHeaders, declaredLength, readUploadForm } from '../../multipart-submission.js';
import type { AcknowledgementBody } from '../../openapi/schemas.js';
import { submitterOf } from '../../plugins/authentication.js';
import { fileLocation } from './locations.js';

/**
 * POST /files/async: 202 once the content is on disk and the job is committed, so the promise
 * holds through a crash; the result follows by GET (404 until then) and by callback.
 */
export default async function createFileAsync(
  app: FastifyInstance,
  options: { version: ApiVersion },
) {
  const { config, spool, jobs, spoolQuota, outbound } = app.services;
  const { version } = options;

  app.post('/files/async', async (request, reply) => {
    const principal = submitterOf(request);
    const id = newId();
    const receivedAt = new Date().toISOString();
    checkUploadHeaders(request, config.maxFileSize);
    // The quota is decided on the declared length before a byte is stored, and again as it streams.
    const reservation = await spoolQuota.reserve(principal.accountId, declaredLength(request));
    let committed = false;
    // Whatever fails after the content is spooled (a second file part, a bad field after it, the
    // client going away, the job's commit) must not leave it behind.
    let written: string | null = null;
    try {
      const { file: spooled, fields } = await readUploadForm(
        request,
        {
          maxFileSize: config.maxFileSize,
          acceptMetadata: hasMetadata(version),
          acceptLocation: false,
          policy: outbound.fetch.policy,
        },
        async (content) => {
          try {
            const result = await spool.write(id, reservation.count(content), config.maxFileSize);
            written = result.path;
            return result;
          } catch (error) {
            if (error instanceof SpoolTooLargeError) throw new HttpError(413, error.message);
            throw error;
          }
        },
      );
      if (spooled === null) {
        throw new HttpError(400, 'no content: send the content as a multipart part named file');
      }
      if (spooled.size === 0) throw new EmptyContentError();
      await jobs.submit(
        {
          id,
          accountId: principal.accountId,
          apiKeyId: principal.keyId,
          apiVersion: version,
          kind: 'upload',
          state: 'pending',
          location: null,
          spoolPath: spooled.path,
          metadata: fields.metadata,
          callback: fields.callback,
          attempts: 0,
          runAfter: receivedAt,
          creationDate: receivedAt,
          size: spooled.size,
        },
        `received: upload of ${spooled.size} bytes`,
      );
      committed = true;
    } catch (error) {
      if (written !== null) await spool.remove(written);
      throw error;
    } finally {
      reservation.release(committed);
    }
    return reply
      .code(202)
      .header('location', fileLocation(request, config.publicUrl, version, id))
      .send({ id } satisfies AcknowledgementBody);
  });
}
