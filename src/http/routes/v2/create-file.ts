import type { FastifyInstance } from 'fastify';
import type { ScannedContent } from '../../../processing/process-content.js';
import { HttpError } from '../../http-error.js';
import {
  checkUploadHeaders,
  FieldCollector,
  MAX_FIELD_BYTES,
  MAX_METADATA_ENTRIES,
} from '../../multipart-submission.js';
import { principalOf } from '../../plugins/authentication.js';
import { type ApiVersion, hasMetadata, renderFileResult } from '../../render.js';
import { fileLocation } from './locations.js';

/** POST /files: synchronous upload; answers 201 with the result once every engine has spoken. */
export default async function createFile(app: FastifyInstance, options: { version: ApiVersion }) {
  const { processor, config } = app.services;

  app.post('/files', async (request, reply) => {
    checkUploadHeaders(request, config.maxFileSize);
    const principal = principalOf(request);
    const collector = new FieldCollector(hasMetadata(options.version));
    let scanned: ScannedContent | null = null;

    const parts = request.parts({
      // One byte over the limit reaches the scanner, which refuses it with 413.
      limits: {
        fileSize: config.maxFileSize + 1,
        fieldSize: MAX_FIELD_BYTES,
        fields: MAX_METADATA_ENTRIES + 10,
      },
    });
    for await (const part of parts) {
      if (part.type === 'field') {
        collector.add(part.fieldname, String(part.value), part.valueTruncated);
      } else if (part.fieldname !== 'file') {
        part.file.resume(); // not ours: skip it
      } else if (scanned !== null) {
        throw new HttpError(400, 'send exactly one part named file');
      } else {
        // Fields may follow the file, so the result is recorded only after the last part.
        scanned = await processor.scan(part.file);
      }
    }
    if (scanned === null) {
      throw new HttpError(400, 'no content: send the content as a multipart part named file');
    }
    const file = await processor.record(scanned, { principal, ...collector.fields });
    return reply
      .code(201)
      .header('location', fileLocation(request, config.publicUrl, options.version, file.id))
      .send(renderFileResult(file, options.version));
  });
}
