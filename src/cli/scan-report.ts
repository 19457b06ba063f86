import { bar } from './progress.js';
import type { FileResult } from './scan-client.js';
import { displayPath, escapeControl, jsonPath } from './scan-names.js';

/** How one file ended. */
export type Verdict = 'clean' | 'flagged' | 'error';

export interface Outcome {
  path: Buffer;
  verdict: Verdict;
  /** The server's result, when it sent one (with `error` when the server could not decide). */
  result?: FileResult;
  /** Why there is no verdict. */
  error?: string;
}

/** A result's verdict: flagged with findings, error with `error` or without a findings array. */
export function verdictOf(result: FileResult): Verdict {
  if (typeof result.error === 'string') return 'error';
  if (!Array.isArray(result.findings)) return 'error';
  return result.findings.length > 0 ? 'flagged' : 'clean';
}

/** One NDJSON line: the server's result (or the local error) and the local path. */
export function ndjsonLine(outcome: Outcome): string {
  const body = outcome.result ?? { error: outcome.error };
  return JSON.stringify({ path: jsonPath(outcome.path), ...body });
}

/** What the table shows beside a file: its findings, or why it has no verdict. */
export function detailOf(outcome: Outcome): string {
  const { result } = outcome;
  if (outcome.error !== undefined) return outcome.error;
  if (result === undefined) return '';
  if (typeof result.error === 'string') return result.error;
  if (!Array.isArray(result.findings)) return 'the result has no findings';
  return result.findings.map(String).join(', ');
}

/** A line of the final table: what it shows of an outcome (not the whole result). */
export interface TableRow {
  verdict: Verdict;
  /** The path and the detail, made safe for a terminal. */
  path: string;
  detail: string;
}

export function tableRow(outcome: Outcome): TableRow {
  return {
    verdict: outcome.verdict,
    path: displayPath(outcome.path),
    detail: printable(detailOf(outcome)),
  };
}

/** The final table, in the order given. */
export function formatTable(tableRows: TableRow[]): string {
  const rows = tableRows.map((row) => [row.verdict, row.path, row.detail]);
  const header = ['RESULT', 'PATH', 'FINDINGS / ERROR'];
  const widths = [0, 1].map((column) =>
    Math.max(...[header, ...rows].map((row) => (row[column] ?? '').length)),
  );
  return [header, ...rows]
    .map(([verdict = '', path = '', detail = '']) =>
      `${verdict.padEnd(widths[0] ?? 0)}  ${path.padEnd(widths[1] ?? 0)}  ${detail}`.trimEnd(),
    )
    .join('\n');
}

/**
 * Control characters shown escaped: a message may quote anyone's input (a name, a finding), and
 * terminal escape sequences must not reach the terminal as such. Paths: displayPath.
 */
export function printable(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, escapeControl);
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const whole = Math.ceil(seconds);
  if (whole < 60) return `${whole}s`;
  if (whole < 3600) return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
  return `${Math.floor(whole / 3600)}h${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * Progress of a scan on stderr: on a terminal a bar redrawn in place (items, bytes, rate, ETA);
 * elsewhere a plain line at each tenth of the files, so logs stay short. Notes (errors, skipped
 * entries) are printed above the bar. Bytes count when a file's verdict is in.
 */
export class ScanProgress {
  private readonly interactive: boolean;
  private totalFiles = 0;
  private totalBytes = 0;
  private doneFiles = 0;
  private doneBytes = 0;
  private startedAt = Date.now();
  private lastTenth = -1;
  private timer: NodeJS.Timeout | null = null;
  private shown = false;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.interactive = stream.isTTY === true;
  }

  /** While walking: how many files were found so far (terminal only). */
  walking(found: number): void {
    if (!this.interactive) return;
    this.stream.write(`\rwalking: ${found} files found\u001b[K`);
    this.shown = true;
  }

  start(totalFiles: number, totalBytes: number): void {
    this.totalFiles = totalFiles;
    this.totalBytes = totalBytes;
    this.startedAt = Date.now();
    if (this.interactive) {
      // Redrawn on a timer too, so the rate and ETA move while large files upload.
      this.timer = setInterval(() => this.draw(), 500);
      this.timer.unref();
    }
    this.draw();
  }

  fileDone(bytes: number): void {
    this.doneFiles += 1;
    this.doneBytes += bytes;
    this.draw();
  }

  /** A line of its own (a terminal's bar is redrawn under it). */
  note(line: string): void {
    if (this.interactive && this.shown) this.stream.write('\r\u001b[K');
    this.stream.write(`${line}\n`);
    if (this.interactive && this.timer !== null) this.draw();
    else this.shown = false;
  }

  finish(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.interactive && this.shown) this.stream.write('\n');
    this.shown = false;
  }

  /** The progress text, e.g. `[####....] 12/40 files, 3.1 MB/10.0 MB, 1.2 MB/s, ETA 6s`. */
  text(now = Date.now()): string {
    // Half files, half bytes: small files cost a request each, large ones their bytes.
    const fileFraction = this.totalFiles > 0 ? this.doneFiles / this.totalFiles : 1;
    const byteFraction = this.totalBytes > 0 ? this.doneBytes / this.totalBytes : 1;
    const fraction = (fileFraction + byteFraction) / 2;
    const seconds = Math.max(0.001, (now - this.startedAt) / 1000);
    const rate = this.doneBytes / seconds;
    const eta = fraction >= 1 ? 0 : fraction > 0 ? (seconds * (1 - fraction)) / fraction : Infinity;
    return (
      `scanning ${bar(fraction)} ${this.doneFiles}/${this.totalFiles} files, ` +
      `${formatBytes(this.doneBytes)}/${formatBytes(this.totalBytes)}, ` +
      `${formatBytes(Math.round(rate))}/s, ETA ${formatDuration(eta)}`
    );
  }

  private draw(): void {
    if (this.interactive) {
      this.stream.write(`\r${this.text()}\u001b[K`);
      this.shown = true;
      return;
    }
    const tenth = this.totalFiles === 0 ? 10 : Math.floor((this.doneFiles / this.totalFiles) * 10);
    if (tenth !== this.lastTenth) {
      this.lastTenth = tenth;
      this.stream.write(`${this.text()}\n`);
    }
  }
}
