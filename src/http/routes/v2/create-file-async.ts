import type { FastifyInstance } from 'fastify';
import { type ApiVersion, hasMetadata } from '../../../processing/file-result.js';
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
  const { config, intake, outbound } = app.services;
  const { version } = options;

  app.post('/files/async', async (request, reply) => {
    const principal = submitterOf(request);
    checkUploadHeaders(request, config.maxFileSize);
    // The quota is decided on the declared length before a byte is stored, and again as it streams.
    const upload = await intake.beginUpload(principal, declaredLength(request), config.maxFileSize);
    try {
      const { file, fileName, fields } = await readUploadForm(
        request,
        {
          maxFileSize: config.maxFileSize,
          acceptMetadata: hasMetadata(version),
          acceptLocation: false,
          policy: outbound.fetch.policy,
        },
        (content) => upload.store(content),
      );
      if (file === null) {
        throw new HttpError(400, 'no content: send the content as a multipart part named file');
      }
      await upload.commit(
        { apiVersion: version, metadata: fields.metadata, callback: fields.callback, fileName },
        (size) => `received: upload of ${size} bytes`,
      );
    } finally {
      await upload.end();
    }
    return reply
      .code(202)
      .header('location', fileLocation(request, config.publicUrl, version, upload.id))
      .send({ id: upload.id } satisfies AcknowledgementBody);
  });
}
