import assert from 'node:assert/strict';

/** One sample of Prometheus' text format: `name{label="value",…} number`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;

function labelValue(value: string): string {
  return value.replace(/\\(.)/g, (_, char: string) => (char === 'n' ? '\n' : char));
}

/** Every sample of a scrape; comments (HELP, TYPE) skipped, anything else malformed fails. */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    assert.ok(match, `not a sample line: ${line}`);
    const [, name = '', body = '', raw = ''] = match;
    const labels: Record<string, string> = {};
    LABEL.lastIndex = 0;
    let consumed = 0;
    for (let label = LABEL.exec(body); label !== null; label = LABEL.exec(body)) {
      labels[label[1] ?? ''] = labelValue(label[2] ?? '');
      consumed = LABEL.lastIndex;
    }
    assert.equal(consumed, body.length, `malformed labels: ${line}`);
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    assert.ok(!Number.isNaN(value) || raw === 'NaN' || raw === 'Nan', `not a number: ${line}`);
    samples.push({ name, labels, value });
  }
  return samples;
}

/** The sum of the series of `name` whose labels include `labels` (0 when there is none). */
export function total(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  return samples
    .filter(
      (sample) =>
        sample.name === name &&
        Object.entries(labels).every(([label, value]) => sample.labels[label] === value),
    )
    .reduce((sum, sample) => sum + sample.value, 0);
}

/** The series of `name` (with their labels), for a test to look at. */
export function series(samples: Sample[], name: string): Sample[] {
  return samples.filter((sample) => sample.name === name);
}

/** GET /metrics, which must answer 200 in the text format; its samples. */
export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Sample[]> {
  const response = await fetch(`${url}/metrics`, { headers });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseMetrics(text);
}

/** How far the series of `name` whose labels include `labels` moved between two scrapes. */
export function moved(before: Sample[], after: Sample[], name: string, labels = {}): number {
  return total(after, name, labels) - total(before, name, labels);
}
