/**
 * Hostile inputs for every path that reads untrusted text (type classification, HTML
 * stripping, the language detector's name rule), and a timing harness. The harness runs in a worker thread: a super-linear path
 * freezes only the worker, which the test terminates at its deadline and reports by name.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { decodeKey, parseBucketEvent } from '../../src/buckets/bucket-events.js';
import { tagValue } from '../../src/buckets/verdict-tags.js';
import { LanguageDetector } from '../../src/engines/nsfw-language/detect.js';
import { htmlText } from '../../src/engines/nsfw-language/extract.js';
import {
  classifyText,
  isCsv,
  isJson,
  isUtf8Text,
  looksLikeHtml,
  TEXT_RULES,
} from '../../src/engines/text-type.js';
import { errorForLog } from '../../src/http/log-redaction.js';
import { workerCodeOf } from './entry.js';

type Generator = (size: number) => string;

/** `unit` repeated to `size` characters (or just over). */
function fill(unit: string, size: number): string {
  return unit.repeat(Math.ceil(size / unit.length));
}

/** The opening of a rule repeated, and each shortened by one: near misses all the way. */
function nearMisses(opening: string): Generator[] {
  return [
    (size) => fill(opening.slice(0, -1), size),
    (size) => opening + fill(opening.slice(0, -1), size),
    (size) => opening + fill(' ', size),
  ];
}

const SHEBANG: Generator[] = [
  (size) => `#!${fill(' ', size)}`,
  (size) => `#!${fill('/', size)}`,
  (size) => `#!${fill('a/', size)}`,
  (size) => `#!/usr/bin/env${fill(' ', size)}`,
  (size) => `#!${fill(' /env ', size)}`,
  (size) => `#!/usr/bin/${fill('python3.', size)}x`,
];

/** Hostile inputs by rule name (each entry of TEXT_RULES must have some: the test checks). */
const RULE_INPUTS: Record<string, Generator[]> = {
  pdf: [(size) => fill(' ', size), (size) => `${fill(' \t\r\n', size)}%PD`],
  rtf: nearMisses('{\\rtf'),
  postscript: nearMisses('%!PS'),
  binhex: nearMisses('(This file must be converted with BinHex'),
  'svg-declaration': [
    // The audit's upload: an XML declaration and empty comments (exponential in the old rule).
    (size) => `<?xml?>${fill('<!---->', size)}`,
    (size) => `<?xml version="1.0"?>${fill('<!---->', size)}`,
    (size) => `<?xml version="1.0"?>${fill('<!--', size)}`,
    (size) => `<?xml version="1.0"?>${fill('<!DOCTYPE svg ', size)}`,
    (size) => `<?xml version=${fill('<sv', size)}`,
    (size) => `<?xml version=${fill('a', size)}`,
  ],
  'svg-doctype': [
    (size) => `<!doctype${fill(' ', size)}`,
    (size) => fill('<!doctype ', size),
    (size) => fill('<!doctyp', size),
    (size) => fill('<!DOCTYPE\t\n', size),
  ],
  svg: nearMisses('<svg'),
  xml: nearMisses('<?xml'),
  python: SHEBANG,
  shell: SHEBANG,
  perl: SHEBANG,
  node: SHEBANG,
  ruby: SHEBANG,
  vcard: nearMisses('BEGIN:VCARD\n'),
  calendar: nearMisses('BEGIN:VCALENDAR\n'),
  mbox: [(size) => fill('From', size), (size) => `From ${fill(' ', size)}`],
  mail: [(size) => fill('From', size), (size) => fill('delivered-t', size)],
};
for (const rule of TEXT_RULES) {
  if (rule.name.startsWith('pem ')) {
    RULE_INPUTS[rule.name] = [
      ...nearMisses(`-----BEGIN ${rule.name.slice(4)}-----`),
      (size) => `-----BEGIN ${fill('A ', size)}`,
      (size) => fill('-----BEGIN ', size),
    ];
  }
}

const HTML_INPUTS: Generator[] = [
  (size) => fill('<', size),
  (size) => fill('<a hre', size),
  (size) => fill('<!doctype htm', size),
  (size) => fill('<head', size),
];

const JSON_INPUTS: Generator[] = [
  (size) => fill('[', size),
  (size) => fill('{"a":', size),
  (size) => `[${fill('1,', size)}`,
  (size) => `{${fill(' ', size)}`,
  (size) => `[${fill('"\\u00', size)}`,
  (size) => fill('[', size / 2) + fill(']', size / 2),
];

const CSV_INPUTS: Generator[] = [
  (size) => fill('"', size),
  (size) => fill('""', size),
  (size) => fill('"a', size),
  (size) => fill(',', size),
  (size) => fill('a,b,c\n', size),
  (size) => fill('",\n', size),
];

const UTF8_INPUTS: Generator[] = [
  (size) => fill('é', size / 2),
  (size) => fill('日本語', size / 3),
  (size) => fill('\u{1F600}', size / 4),
  (size) => fill('a\x1b[0m\t', size),
];

const TRIMMING_INPUTS: Generator[] = [
  (size) => `\uFEFF${fill(' ', size)}`,
  (size) => `\uFEFF${fill(' \t\r\n\f', size)}x`,
  (size) => fill('\uFEFF', size / 3),
];

/** What language extraction strips from HTML: comments, scripts, tags, entities. */
const HTML_TEXT_INPUTS: Generator[] = [
  (size) => fill('<!--', size),
  (size) => fill('<!-- -', size),
  (size) => fill('<script>', size),
  (size) => fill('<script', size),
  (size) => fill('<style></scrip', size),
  (size) => fill('<a', size),
  (size) => `<a${fill('a', size)}`,
  (size) => `<a${fill('-', size)}`,
  (size) => fill('</b ', size),
  (size) => fill('&', size),
  (size) => `&${fill('a', size)}`,
  (size) => `&#${fill('1', size)}`,
  (size) => `&#x${fill('f', size)}`,
];

/** Error text on its way to the log: URLs with and without passwords, token paths. */
const LOG_TEXT_INPUTS: Generator[] = [
  (size) => `a://x:${fill('y', size)}`,
  (size) => fill('a://x:', size),
  (size) => fill('postgres://', size),
  (size) => `http://${fill(':', size)}`,
  (size) => `s3://${fill('u:', size)}@`,
  (size) => fill('/auth/tokens/', size),
  (size) => fill('%', size),
];

/**
 * The language detector's reading of names (names.ts): every token a name term's neighbour,
 * each waiting on the next ("Nègre, Nègre, ..."), and given names longer than any word.
 */
const NAME_INPUTS: Generator[] = [
  (size) => fill('Jérôme Nègre ', size),
  (size) => fill('Nègre, ', size),
  (size) => fill('Nègre, J. ', size),
  (size) => fill('Sale Nègre ! ', size),
  (size) => fill('J. NÈGRE Dick ', size),
  (size) => fill('Jérôme\n        Nègre,\n J.\n', size),
  (size) => `Jérôme${fill(' \n', size)}Nègre`,
  (size) => `${fill('Jé', size)} Nègre`,
  (size) => fill(`J${'é'.repeat(150)} Nègre, J${'é'.repeat(150)} `, size),
];

/** One S3 record around `object`'s fields (its key and the rest, as JSON members). */
function s3Record(object: string, eventName = 'ObjectCreated:Put'): string {
  return `{"Records":[{"eventName":"${eventName}","s3":{"bucket":{"name":"abc"},"object":{${object}}}}]}`;
}

const BUCKET_EVENT_INPUTS: Generator[] = [
  (size) => s3Record(`"key":"${fill('%41', size)}"`),
  (size) => s3Record(`"key":"${fill('%', size)}"`),
  (size) => s3Record(`"key":"${fill('+', size)}"`),
  (size) => s3Record(`"key":"a","eTag":"${fill('\\"', size)}"`),
  (size) => s3Record('"key":"a"', fill('s3:ObjectCreated', size)),
  (size) => `{"Records":[${fill('{"eventName":"ObjectRemoved:Delete"},', size)}{}]}`,
  (size) => fill('[', size),
  (size) =>
    `{"Type":"Notification","Message":${JSON.stringify(s3Record(`"key":"${fill('%2B', size)}"`))}}`,
];

const OBJECT_KEY_INPUTS: Generator[] = [
  (size) => fill('%41', size),
  (size) => fill('%E2%82', size),
  (size) => fill('+%', size),
];

const TAG_VALUE_INPUTS: Generator[] = [
  (size) => fill('<>', size),
  (size) => fill('content.malicious.x ', size),
  (size) => fill('\u{1F600}', size),
];

/** Calls `parse`, whose refusal of hostile input is expected: only its time matters. */
function refusing(parse: (input: string) => unknown): (input: string) => unknown {
  return (input) => {
    try {
      return parse(input);
    } catch (error) {
      return error;
    }
  };
}

export interface TextPath {
  name: string;
  inputs: Generator[];
  run(input: string): unknown;
}

/** Every path that reads untrusted text, with its hostile inputs. */
export function textPaths(): TextPath[] {
  const utf8 = (input: string) => isUtf8Text(Buffer.from(input));
  const languages = new LanguageDetector(); // built here: its lexicon is not what is timed
  return [
    ...TEXT_RULES.map((rule) => ({
      name: `rule ${rule.name}`,
      inputs: RULE_INPUTS[rule.name] ?? [],
      // The whole input, not the rule's window: the rule itself must be linear.
      run: (input: string) => rule.matches(input),
    })),
    { name: 'HTML tags', inputs: HTML_INPUTS, run: looksLikeHtml },
    { name: 'JSON (whole)', inputs: JSON_INPUTS, run: (input) => isJson(input, true) },
    { name: 'JSON (opening)', inputs: JSON_INPUTS, run: (input) => isJson(input, false) },
    { name: 'CSV', inputs: CSV_INPUTS, run: isCsv },
    { name: 'UTF-8 check', inputs: UTF8_INPUTS, run: utf8 },
    {
      name: 'BOM and white space',
      inputs: TRIMMING_INPUTS,
      run: (input) => classifyText(Buffer.from(input), true),
    },
    { name: 'HTML text extraction', inputs: HTML_TEXT_INPUTS, run: htmlText },
    {
      name: 'log redaction',
      inputs: LOG_TEXT_INPUTS,
      run: (input) => errorForLog(new Error(input)),
    },
    { name: 'language names', inputs: NAME_INPUTS, run: (input) => languages.detect(input) },
    { name: 'bucket events', inputs: BUCKET_EVENT_INPUTS, run: refusing(parseBucketEvent) },
    { name: 'object keys', inputs: OBJECT_KEY_INPUTS, run: refusing(decodeKey) },
    { name: 'tag values', inputs: TAG_VALUE_INPUTS, run: tagValue },
  ];
}

export const HOSTILE_SIZES = [1_000, 10_000, 100_000] as const;

export interface PathTiming {
  path: string;
  /** Milliseconds per size (HOSTILE_SIZES), summed over the path's inputs: the first run each. */
  first: number[];
  /** The same, best of a few runs: less noise for comparing growth. */
  best: number[];
}

function timeOnce(run: () => unknown): number {
  const start = performance.now();
  run();
  return performance.now() - start;
}

/**
 * Times every path on each of its inputs at each size, also end to end through classifyText.
 * `progress` hears each path's name before it runs, so a hang can be named.
 */
export function measureTextPaths(progress: (path: string) => void): PathTiming[] {
  const timings: PathTiming[] = [];
  for (const path of textPaths()) {
    progress(path.name);
    const first: number[] = [];
    const best: number[] = [];
    for (const size of HOSTILE_SIZES) {
      let firstSum = 0;
      let bestSum = 0;
      for (const generate of path.inputs) {
        const input = generate(size);
        const head = Buffer.from(input);
        const both = () => {
          path.run(input);
          classifyText(head, true);
        };
        const runs = [timeOnce(both), timeOnce(both), timeOnce(both)];
        firstSum += runs[0] ?? 0;
        bestSum += Math.min(...runs);
      }
      first.push(firstSum);
      best.push(bestSum);
    }
    timings.push({ path: path.name, first, best });
  }
  return timings;
}

/** Runs measureTextPaths in a worker; rejects naming the path still running at the deadline. */
export function measureTextPathsInWorker(deadlineMs: number): Promise<PathTiming[]> {
  const entry = new URL(import.meta.url).href;
  const worker = new Worker(workerCodeOf(entry), { eval: true, workerData: 'measure-text-paths' });
  let current = '(starting)';
  return new Promise<PathTiming[]>((resolve, reject) => {
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`"${current}" did not finish within ${deadlineMs} ms: super-linear`));
    }, deadlineMs);
    worker.on('message', (message: { path: string } | { timings: PathTiming[] }) => {
      if ('path' in message) current = message.path;
      else {
        clearTimeout(timer);
        void worker.terminate();
        resolve(message.timings);
      }
    });
    worker.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

if (!isMainThread && workerData === 'measure-text-paths') {
  const port = parentPort;
  const timings = measureTextPaths((path) => port?.postMessage({ path }));
  port?.postMessage({ timings });
}
