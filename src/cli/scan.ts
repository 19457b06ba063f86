import { type Command, type CommanderError, InvalidArgumentError } from 'commander';
import { MAX_GLOB_LENGTH } from './glob.js';
import { ApiClient, basicAuthorization, ScanError } from './scan-client.js';
import { AmbiguousArgumentError, argumentBytes, displayPath } from './scan-names.js';
import {
  detailOf,
  formatBytes,
  formatTable,
  ndjsonLine,
  type Outcome,
  printable,
  ScanProgress,
  type TableRow,
  tableRow,
  type Verdict,
  verdictOf,
} from './scan-report.js';
import { type FoundFile, type WalkNotice, walkPaths } from './scan-walk.js';

/** Exit codes: every file clean; something flagged (and no error); any error at all. */
export const EXIT_CLEAN = 0;
export const EXIT_FLAGGED = 1;
export const EXIT_ERROR = 2;

/** The longest wait before a retry, whatever `Retry-After` asks. */
const MAX_RETRY_WAIT_MS = 60_000;

interface ScanOptions {
  url?: string;
  key?: string;
  secret?: string;
  token?: string;
  concurrency: number;
  async?: boolean;
  pollTimeout: number;
  metadata?: Array<[string, string]>;
  exclude?: string[];
  json?: boolean;
  retries: number;
  timeout: number;
}

/** A mistake in the command line or the environment: said, exit code 2. */
class UsageError extends Error {}

/** `assay scan PATH...`: a client of the public API that scans files and folders. */
export function registerScanCommand(program: Command): void {
  program
    .command('scan')
    .description(
      'scan files and folders with a server of the API (exit 0 clean, 1 flagged, 2 error)',
    )
    .argument('<paths...>', 'files and folders (folders recursively; symbolic links not followed)')
    .option('--url <url>', 'the server, e.g. https://scan.example.com (ASSAY_URL)')
    .option('--key <key>', 'API key (ASSAY_KEY)')
    .option(
      '--secret <secret>',
      "the key's secret (better ASSAY_SECRET: others can see a command line)",
    )
    .option('--token <id>', 'a temporary token instead of a key (ASSAY_TOKEN)')
    .option('--concurrency <n>', 'files in flight at once (1-64)', integerIn(1, 64), 4)
    .option('--async', 'submit to /files/async and poll for each result')
    .option(
      '--poll-timeout <seconds>',
      'longest wait for an async result',
      integerIn(1, 86400),
      600,
    )
    .option('--metadata <key=value>', 'metadata sent with every file (repeatable)', metadataPair)
    .option('--exclude <glob>', 'skip entries that match (repeatable; see the docs)', glob)
    .option('--json', 'print one JSON result per line (NDJSON) instead of a table')
    .option('--retries <n>', 'retries after 429, 502 or 503, per request', integerIn(0, 20), 5)
    .option(
      '--timeout <seconds>',
      'longest a request may be silent, or take in all (an upload 4 s more per MB)',
      integerIn(1, 86400),
      300,
    )
    // Usage mistakes end with 2, as errors do: 1 means "flagged" to scripts.
    .exitOverride((error: CommanderError) => process.exit(error.exitCode === 0 ? 0 : EXIT_ERROR))
    .action(async (paths: string[], options: ScanOptions) => {
      // A reader that stops reading (`| head`): the remaining results have nowhere to go.
      process.stdout.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE') throw error;
        process.exit(EXIT_ERROR);
      });
      process.exitCode = await scan(paths, options).catch((error: unknown) => {
        const known = error instanceof ScanError || error instanceof UsageError;
        // Anything else is a bug: its stack helps whoever reports it.
        const text = known ? error.message : error instanceof Error ? error.stack : String(error);
        process.stderr.write(`assay scan: ${text}\n`);
        return EXIT_ERROR;
      });
    });
}

async function scan(paths: string[], options: ScanOptions): Promise<number> {
  const baseUrl = options.url ?? process.env.ASSAY_URL;
  if (baseUrl === undefined || baseUrl === '') throw new UsageError('give --url or ASSAY_URL');
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol)) {
    throw new UsageError(`not an http or https URL: ${baseUrl}`);
  }
  const roots = rootBytes(paths);
  const progress = new ScanProgress();
  const client = new ApiClient({
    baseUrl,
    authorization: authorizationFrom(options, process.env),
    retry: { retries: options.retries, maxWaitMs: MAX_RETRY_WAIT_MS },
    timeoutMs: options.timeout * 1000,
    onRetry: (what, status, waitMs, attempt) =>
      progress.note(
        `retrying ${printable(what)} after HTTP ${status} in ${(waitMs / 1000).toFixed(1)} s ` +
          `(retry ${attempt} of at most ${options.retries})`,
      ),
  });
  try {
    // Fails fast, before a long walk, on an unreachable server or refused credentials.
    await client.ping();
    const startedAt = Date.now();
    const counts: Record<Verdict, number> = { clean: 0, flagged: 0, error: 0 };
    // The table's lines, kept for the end with their place in the walk's order. With --json
    // nothing is kept: each result is printed as it arrives and forgotten.
    const rows: Array<TableRow & { order: number }> = [];
    const report = (outcome: Outcome, order: number) => {
      counts[outcome.verdict] += 1;
      if (outcome.verdict === 'error') {
        progress.note(`error: ${displayPath(outcome.path)}: ${printable(detailOf(outcome))}`);
      }
      if (options.json) process.stdout.write(`${ndjsonLine(outcome)}\n`);
      else rows.push({ ...tableRow(outcome), order });
    };
    const skipped: Skipped = { symlink: 0, special: 0, empty: 0, excluded: 0 };
    const files = await walkPaths(roots, {
      exclude: options.exclude ?? [],
      onProgress: (found) => progress.walking(found),
      onNotice: (notice) => {
        if (notice.kind === 'error') {
          // The walk's own errors come first in the table.
          report({ path: notice.path, verdict: 'error', error: notice.message }, -1);
          return;
        }
        skipped[notice.kind] += 1;
        if (notice.kind !== 'excluded') progress.note(skipLine(notice));
      },
    });
    const totalBytes = files.reduce((sum, file) => sum + file.size, 0);
    progress.start(files.length, totalBytes);
    await scanFiles(client, files, options, (index, file, outcome) => {
      report(outcome, index);
      progress.fileDone(file.size);
    });
    progress.finish();

    const summary =
      `${plural(files.length, 'file')} (${formatBytes(totalBytes)}) in ` +
      `${((Date.now() - startedAt) / 1000).toFixed(1)} s: ${counts.clean} clean, ` +
      `${counts.flagged} flagged, ${plural(counts.error, 'error')}${skippedText(skipped)}`;
    if (options.json) process.stderr.write(`${summary}\n`);
    else {
      // The walk's order: results arrive in any order.
      rows.sort((a, b) => a.order - b.order);
      process.stdout.write(`${formatTable(rows)}\n\n${summary}\n`);
    }
    // Nothing scanned is not "clean": every path may have been a link, excluded or empty.
    if (files.length === 0) {
      process.stderr.write('assay scan: no file was scanned\n');
      return EXIT_ERROR;
    }
    if (counts.error > 0) return EXIT_ERROR;
    return counts.flagged > 0 ? EXIT_FLAGGED : EXIT_CLEAN;
  } finally {
    client.close();
  }
}

/** Scans `files` with `--concurrency` of them in flight; a file's failure is its outcome. */
async function scanFiles(
  client: ApiClient,
  files: FoundFile[],
  options: ScanOptions,
  onDone: (index: number, file: FoundFile, outcome: Outcome) => void,
): Promise<void> {
  const metadata = options.metadata ?? [];
  const scanOne = async (file: FoundFile): Promise<Outcome> => {
    try {
      const result = options.async
        ? await client.result(
            await client.submit(file.path, metadata),
            Date.now() + options.pollTimeout * 1000,
          )
        : await client.scan(file.path, metadata);
      return { path: file.path, verdict: verdictOf(result), result };
    } catch (error) {
      if (!(error instanceof ScanError)) throw error;
      return { path: file.path, verdict: 'error', error: error.message };
    }
  };
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < files.length; index = next++) {
      const file = files[index];
      if (file !== undefined) onDone(index, file, await scanOne(file));
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, files.length) }, worker));
}

type Skipped = Record<Exclude<WalkNotice['kind'], 'error'>, number>;

function skippedText(skipped: Skipped): string {
  return (
    (skipped.symlink > 0 ? `; ${plural(skipped.symlink, 'symbolic link')} not followed` : '') +
    (skipped.special > 0 ? `; ${plural(skipped.special, 'special file')} skipped` : '') +
    (skipped.empty > 0 ? `; ${plural(skipped.empty, 'empty file')} skipped` : '') +
    (skipped.excluded > 0 ? `; ${plural(skipped.excluded, 'entry', 'entries')} excluded` : '')
  );
}

/** The bytes of the paths given (see argumentBytes): a mistake there is a usage mistake. */
function rootBytes(paths: string[]): Buffer[] {
  try {
    return argumentBytes(paths);
  } catch (error) {
    if (error instanceof AmbiguousArgumentError) throw new UsageError(error.message);
    throw error;
  }
}

/** Basic credentials: flags before variables, and a token before a key at each level. */
function authorizationFrom(options: ScanOptions, env: NodeJS.ProcessEnv): string {
  if (options.token !== undefined && options.key !== undefined) {
    throw new UsageError('give --token or --key, not both');
  }
  const token = options.token ?? (options.key === undefined ? env.ASSAY_TOKEN : undefined);
  if (token !== undefined && token !== '') return basicAuthorization(token, '');
  const key = options.key ?? env.ASSAY_KEY;
  const secret = options.secret ?? env.ASSAY_SECRET;
  if (key === undefined || key === '') {
    throw new UsageError('give --key and --secret (or ASSAY_KEY and ASSAY_SECRET), or --token');
  }
  if (secret === undefined) throw new UsageError('give --secret or ASSAY_SECRET with the key');
  return basicAuthorization(key, secret);
}

function skipLine(notice: Exclude<WalkNotice, { kind: 'error' | 'excluded' }>): string {
  const path = displayPath(notice.path);
  if (notice.kind === 'symlink')
    return `skipped: ${path} (a symbolic link: links are not followed)`;
  if (notice.kind === 'empty') return `skipped: ${path} (empty: the API refuses empty content)`;
  return `skipped: ${path} (${notice.type}, not a regular file)`;
}

function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

function integerIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const number = Number(value);
    if (!/^\d+$/.test(value) || number < min || number > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return number;
  };
}

function metadataPair(
  value: string,
  previous: Array<[string, string]> = [],
): Array<[string, string]> {
  const equals = value.indexOf('=');
  const key = equals < 0 ? '' : value.slice(0, equals).trim();
  if (key === '') throw new InvalidArgumentError('expected key=value');
  return [...previous, [key, value.slice(equals + 1)]];
}

function glob(value: string, previous: string[] = []): string[] {
  if (value === '' || value.length > MAX_GLOB_LENGTH) {
    throw new InvalidArgumentError(`expected a pattern of 1 to ${MAX_GLOB_LENGTH} characters`);
  }
  return [...previous, value];
}
