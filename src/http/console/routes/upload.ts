import type { FastifyInstance } from 'fastify';
import { csrfMatches } from '../../../accounts/console-access.js';
import { keptFileName } from '../../../domain/file-name.js';
import { HttpError } from '../../http-error.js';
import { checkUploadHeaders, uploadPartLimits } from '../../multipart-submission.js';
import { fromClient } from '../../request-body.js';
import { sizeText } from '../format.js';
import { html } from '../html.js';
import { csrfField, page } from '../layout.js';
import { sessionOf, sessionToken } from '../session.js';

/** A text field that came before the file part (the form puts them first); cut short: none. */
function fieldBefore(fields: Record<string, unknown>, name: string): string {
  const field = fields[name] as
    | { type?: string; value?: unknown; valueTruncated?: boolean }
    | undefined;
  return field?.type === 'field' && typeof field.value === 'string' && !field.valueTruncated
    ? field.value
    : '';
}

/**
 * GET /console/upload: a file scanned with one of the account's keys, as the API would, with a
 * progress bar; POST sends to the file's page once its result is recorded.
 */
export default async function upload(app: FastifyInstance) {
  const { accounts, processor, syncScans, config } = app.services;

  app.get('/upload', async (request, reply) => {
    const session = sessionOf(request);
    const { keys } = await accounts.overview(session.user.accountId);
    const active = keys.filter((key) => key.active);
    const body =
      active.length === 0
        ? html`<p>A test upload is scanned with one of the account's API keys: <a href="/console/keys#create">create one</a> first.</p>`
        : html`<p>The file is scanned as <code>POST /v2.2/files</code> would scan it with the chosen key (its detection categories apply), and recorded like any other result.</p>
<form method="post" action="/console/upload" enctype="multipart/form-data" data-upload>${csrfField(session)}
<label for="upload-key">API key</label>
<select id="upload-key" name="key">${active.map((key) => html`<option value="${key.id}">${key.id}${key.tags.length > 0 ? ` (${key.tags.join(', ')})` : ''}</option>`)}</select>
<label for="upload-file">File (at most ${sizeText(config.maxFileSize)})</label>
<input type="file" id="upload-file" name="file" required>
<p><button type="submit">Upload and scan</button></p>
<p><label for="upload-progress">Progress</label><progress id="upload-progress" value="0" max="1"></progress></p>
<p id="upload-status" role="status" aria-live="polite"></p>
</form>`;
    return reply
      .type('text/html')
      .send(page({ title: 'Test upload', session, current: '/console/upload', body }));
  });

  app.post('/upload', async (request, reply) => {
    const session = sessionOf(request);
    // The API's bounds: the fields before the file are buffered, so their number and size are
    // limited as they stream (413 at one too many), and a declared length past them is refused
    // before a byte is read.
    checkUploadHeaders(request, config.maxFileSize);
    const part = await request.file({
      limits: { ...uploadPartLimits(config.maxFileSize), files: 1 },
    });
    if (part === undefined) throw new HttpError(400, 'choose a file to upload');
    // Checked before a byte of the file is read: the form sends its fields first.
    if (!csrfMatches(sessionToken(request), fieldBefore(part.fields, 'csrf'))) {
      throw new HttpError(
        403,
        'the form is stale or was not sent from the console: reload the page and try again',
      );
    }
    const principal = await accounts.principalForAccountKey(
      session.user.accountId,
      fieldBefore(part.fields, 'key'),
    );
    if (principal === null) throw new HttpError(400, "choose one of the account's active keys");
    const release = syncScans.tryAcquire(principal.accountId);
    if (typeof release !== 'function') {
      throw new HttpError(503, 'busy: too many scans in progress; try again in a few seconds', {
        'retry-after': '2',
      });
    }
    try {
      const file = await processor.processSync(principal, async () => ({
        scanned: await processor.scan(
          fromClient<Buffer>(part.file, 'the upload could not be read'),
          {
            categories: principal.detectionCategories,
            accountId: principal.accountId,
          },
        ),
        submission: {
          principal,
          version: 'v2.2',
          metadata: {},
          callback: null,
          fileName: keptFileName(part.filename),
        },
      }));
      return reply.redirect(`/console/files/${file.id}`, 303);
    } finally {
      release();
    }
  });
}
