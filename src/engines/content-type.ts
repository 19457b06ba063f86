import { Worker } from 'node:worker_threads';

/** libmagic sees at most this much of the content; the rest never changes its answer in practice. */
export const SNIFF_BYTES = 1024 * 1024;

/** Text is classified from its first 64 KiB. */
const TEXT_SNIFF_BYTES = 64 * 1024;

// The vendor's clients expect the vendor's names where libmagic has newer ones.
const VENDOR_NAMES: Record<string, string> = {
  'application/vnd.microsoft.portable-executable': 'application/x-msdownload',
  'application/x-dosexec': 'application/x-msdownload',
};

/**
 * True for UTF-8 (or ASCII) text: no NUL, no control characters but tab, newline, form feed,
 * carriage return and ESC (terminal output), and valid UTF-8 (a character cut at the end is fine).
 */
export function isUtf8Text(head: Buffer): boolean {
  const sample = head.subarray(0, TEXT_SNIFF_BYTES);
  for (const byte of sample) {
    if (byte === 0x7f) return false;
    if (
      byte < 0x20 &&
      byte !== 0x09 &&
      byte !== 0x0a &&
      byte !== 0x0c &&
      byte !== 0x0d &&
      byte !== 0x1b
    ) {
      return false;
    }
  }
  try {
    // stream: true holds back an incomplete last character instead of failing on it.
    new TextDecoder('utf-8', { fatal: true }).decode(sample, { stream: true });
    return true;
  } catch {
    return false;
  }
}

/** Rules at the start of the text, after white space, in libmagic's order and with its names. */
const TEXT_RULES: Array<[RegExp, string]> = [
  [/^%PDF-/, 'application/pdf'],
  [/^\{\\rtf/, 'text/rtf'],
  [/^%!PS/, 'application/postscript'],
  [/^\(This file must be converted with BinHex/, 'application/mac-binhex40'],
  [
    /^-----BEGIN (?:CERTIFICATE|[A-Z ]*PRIVATE KEY|PUBLIC KEY|CERTIFICATE REQUEST)-----/,
    'application/x-pem-file',
  ],
  [/^<\?xml[^>]*>\s*(?:<!--[\s\S]*?-->\s*|<!DOCTYPE svg[^>]*>\s*)*<svg[\s>]/i, 'image/svg+xml'],
  [/^<svg[\s>]/i, 'image/svg+xml'],
  [/^<\?xml\s/, 'text/xml'],
  [/^#!\s*\S*\/(?:env\s+)?python[0-9.]*\b/, 'text/x-script.python'],
  [/^#!\s*\S*\/(?:env\s+)?(?:ba|z|k|da)?sh\b/, 'text/x-shellscript'],
  [/^#!\s*\S*\/(?:env\s+)?perl\b/, 'text/x-perl'],
  [/^#!\s*\S*\/(?:env\s+)?(?:node|nodejs)\b/, 'text/javascript'],
  [/^#!\s*\S*\/(?:env\s+)?ruby\b/, 'text/x-ruby'],
  [/^BEGIN:VCARD\r?\n/i, 'text/vcard'],
  [/^BEGIN:VCALENDAR\r?\n/i, 'text/calendar'],
  [/^From \S/, 'application/mbox'],
  [/^(?:From|Received|Relay-Version|Path|Xref):|^(?:delivered-to|return-path):/i, 'message/rfc822'],
];

/** libmagic looks for these anywhere in the first 4 KB to call text HTML. */
const HTML_TAGS = /<(?:!doctype html|html|head[\s>]|title>|script|style|table|a href=)/i;

/** libmagic's JSON check: the whole document parses (a large one: it opens like JSON). */
function isJson(text: string, complete: boolean): boolean {
  if (!/^[[{]/.test(text)) return false;
  if (!complete) return /^(?:\{\s*"|\[\s*[[{"\d-])/.test(text);
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** libmagic's CSV check: the first lines (up to 10, at least 2) have the same number of commas. */
function isCsv(text: string): boolean {
  const lines = text.split('\n', 11).slice(0, 10);
  if (lines.length > 2 && lines[lines.length - 1] === '') lines.pop();
  if (lines.length < 2) return false;
  const commas = (line: string) => line.replace(/"[^"]*"/g, '').split(',').length - 1;
  const first = commas(lines[0] ?? '');
  return first > 0 && lines.every((line) => commas(line) === first);
}

/**
 * Media type of UTF-8 text. libmagic's text magic is hundreds of regular expressions: 4-9 ms for
 * a few KB of plain prose against 0.3 ms for binary content. These rules give its answers for the
 * text formats it names in practice; source code it would name by language stays text/plain.
 */
export function classifyText(head: Buffer, complete: boolean): string {
  const text = head
    .subarray(0, TEXT_SNIFF_BYTES)
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart();
  for (const [pattern, type] of TEXT_RULES) if (pattern.test(text)) return type;
  if (HTML_TAGS.test(text.slice(0, 4096))) return 'text/html';
  if (isJson(text, complete && head.length <= TEXT_SNIFF_BYTES)) return 'application/json';
  if (isCsv(text)) return 'text/csv';
  return 'text/plain';
}

type Reply = { ready: true } | { id: number; type: string } | { id: number; error: string };

const UNKNOWN = 'application/octet-stream';

/**
 * Media type detection: fast rules for UTF-8 text, libmagic (compiled to WASM) for binary content.
 * libmagic costs 0.3-0.5 ms of CPU per file, so it runs in a worker thread, in parallel with
 * clamd's scan, and the event loop stays free for other requests.
 */
export class ContentTypeDetector {
  private readonly pending = new Map<number, (type: string) => void>();
  private nextId = 0;
  private worker: Worker | null = null;
  private closed = false;

  private constructor(private readonly log: (message: string) => void) {}

  static async create(log: (message: string) => void = () => {}): Promise<ContentTypeDetector> {
    const detector = new ContentTypeDetector(log);
    await detector.startWorker();
    return detector;
  }

  /** `complete` says the head is the whole content, so a JSON document can be parsed whole. */
  async detect(head: Buffer, complete: boolean): Promise<string> {
    if (head.length > 0 && isUtf8Text(head)) return classifyText(head, complete);
    return this.detectWithLibmagic(head);
  }

  /** libmagic with its whole magic file, whatever the content (the tests' reference). */
  detectWithLibmagic(head: Buffer): Promise<string> {
    const worker = this.worker;
    // The media type is a description, not a verdict: without libmagic it is honestly unknown.
    if (worker === null) return Promise.resolve(UNKNOWN);
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      worker.postMessage({ id, head });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.worker?.terminate();
    this.worker = null;
  }

  private startWorker(): Promise<void> {
    const worker = spawnWorker();
    return new Promise((resolve, reject) => {
      let started = false;
      worker.on('message', (reply: Reply) => {
        if ('ready' in reply) {
          started = true;
          this.worker = worker;
          resolve();
          return;
        }
        const settle = this.pending.get(reply.id);
        this.pending.delete(reply.id);
        if ('error' in reply) this.log(`libmagic failed: ${reply.error}`);
        const type = 'type' in reply ? reply.type.split(';')[0]?.trim() || UNKNOWN : UNKNOWN;
        settle?.(VENDOR_NAMES[type] ?? type);
      });
      worker.on('error', (error) => {
        this.log(`content type worker failed: ${error.message}`);
        if (!started) reject(error);
      });
      worker.on('exit', () => {
        if (this.worker === worker) this.worker = null;
        for (const settle of this.pending.values()) settle(UNKNOWN);
        this.pending.clear();
        // Only a worker that once ran is restarted, after a pause: one that cannot start never will.
        if (started && !this.closed) {
          this.log('content type worker exited; restarting it in 1 s');
          setTimeout(() => {
            if (!this.closed) this.startWorker().catch(() => undefined);
          }, 1000).unref();
        }
      });
    });
  }
}

/** The worker runs the compiled .js file; under tsx (tests, development) it registers tsx first. */
function spawnWorker(): Worker {
  if (!import.meta.url.endsWith('.ts')) {
    return new Worker(new URL('./content-type-worker.js', import.meta.url));
  }
  const entry = new URL('./content-type-worker.ts', import.meta.url).href;
  const bootstrap = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true });
}
