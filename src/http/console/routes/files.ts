import type { FastifyInstance } from 'fastify';
import type { ConsoleSession } from '../../../accounts/console-access.js';
import type { Job, StoredFile, TraceEvent } from '../../../domain/records.js';
import type { DeliverySummary } from '../../../processing/callback-browser.js';
import {
  type FileDetail,
  type FileFilter,
  type FilePage,
  fileCursorText,
  fileFilterOf,
  isItemId,
  MAX_FINDING_FILTER,
  parseFileCursor,
} from '../../../processing/file-browser.js';
import { HttpError } from '../../http-error.js';
import {
  byteCount,
  dateTime,
  deliveryState,
  ERROR_CHARACTERS,
  linkTo,
  pager,
  queryFields,
  shortened,
} from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { page } from '../layout.js';
import { operatorSessionOf, sessionOf } from '../session.js';

const KIND_NAMES: Record<Job['kind'], string> = {
  upload: 'upload',
  fetch: 'fetch of a URL',
  bucket: 'object of a watched bucket',
};

import { breakableUrl, type Cell, stackedTable } from '../stacked-table.js';

/** As accounts.ts checks an account's id in a path. */
const ACCOUNT_ID = /^[A-Za-z0-9_-]{1,64}$/;

const FILTER_FIELDS = ['id', 'checksum', 'finding', 'flagged', 'from', 'to', 'before'] as const;

/** Findings as text first (a word, then the names): flagged is never shown by colour alone. */
function findingsCell(file: Pick<StoredFile, 'findings'>): SafeHtml {
  if (file.findings === null) return html`<span class="muted">no verdict</span>`;
  if (file.findings.length === 0) return html`<span class="clean">None</span>`;
  return html`<span class="flagged">Flagged:</span> ${file.findings.map(
    (name, index) => html`${index > 0 ? ', ' : ''}${name}`,
  )}`;
}

/** The filter's form, showing what was typed (`fields`) and what was wrong with it. */
function filterForm(fields: Record<string, string>, problems: readonly string[]): SafeHtml {
  const input = (name: string, label: string, attributes: SafeHtml = html``) =>
    html`<div><label for="filter-${name}">${label}</label><input type="text" id="filter-${name}" name="${name}" value="${fields[name] ?? ''}"${attributes}></div>`;
  return html`${
    problems.length === 0
      ? ''
      : html`<div class="notice error" role="alert"><p>The filter was not applied as written:</p><ul>${problems.map((p) => html`<li>${p}</li>`)}</ul></div>`
  }
<form method="get" action="/console/files" class="filters" role="search" aria-label="Filter the files">
${input('id', 'Id', html` maxlength="64" spellcheck="false"`)}
${input('checksum', 'Checksum (SHA-1)', html` maxlength="40" spellcheck="false"`)}
${input('finding', 'Finding (name or part of it)', html` maxlength="${MAX_FINDING_FILTER}"`)}
<div><label for="filter-from">From day (UTC)</label><input type="date" id="filter-from" name="from" value="${fields.from ?? ''}"></div>
<div><label for="filter-to">To day (UTC)</label><input type="date" id="filter-to" name="to" value="${fields.to ?? ''}"></div>
<div class="choices"><label for="filter-flagged"><input type="checkbox" id="filter-flagged" name="flagged" value="1"${fields.flagged === '' ? '' : html` checked`}> Only flagged</label></div>
<div class="actions"><button type="submit">Filter</button> <a href="/console/files">Clear</a></div>
</form>`;
}

const FILE_COLUMNS = [
  { title: 'Received (UTC)' },
  { title: 'File' },
  { title: 'Content type', wrap: true },
  { title: 'Length (bytes)', numeric: true },
  { title: 'Findings' },
  { title: 'Error', wrap: true },
] as const;

/** A link to a file: its name as the client gave it (if any), then its id. */
export function fileLink(file: Pick<StoredFile, 'id' | 'fileName'>, href: string): SafeHtml {
  const name = file.fileName ?? null;
  return name === null
    ? html`<a href="${href}" class="mono id">${file.id}</a>`
    : html`<a href="${href}"><span class="name">${name}</span><br><span class="mono id">${file.id}</span></a>`;
}

function fileCells(file: StoredFile): Cell[] {
  return [
    dateTime(file.creationDate),
    fileLink(file, `/console/files/${file.id}`),
    file.contentType ?? '',
    byteCount(file.contentLength),
    findingsCell(file),
    file.error === null
      ? ''
      : html`<span class="flagged">Error:</span> ${shortened(file.error, ERROR_CHARACTERS)}`,
  ];
}

function filesTable(list: FilePage, filtered: boolean): SafeHtml {
  if (list.files.length === 0) {
    return html`<p>${filtered ? 'No result matches this filter.' : 'No results yet.'}</p>`;
  }
  return stackedTable('Files', FILE_COLUMNS, list.files.map(fileCells));
}

function isFiltered(filter: FileFilter): boolean {
  return (
    filter.id !== null ||
    filter.checksum !== null ||
    filter.finding !== null ||
    filter.flaggedOnly ||
    filter.fromDay !== null ||
    filter.toDay !== null
  );
}

function detailList(entries: ReadonlyArray<[string, SafeHtml | string]>): SafeHtml {
  return html`<dl>${entries.map(([term, value]) => html`<dt>${term}</dt><dd>${value}</dd>`)}</dl>`;
}

/** Where an item's page is: the account's own, or an operator's view of another account's. */
type FileHref = (id: string) => string;

/** An item named in a trace message ("verdict of item <id> … reused"). */
const NAMED_ITEM =
  /\bitem ([0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b/g;

/** A trace message with the items it names as links to them. */
function traceMessage(message: string, fileHref: FileHref): SafeHtml {
  let out = html``;
  let from = 0;
  for (const match of message.matchAll(NAMED_ITEM)) {
    const id = match[1] ?? '';
    const at = (match.index ?? 0) + match[0].length - id.length;
    out = html`${out}${message.slice(from, at)}<a href="${fileHref(id)}" class="mono">${id}</a>`;
    from = at + id.length;
  }
  return html`${out}${message.slice(from)}`;
}

function traceTable(trace: readonly TraceEvent[], fileHref: FileHref): SafeHtml {
  if (trace.length === 0) return html`<p class="muted">No trace events.</p>`;
  return stackedTable(
    'Trace',
    [{ title: 'Time (UTC)' }, { title: 'Event', wrap: true }],
    trace.map((event) => [dateTime(event.timestamp), traceMessage(event.message, fileHref)]),
    { titled: false },
  );
}

function deliveriesTable(deliveries: readonly DeliverySummary[]): SafeHtml {
  if (deliveries.length === 0) return html``;
  return html`<h2>Callback deliveries</h2>${stackedTable(
    'Callback deliveries',
    [{ title: 'State' }, { title: 'Attempts', numeric: true }, { title: 'Last error', wrap: true }],
    deliveries.map((d) => [deliveryState(d), String(d.attempts), d.lastError ?? '']),
  )}<p><a href="/console/callbacks">All callback deliveries</a></p>`;
}

function resultBody(
  file: StoredFile,
  trace: readonly TraceEvent[],
  deliveries: readonly DeliverySummary[],
  fileHref: FileHref,
): SafeHtml {
  const metadata = Object.entries(file.metadata);
  return html`${detailList([
    ['Id', html`<span class="mono">${file.id}</span>`],
    [
      'Name',
      file.fileName == null
        ? html`<span class="muted">none given</span>`
        : html`<span class="name">${file.fileName}</span>`,
    ],
    ['Received (UTC)', dateTime(file.creationDate)],
    ['Findings', findingsCell(file)],
    ...(file.error === null ? [] : ([['Error', file.error]] as Array<[string, string]>)),
    ['Content type', file.contentType ?? ''],
    ['Length (bytes)', byteCount(file.contentLength)],
    ['Checksum (SHA-1)', html`<span class="mono">${file.checksum ?? ''}</span>`],
    ['SHA-256', html`<span class="mono">${file.sha256 ?? ''}</span>`],
    ['API key', html`<span class="mono">${file.apiKeyId}</span>`],
    [
      'Callback URL',
      file.callback === null
        ? html`<span class="muted">none</span>`
        : html`<span class="mono">${breakableUrl(file.callback)}</span>`,
    ],
    [
      'Metadata',
      metadata.length === 0
        ? html`<span class="muted">none</span>`
        : html`<ul class="plain">${metadata.map(([key, value]) => html`<li><span class="mono">${key}</span>: ${value}</li>`)}</ul>`,
    ],
  ])}
${deliveriesTable(deliveries)}
<h2 id="trace">Trace</h2>
${traceTable(trace, fileHref)}`;
}

function pendingBody(job: Job, trace: readonly TraceEvent[], fileHref: FileHref): SafeHtml {
  return html`<p class="notice" role="status">Accepted and still being processed: it has no result yet.</p>
${detailList([
  ['Id', html`<span class="mono">${job.id}</span>`],
  [
    'Name',
    job.fileName == null
      ? html`<span class="muted">none given</span>`
      : html`<span class="name">${job.fileName}</span>`,
  ],
  ['Accepted (UTC)', dateTime(job.creationDate)],
  ['Kind', KIND_NAMES[job.kind]],
  ['Attempts', String(job.attempts)],
])}
<h2 id="trace">Trace</h2>
${traceTable(trace, fileHref)}`;
}

/** A file's page body: its result or that it is still being processed, and its trace. */
function detailBody(detail: FileDetail, fileHref: FileHref, back: SafeHtml): SafeHtml {
  const body =
    detail.kind === 'pending'
      ? pendingBody(detail.job, detail.trace, fileHref)
      : resultBody(detail.file, detail.trace, detail.callbacks, fileHref);
  return html`<p><a href="#trace">Jump to the trace</a> · ${back}</p>${body}`;
}

/** GET /console/files (the account's results, filtered, a page at a time) and one result. */
export default async function files(app: FastifyInstance) {
  const browser = app.services.files;

  app.get('/files', async (request, reply) => {
    const session = sessionOf(request);
    const fields = queryFields(request.query, FILTER_FIELDS);
    const { filter, problems } = fileFilterOf(fields);
    const before = fields.before === '' ? null : parseFileCursor(fields.before);
    if (fields.before !== '' && before === null) {
      throw new HttpError(400, 'The page link is not valid: start again from the first page.');
    }
    const list = await browser.page(session.user.accountId, filter, before);
    const kept = { ...fields, before: null };
    const links = pager([
      before === null ? null : { href: linkTo('/console/files', kept), label: 'Newest results' },
      list.next === null
        ? null
        : {
            href: linkTo('/console/files', { ...kept, before: fileCursorText(list.next) }),
            label: 'Older results',
            next: true,
          },
    ]);
    const body = html`${filterForm(fields, problems)}
<p class="muted">Newest first. Work accepted with a 202 appears here once it has a result.</p>
${filesTable(list, isFiltered(filter))}
${links}`;
    return reply
      .code(problems.length === 0 ? 200 : 400)
      .type('text/html')
      .send(pageOf(session, 'Files', body));
  });

  app.get<{ Params: { id: string } }>('/files/:id', async (request, reply) => {
    const session = sessionOf(request);
    const { id } = request.params;
    const detail = isItemId(id) ? await browser.detail(session.user.accountId, id) : null;
    if (detail === null) throw new HttpError(404, 'This account has no such file.');
    const body = detailBody(
      detail,
      (other) => `/console/files/${other}`,
      html`<a href="/console/files">Back to the files</a>`,
    );
    return reply.type('text/html').send(pageOf(session, 'File', body));
  });

  // Operators only (404 for others): any account's file, linked from the operations page.
  app.get<{ Params: { account: string; id: string } }>(
    '/accounts/:account/files/:id',
    async (request, reply) => {
      const session = operatorSessionOf(request);
      const { account, id } = request.params;
      const detail =
        ACCOUNT_ID.test(account) && isItemId(id) ? await browser.detail(account, id) : null;
      if (detail === null) throw new HttpError(404, 'That account has no such file.');
      const body = detailBody(
        detail,
        (other) => `/console/accounts/${account}/files/${other}`,
        html`<a href="/console/accounts/${account}">Back to the account</a>`,
      );
      return reply
        .type('text/html')
        .send(page({ title: 'File', session, current: '/console/accounts', body }));
    },
  );
}

function pageOf(session: ConsoleSession, title: string, body: SafeHtml): string {
  return page({ title, session, current: '/console/files', body });
}
